// Relay sessions between two nodes' PeerLinks in one process, over real TCP on loopback, and
// which pairs of key sets authenticate while a cluster rolls over to a new key. Node "a" sorts
// first, so it dials and "b" accepts.
import { afterEach, describe, it } from "node:test";
import assert from "node:assert/strict";
import { cleanup, register } from "../../testing/cleanup.ts";
import { waitFor } from "../../testing/wait.ts";
import { ResetReason } from "../../tunnel/reset_reasons.ts";
import { Logger } from "../../util/log.ts";
import { PeerLinks } from "./peers.ts";

const KEY = "a-cluster-key-0123456789abcdef";
const OTHER = "another-cluster-key-0123456789";

/** Node `node`'s relay sessions under `keys`, listening on loopback; its log lines kept. */
async function peer(node: string, keys: string[]) {
  const lines: Record<string, unknown>[] = [];
  const log = new Logger({ level: "info", format: "json", sink: (l) => lines.push(JSON.parse(l)) });
  const links = new PeerLinks({
    node,
    keys,
    listen: { hostname: "127.0.0.1", port: 0 },
    handshakeTimeoutMs: 5_000,
    keepAliveMs: 1_000,
    log,
    onStream: (stream) => stream.reset(ResetReason.UnknownTunnel),
  });
  register(() => links.close());
  await links.start();
  return { links, lines };
}

describe("relay sessions", () => {
  afterEach(cleanup);

  it("come up between nodes holding the cluster key", async () => {
    const a = await peer("a", [KEY]);
    const b = await peer("b", [KEY]);
    a.links.want("b", b.links.address);
    b.links.want("a", a.links.address);
    await waitFor(() => a.links.connected("b") && b.links.connected("a"), "the relay session");
    assert.equal(a.links.list()[0].authFailures, 0);
  });

  it("are refused by a dialer whose peer does not hold the key, counted and said so", async () => {
    const a = await peer("a", [KEY]);
    const b = await peer("b", [OTHER]);
    a.links.want("b", b.links.address);
    b.links.want("a", a.links.address);
    await waitFor(() => a.links.list()[0]?.authFailures > 0, "the dialer to refuse the acceptor");
    assert.equal(a.links.connected("b"), false);
    assert.equal(b.links.connected("a"), false);
    const refused = a.lines.find((l) => l.msg === "cannot relay to node");
    assert.equal(refused?.detail, "node b does not hold the cluster key");
  });
});

describe("relay sessions while the cluster key rotates", () => {
  afterEach(cleanup);
  const OLD = KEY;
  const NEW = "new-cluster-key-0123456789abcdef";

  /** Nodes a (dialing) and b (accepting) with these keys, each wanting the other. */
  async function pair(aKeys: string[], bKeys: string[]) {
    const a = await peer("a", aKeys);
    const b = await peer("b", bKeys);
    a.links.want("b", b.links.address);
    b.links.want("a", a.links.address);
    return [a.links, b.links];
  }

  const together: [string, string[], string[]][] = [
    ["[new, old] dialing [old]", [NEW, OLD], [OLD]],
    ["[old] dialing [new, old]", [OLD], [NEW, OLD]],
    ["[old, new] dialing [new]", [OLD, NEW], [NEW]],
  ];
  for (const [what, aKeys, bKeys] of together) {
    it(`come up between nodes sharing a key: ${what}`, async () => {
      const [a, b] = await pair(aKeys, bKeys);
      await waitFor(() => a.connected("b") && b.connected("a"), "the relay session");
      assert.deepEqual(a.list().map((p) => [p.node, p.authFailures]), [["b", 0]]);
      assert.deepEqual(b.list().map((p) => [p.node, p.authFailures]), [["a", 0]]);
    });
  }

  const apart: [string, string[], string[]][] = [
    ["[new] dialing [old]", [NEW], [OLD]],
    ["[old] dialing [new]", [OLD], [NEW]],
  ];
  for (const [what, aKeys, bKeys] of apart) {
    it(`are refused between nodes sharing none: ${what}`, async () => {
      const [a, b] = await pair(aKeys, bKeys);
      await waitFor(() => a.list()[0]?.authFailures > 0, "the dialer to refuse the acceptor");
      assert.equal(a.connected("b"), false);
      assert.equal(b.connected("a"), false);
    });
  }
});
