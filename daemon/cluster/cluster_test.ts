import { after, describe, it } from "node:test";
import assert from "node:assert/strict";
import { randomSequence } from "../../testing/random_sequence.ts";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { cleanup, register } from "../../testing/cleanup.ts";
import { startNats } from "../../testing/nats.ts";
import { sleep, waitFor } from "../../testing/wait.ts";
import { Logger } from "../../util/log.ts";
import { EventFeed } from "../events.ts";
import { LocalRegistry } from "../registry/local_registry.ts";
import { TokenStore } from "../tokens/store.ts";
import { TunnelPorts } from "../tunnels/tunnel_ports.ts";
import type { ClusterConfig } from "../config/mod.ts";
import { testClusterConfig, testClusterKey } from "./_nats_link.ts";
import { type Cluster, joinCluster } from "./cluster.ts";

/** A log line as the test saw it: its fields, and when it came (performance.now()). */
type Line = Record<string, unknown> & { msg: string; at: number };

/** One node joined to the NATS at `url`, whose logs and counts the test reads. */
async function node(
  url: string,
  name: string,
  spreadMs: number,
  random: () => number,
  config: Partial<ClusterConfig> = {},
) {
  const lines: Line[] = [];
  const counts = new Map<string, number>();
  const log = new Logger({
    level: "info",
    format: "json",
    sink: (line) => lines.push({ ...JSON.parse(line), at: performance.now() }),
  });
  const dataDir = mkdtempSync(join(tmpdir(), "tunnelmux-cluster-"));
  register(() => rmSync(dataDir, { recursive: true, force: true }));
  const tokens = new TokenStore({ dataDir, log, onChange: () => {} });
  const cluster: Cluster = await joinCluster(
    { ...testClusterConfig(url, name), rereadSpreadMs: spreadMs, ...config },
    {
      local: new LocalRegistry({ node: name, tokens }),
      log,
      count: (event) => counts.set(event, (counts.get(event) ?? 0) + 1),
      handshakeTimeoutMs: 5_000,
      dataDir,
      onTokensChange: () => {},
      events: new EventFeed(),
      ports: new TunnelPorts(log),
      random,
    },
  );
  register(() => cluster.stop());
  const linesOf = (msg: string) => lines.filter((l) => l.msg === msg);
  return { cluster, lines, counts, linesOf };
}

describe("Cluster: NATS away and back", () => {
  after(cleanup);

  it("reads the buckets again once, after its random delay, when NATS comes back twice", async () => {
    const nats = await startNats();
    // Delays of 4.5 s, then 1.2 s, then 3 s twice: the first outlasts the flap that drops it.
    const a = await node(nats.url, "reread", 6_000, randomSequence(0.75, 0.2, 0.5, 0.5));
    const { cluster, linesOf } = a;
    const readsAtStart = cluster.registry.reads;
    assert.equal(readsAtStart, 3, "ports, services and hosts read at start");
    const state = (want: string) =>
      waitFor(() => cluster.view().nats.state === want, {
        timeoutMs: 20_000,
        message: `NATS ${want}`,
      });
    const flap = async () => {
      await nats.stop();
      await state("reconnecting");
      await nats.start();
      await state("connected");
    };

    await flap();
    await flap();
    const back = linesOf("NATS is back: reading the buckets again shortly");
    assert.deepEqual(back.map((l) => l.delayMs), [4_500, 1_200], "a delay drawn at each return");
    assert.equal(
      linesOf("reading the cluster's buckets again").length,
      0,
      "nothing read before the delay (the first delay outlasted both flaps)",
    );
    assert.equal(cluster.registry.reads, readsAtStart);

    await waitFor(() => linesOf("reading the cluster's buckets again").length > 0, {
      timeoutMs: 20_000,
      message: "the re-read",
    });
    const [reread] = linesOf("reading the cluster's buckets again");
    const connected = linesOf("NATS connected");
    const lastBack = connected[connected.length - 1];
    // A timer never fires before its delay (1 ms: the runtimes' clocks round to it).
    assert.ok(reread.at - lastBack.at >= 1_199, `read ${reread.at - lastBack.at} ms after`);
    await waitFor(() => cluster.registry.reads === readsAtStart + 3, "the buckets read");
    // Past the first return's delay too: had it not been dropped, it would have read by now.
    await sleep(Math.max(0, back[0].at + 4_500 - performance.now()) + 200);
    assert.equal(linesOf("reading the cluster's buckets again").length, 1, "once");
    assert.equal(cluster.registry.reads, readsAtStart + 3, "each bucket read once");
    assert.equal(a.counts.get("cluster_reread"), 1);

    // Back, then away during the delay and staying away past it: nothing is read meanwhile.
    const backLines = () => linesOf("NATS is back: reading the buckets again shortly");
    await flap();
    assert.equal(backLines()[2]?.delayMs, 3_000);
    await nats.stop();
    await state("reconnecting");
    await sleep(Math.max(0, backLines()[2].at + 3_000 - performance.now()) + 200);
    assert.equal(linesOf("reading the cluster's buckets again").length, 1, "none while away");
    // Back once more, then the node stops during the delay: nothing is read, no timer left.
    await nats.start();
    await state("connected");
    assert.equal(backLines()[3]?.delayMs, 3_000);
    await cluster.stop();
    await sleep(Math.max(0, backLines()[3].at + 3_000 - performance.now()) + 200);
    assert.equal(linesOf("reading the cluster's buckets again").length, 1, "none after stop");
    assert.equal(cluster.registry.reads, readsAtStart + 3);
  });
});

describe("Cluster: a relay listener on port 0", () => {
  after(cleanup);

  it("advertises the port it got, and the other node's relay session reaches it there", async () => {
    const nats = await startNats();
    // testClusterConfig listens on 127.0.0.1:0 and advertises 127.0.0.1:0; one cluster of two.
    const shared = { bucketPrefix: "port0", key: testClusterKey("port0") };
    const a = await node(nats.url, "port0-a", 3_000, Math.random, shared);
    const b = await node(nats.url, "port0-b", 3_000, Math.random, shared);
    for (const { cluster } of [a, b]) {
      assert.match(cluster.relayAddress, /^127\.0\.0\.1:\d+$/);
      assert.notEqual(cluster.relayAddress, "127.0.0.1:0");
      assert.equal(cluster.advertise, cluster.relayAddress);
    }
    // What each reads of the other (its presence entry) is the bound address.
    await waitFor(
      () => a.cluster.view().nodes.length === 2 && b.cluster.view().nodes.length === 2,
      {
        timeoutMs: 10_000,
        message: "each node seeing the other",
      },
    );
    const advertised = (view: ReturnType<Cluster["view"]>) =>
      Object.fromEntries(view.nodes.map((n) => [n.node, n.advertise]));
    const expected = { "port0-a": a.cluster.relayAddress, "port0-b": b.cluster.relayAddress };
    assert.deepEqual(advertised(a.cluster.view()), expected);
    assert.deepEqual(advertised(b.cluster.view()), expected);
    await waitFor(() => a.cluster.view().peers.some((p) => p.connected), {
      timeoutMs: 10_000,
      message: "the relay session between them",
    });
  });
});
