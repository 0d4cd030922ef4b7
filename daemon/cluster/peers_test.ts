// Relay sessions between two nodes' PeerLinks in one process, over real TCP on loopback, and
// which pairs of key sets authenticate while a cluster rolls over to a new key. Node "a" sorts
// first, so it dials and "b" accepts.
import { afterEach, describe, it } from "node:test";
import assert from "node:assert/strict";
import { connect, type Socket } from "node:net";
import type { Stream } from "../../protocol/stream.ts";
import { Flag, FrameType, HEADER_LENGTH } from "../../protocol/constants.ts";
import { readUint32 } from "../../protocol/header.ts";
import { cleanup, register } from "../../testing/cleanup.ts";
import { startTcpServer } from "../../testing/fake_servers.ts";
import { waitFor } from "../../testing/wait.ts";
import { ResetReason } from "../../tunnel/stream/reset_reasons.ts";
import { encodeStreamHeader, type StreamHeader } from "../../tunnel/stream/stream_header.ts";
import { concat } from "../../util/bytes/bytes.ts";
import { Logger } from "../../util/log.ts";
import { advertisedAddress, PeerLinks, relaySessionConfig } from "./peers.ts";
import { resolveSessionConfig } from "../../protocol/config.ts";

const KEY = "a-cluster-key-0123456789abcdef";
const OTHER = "another-cluster-key-0123456789";

/** Node `node`'s relay sessions under `keys`, listening on loopback; its log lines kept. */
async function peer(
  node: string,
  keys: string[],
  onStream: (stream: Stream, header: StreamHeader, rest: Uint8Array) => void = (stream) =>
    stream.reset(ResetReason.UnknownTunnel),
) {
  const lines: Record<string, unknown>[] = [];
  const log = new Logger({ level: "info", format: "json", sink: (l) => lines.push(JSON.parse(l)) });
  const links = new PeerLinks({
    node,
    keys,
    listen: { hostname: "127.0.0.1", port: 0 },
    handshakeTimeoutMs: 5_000,
    keepAliveMs: 1_000,
    log,
    onStream,
  });
  register(() => links.close());
  await links.start();
  return { links, lines };
}

describe("the relay listener", () => {
  afterEach(cleanup);

  it("names cluster.listen when its address is taken", async () => {
    const { links: first } = await peer("a", [KEY]);
    const second = new PeerLinks({
      node: "b",
      keys: [KEY],
      listen: { hostname: "127.0.0.1", port: first.port },
      handshakeTimeoutMs: 5_000,
      keepAliveMs: 1_000,
      log: new Logger({ level: "error", format: "json", sink: () => {} }),
      onStream: (stream) => stream.reset(ResetReason.UnknownTunnel),
    });
    register(() => second.close());
    await assert.rejects(second.start(), {
      message: `cannot listen for the cluster's relay sessions on 127.0.0.1:${first.port}: ` +
        "the address is in use (another daemon?); choose another with cluster.listen " +
        "(--cluster-listen)",
    });
  });
});

describe("the advertised relay address", () => {
  afterEach(cleanup);

  it("is cluster.advertise, its port 0 replaced by the port the listener got", async () => {
    const { links } = await peer("a", [KEY]);
    const port = links.port;
    assert.ok(port > 0, links.address);
    assert.equal(links.address, `127.0.0.1:${port}`);
    assert.equal(advertisedAddress("127.0.0.1:0", port), `127.0.0.1:${port}`);
    assert.equal(advertisedAddress("relay.example:0", port), `relay.example:${port}`);
    assert.equal(advertisedAddress("[::1]:0", port), `[::1]:${port}`);
    // A port given is kept (a forwarded port, another one in front of the listener).
    assert.equal(advertisedAddress("10.0.0.1:7090", port), "10.0.0.1:7090");
  });
});

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

/** A loopback TCP proxy to `port` that keeps every byte the far side sent back. */
async function tap(port: number) {
  const fromFar: Uint8Array[] = [];
  const server = await startTcpServer((near: Socket) => {
    const far = connect(port, "127.0.0.1");
    far.on("error", () => near.destroy());
    near.on("error", () => far.destroy());
    near.on("close", () => far.destroy());
    far.on("close", () => near.destroy());
    near.on("data", (chunk: Uint8Array) => far.write(chunk));
    far.on("data", (chunk: Uint8Array) => {
      fromFar.push(new Uint8Array(chunk));
      near.write(chunk);
    });
  });
  return { address: server.address, fromFar };
}

/** The frames in `bytes` (type, flags, stream id, length), a Data frame's payload skipped. */
function frames(bytes: Uint8Array): { type: number; flags: number; id: number; length: number }[] {
  const out = [];
  for (let at = 0; at + HEADER_LENGTH <= bytes.length && out.length < 10_000;) {
    const type = bytes[at + 1];
    const length = readUint32(bytes, at + 8);
    out.push({
      type,
      flags: (bytes[at + 2] << 8) | bytes[at + 3],
      id: readUint32(bytes, at + 4),
      length,
    });
    at += HEADER_LENGTH + (type === FrameType.Data ? length : 0);
  }
  return out;
}

describe("a relayed visitor's stream", () => {
  afterEach(cleanup);

  it("is acknowledged with the far node's answer, not in a frame and a write of its own", async () => {
    // B answers a turn later, as a relayed visitor is answered by B's client a hop later.
    const b = await peer("b", [KEY], (stream, _header, rest) => {
      setImmediate(() => {
        stream.write(rest);
        stream.end();
      });
    });
    const a = await peer("a", [KEY]);
    const wire = await tap(Number(b.links.address.split(":")[1]));
    a.links.want("b", wire.address);
    b.links.want("a", a.links.address);
    await waitFor(() => a.links.connected("b") && b.links.connected("a"), "the relay session");

    const stream = a.links.opener("b").open();
    const answer: Uint8Array[] = [];
    stream.onData = (chunk) => answer.push(new Uint8Array(chunk));
    let ended = false;
    stream.onEnd = () => ended = true;
    const header = encodeStreamHeader({
      kind: "visitor",
      tunnel: "t-1",
      remote: "127.0.0.9:1234",
      local: "127.0.0.2:80",
    });
    stream.write(concat([header, new TextEncoder().encode("hello")]));
    await waitFor(() => ended, "the answer's end");
    assert.equal(new TextDecoder().decode(concat(answer)), "hello");

    const mine = frames(concat(wire.fromFar)).filter((frame) => frame.id === stream.id);
    assert.deepEqual(mine[0], {
      type: FrameType.Data,
      flags: Flag.ACK,
      id: stream.id,
      length: 5,
    }, "the ACK rides on the answer's first frame");
  });
  it("is handed on in the turn its header arrives, with what else that read brought", async () => {
    // B echoes the first stream's bytes as they come, and marks a microtask queued with each:
    // the second stream, opened in the same write as those bytes, must reach B's handler before
    // that microtask, so what B writes for both leaves in one write, not a microtask apart.
    let marked = false;
    let markedBeforeSecond: boolean | undefined;
    const b = await peer("b", [KEY], (stream, header, rest) => {
      if (header.kind !== "visitor") return stream.reset(ResetReason.BadHeader);
      if (header.tunnel === "second") {
        markedBeforeSecond = marked;
        return stream.write(rest);
      }
      stream.write(rest);
      stream.onData = (chunk) => {
        queueMicrotask(() => marked = true);
        stream.write(new Uint8Array(chunk));
      };
      stream.resume();
    });
    const a = await peer("a", [KEY]);
    a.links.want("b", b.links.address);
    b.links.want("a", a.links.address);
    await waitFor(() => a.links.connected("b") && b.links.connected("a"), "the relay session");

    const open = (tunnel: string, first: string) => {
      const stream = a.links.opener("b").open();
      const answer: Uint8Array[] = [];
      stream.onData = (chunk) => answer.push(new Uint8Array(chunk));
      const header = encodeStreamHeader({ kind: "visitor", tunnel, remote: "r:1", local: "l:2" });
      stream.write(concat([header, new TextEncoder().encode(first)]));
      return { stream, text: () => new TextDecoder().decode(concat(answer)) };
    };
    const first = open("first", "one");
    await waitFor(() => first.text() === "one", "the first stream's answer");
    first.stream.write(new TextEncoder().encode("more"));
    const second = open("second", "two");
    await waitFor(() => first.text() === "onemore" && second.text() === "two", "both answers");
    assert.equal(markedBeforeSecond, false);
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

describe("relay sessions' tuning", () => {
  it("gives relayed streams the daemon's limits.streamWindow, frames of a whole window accepted", () => {
    assert.equal(
      resolveSessionConfig(relaySessionConfig({ keepAliveMs: 1_000 })).maxStreamWindow,
      6 * 1024 * 1024,
    );
    for (const streamWindow of [256 * 1024, 64 * 1024 * 1024]) {
      const config = resolveSessionConfig(relaySessionConfig({ keepAliveMs: 1_000, streamWindow }));
      assert.equal(config.maxStreamWindow, streamWindow);
      assert.ok(config.maxFrameLength >= streamWindow);
      assert.equal(config.keepAliveTimeout, 2_000);
    }
  });
});
