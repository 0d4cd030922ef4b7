import { describe, it } from "node:test";
import assert from "node:assert/strict";
import {
  addUdpCounters,
  newUdpCounters,
  serveUdpFlow,
  teeUdpCounters,
  UdpFlowTable,
  udpPolicer,
} from "./udp_flow.ts";
import { TokenBucket } from "../../util/timing/token_bucket.ts";
import { encodeStreamHeader } from "../stream/stream_header.ts";
import { readStreamHeader } from "../stream/read_stream_header.ts";
import { Session } from "../../protocol/session.ts";
import { memoryPair } from "../../transport/memory.ts";
import { openUdp, type UdpSocket } from "../../transport/udp.ts";
import { waitFor } from "../../testing/wait.ts";
import { pattern } from "../../util/bytes/bytes.ts";

/**
 * A tunnel in one process: a flow table (the daemon's exposed port) whose flows cross a yamux
 * session to serveUdpFlow (the client), which sends them to a UDP echo service that prefixes
 * each reply with the byte 0xee.
 */
async function tunnel(idleMs: number) {
  const closers: (() => void)[] = [];
  const [a, b] = memoryPair();
  const daemon = new Session(a, { client: false, config: { enableKeepAlive: false } });
  const client = new Session(b, { client: true, config: { enableKeepAlive: false } });
  closers.push(() => daemon.destroy(), () => client.destroy());
  const echo: UdpSocket = await openUdp({
    onMessage: (bytes, remote) => {
      const reply = new Uint8Array(bytes.length + 1);
      reply[0] = 0xee;
      reply.set(bytes, 1);
      echo.send(reply, remote.hostname, remote.port);
    },
  });
  closers.push(() => echo.close());
  const clientCounters = newUdpCounters();
  void (async () => {
    for (let i = 0; i < 100; i++) {
      const stream = await client.accept().catch(() => undefined);
      if (!stream) return;
      const { rest } = await readStreamHeader(stream, 5000);
      await serveUdpFlow(stream, {
        hostname: "127.0.0.1",
        port: echo.local.port,
        rest,
        idleMs,
        counters: clientCounters,
      });
    }
  })();
  const table = await UdpFlowTable.open({
    idleMs,
    openStream: (remote) => {
      const stream = daemon.open();
      stream.write(encodeStreamHeader({ kind: "udpVisitor", tunnel: "t", remote, local: "x:1" }));
      return stream;
    },
  });
  closers.push(() => table.close());
  return { table, clientCounters, close: () => closers.reverse().forEach((c) => c()) };
}

async function visitor(got: Uint8Array[]): Promise<UdpSocket> {
  return await openUdp({ onMessage: (bytes) => got.push(bytes) });
}

describe("udp flows", () => {
  it("carries datagrams both ways with their boundaries, each visitor its own flow", async () => {
    const { table, clientCounters, close } = await tunnel(60_000);
    const sockets: UdpSocket[] = [];
    try {
      const gotA: Uint8Array[] = [];
      const gotB: Uint8Array[] = [];
      const a = await visitor(gotA);
      const b = await visitor(gotB);
      sockets.push(a, b);
      const sizes = [0, 1, 100, 1400, 8000, 30_000];
      for (const size of sizes) {
        a.send(pattern(size, 1), "127.0.0.1", table.local.port);
        b.send(pattern(size, 2), "127.0.0.1", table.local.port);
        await waitFor(() => gotA.length === gotB.length && gotA.length === sizes.indexOf(size) + 1);
      }
      sizes.forEach((size, i) => {
        assert.deepEqual(gotA[i], new Uint8Array([0xee, ...pattern(size, 1)]));
        assert.deepEqual(gotB[i], new Uint8Array([0xee, ...pattern(size, 2)]));
      });
      assert.equal(table.flows.length, 2);
      assert.equal(table.counters.flowsOpen, 2);
      assert.equal(table.counters.datagramsIn, 2 * sizes.length);
      assert.equal(table.counters.datagramsOut, 2 * sizes.length);
      assert.equal(clientCounters.flowsOpen, 2);
      assert.equal(clientCounters.datagramsOut, 2 * sizes.length);
    } finally {
      sockets.forEach((s) => s.close());
      close();
    }
  });

  it("closes an idle flow on both sides, and a new datagram opens a new one", async () => {
    const { table, clientCounters, close } = await tunnel(150);
    const got: Uint8Array[] = [];
    const a = await visitor(got);
    try {
      a.send(new Uint8Array([1]), "127.0.0.1", table.local.port);
      await waitFor(() => got.length === 1);
      assert.equal(table.counters.flowsOpen, 1);
      await waitFor(() => table.counters.flowsOpen === 0 && clientCounters.flowsOpen === 0);
      assert.deepEqual(table.flows, []);
      a.send(new Uint8Array([2]), "127.0.0.1", table.local.port);
      await waitFor(() => got.length === 2);
      assert.deepEqual(got[1], new Uint8Array([0xee, 2]));
    } finally {
      a.close();
      close();
    }
  });

  it("drops a new visitor's datagrams beyond the flow limit, and counts them", async () => {
    const [s1, s2] = memoryPair();
    const session = new Session(s1, { client: false, config: { enableKeepAlive: false } });
    const peer = new Session(s2, { client: true, config: { enableKeepAlive: false } });
    const table = await UdpFlowTable.open({ maxFlows: 1, openStream: () => session.open() });
    const a = await visitor([]);
    const b = await visitor([]);
    try {
      a.send(new Uint8Array([1]), "127.0.0.1", table.local.port);
      await waitFor(() => table.counters.flowsOpen === 1);
      b.send(new Uint8Array([2]), "127.0.0.1", table.local.port);
      await waitFor(() => table.counters.drops.flow_limit === 1);
      assert.equal(table.flows.length, 1);
    } finally {
      a.close();
      b.close();
      table.close();
      session.destroy();
      peer.destroy();
    }
  });

  it("asks admit for each new visitor: a refused one's datagrams are dropped, counted", async () => {
    const [s1, s2] = memoryPair();
    const session = new Session(s1, { client: false, config: { enableKeepAlive: false } });
    const peer = new Session(s2, { client: true, config: { enableKeepAlive: false } });
    const asked: string[] = [];
    let left = 0;
    let admitNext = false;
    const table = await UdpFlowTable.open({
      admit: (remote) => {
        asked.push(remote);
        return admitNext ? () => left++ : undefined;
      },
      openStream: () => session.open(),
    });
    const a = await visitor([]);
    try {
      a.send(new Uint8Array([1]), "127.0.0.1", table.local.port);
      a.send(new Uint8Array([2]), "127.0.0.1", table.local.port);
      await waitFor(() => table.counters.drops.refused === 2);
      assert.deepEqual(asked, [`127.0.0.1:${a.local.port}`, `127.0.0.1:${a.local.port}`]);
      assert.equal(table.counters.flows, 0);
      admitNext = true;
      a.send(new Uint8Array([3]), "127.0.0.1", table.local.port);
      await waitFor(() => table.counters.flowsOpen === 1);
      a.send(new Uint8Array([4]), "127.0.0.1", table.local.port);
      await waitFor(() => table.counters.datagramsIn === 2);
      assert.equal(asked.length, 3, "an open flow's datagrams are not asked about again");
      const [stream] = [...peer.streams()];
      stream.reset(0);
      await waitFor(() => table.counters.flowsOpen === 0);
      assert.equal(left, 1, "the flow's end is told once");
    } finally {
      a.close();
      table.close();
      session.destroy();
      peer.destroy();
    }
  });

  it("tee counters add each change to both; addUdpCounters leaves the gauge out when asked", () => {
    const session = newUdpCounters();
    const daemon = newUdpCounters();
    daemon.datagramsIn = 10;
    const both = teeUdpCounters(session, daemon);
    both.flowsOpen++;
    both.datagramsIn += 2;
    both.drops.queue_full++;
    both.flowsOpen--;
    assert.equal(both.datagramsIn, 2, "reads the first");
    assert.deepEqual([session.datagramsIn, daemon.datagramsIn], [2, 12]);
    assert.deepEqual([session.drops.queue_full, daemon.drops.queue_full], [1, 1]);
    assert.deepEqual([session.flowsOpen, daemon.flowsOpen], [0, 0]);
    const total = newUdpCounters();
    addUdpCounters(total, { ...daemon, flowsOpen: 3 }, false);
    assert.equal(total.flowsOpen, 0);
    assert.equal(total.datagramsIn, 12);
    addUdpCounters(total, { ...daemon, flowsOpen: 3 });
    assert.equal(total.flowsOpen, 3);
  });

  it("polices a direction: over the bandwidth a datagram is dropped until the debt is paid", () => {
    let now = 0;
    const bucket = new TokenBucket(1000, 1000, () => now); // 1000 bytes a second
    let limited = true;
    const police = udpPolicer(
      () => limited ? { spend: (n) => bucket.spend(n) } : undefined,
      () => now,
    );
    assert.deepEqual(
      [police(600), police(600), police(10)],
      [true, true, false],
      "the second goes into debt",
    );
    now += 100;
    assert.equal(police(10), false, "still in debt (200 bytes is 200 ms)");
    now += 100;
    assert.equal(police(10), true, "paid: the next goes");
    limited = false;
    assert.equal(police(1_000_000), true, "no limit, nothing held");
  });
});
