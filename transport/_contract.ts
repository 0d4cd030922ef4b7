/**
 * The behaviour every {@linkcode Transport} must show, as a reusable node:test suite (not a test
 * file itself: each adapter's `*_test.ts` runs it with its own pair factory).
 *
 * @module
 */

import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { Transport, TransportListener } from "../protocol/transport.ts";
import { echo, pattern, Probe, sameBytes, tick, writeAll } from "./_test_util.ts";
import { waitFor } from "../testing/wait.ts";

/** Two connected, not yet started transports and how to dispose of them. */
export interface Pair {
  /** The connecting side. */
  a: Transport;
  /** The accepting side. */
  b: Transport;
  /** Closes everything the factory opened. */
  cleanup(): void;
}

/** Makes a fresh pair; `highWaterMark` applies to both sides. */
export type PairFactory = (options: { highWaterMark?: number }) => Promise<Pair>;

/** How a TCP adapter connects and listens (the shape shared by all three adapters). */
export interface TcpAdapter {
  connect(
    address: { hostname: string; port: number },
    options?: { highWaterMark?: number },
  ): Promise<Transport>;
  listen(
    address: { hostname: string; port: number },
    onTransport: (transport: Transport) => void,
    options?: { highWaterMark?: number },
  ): Promise<TransportListener>;
}

/** A connected pair over loopback TCP through `adapter`. */
export function tcpPairFactory(adapter: TcpAdapter): PairFactory {
  return async (options) => {
    let accept!: (transport: Transport) => void;
    const accepted = new Promise<Transport>((resolve) => accept = resolve);
    const listener = await adapter.listen({ hostname: "127.0.0.1", port: 0 }, accept, options);
    try {
      const a = await adapter.connect({ hostname: "127.0.0.1", port: listener.port }, options);
      const b = await accepted;
      return {
        a,
        b,
        cleanup() {
          a.close();
          b.close();
          listener.close();
        },
      };
    } catch (error) {
      listener.close();
      throw error;
    }
  };
}

/** Runs `body` with a fresh pair and a probe on each side, cleaning the pair up after. */
export async function withPair(
  makePair: PairFactory,
  options: { highWaterMark?: number },
  body: (pair: Pair, pa: Probe, pb: Probe) => Promise<void>,
): Promise<void> {
  const pair = await makePair(options);
  const pa = new Probe();
  const pb = new Probe();
  try {
    await body(pair, pa, pb);
  } finally {
    pair.cleanup();
  }
}

/**
 * What a transport can do beyond the common contract, so one suite covers byte streams (TCP, TLS,
 * memory) and message transports without half-close (WebSocket).
 */
export interface TransportCapabilities {
  /** Skip the whole suite (an adapter of another runtime). Default false. */
  skip?: boolean;
  /**
   * `end()` closes only our direction and the peer may still write back (TCP). Without it (as in
   * WebSocket) `end()` flushes and then closes both ways: the peer sees end, then close. Default
   * true.
   */
  halfClose?: boolean;
  /** `pause()` stops reading from the peer, so the peer's writes get refused. Default true. */
  pauseStopsReading?: boolean;
  /** The close code the peer reports when our handler throws (WebSocket: 1011). */
  handlerErrorCloseCode?: number;
}

/** Runs the transport contract against pairs from `makePair`. */
export function transportContract(
  name: string,
  makePair: PairFactory,
  capabilities: TransportCapabilities = {},
): void {
  const { skip = false, halfClose = true, pauseStopsReading = true } = capabilities;
  describe(`${name}: transport contract`, { skip }, () => {
    it("echoes 4 MiB intact, keeping every received chunk valid", async () => {
      await withPair(makePair, {}, async ({ a, b }, pa, pb) => {
        const data = pattern(4 * 1024 * 1024, 7);
        echo(b, pb);
        a.start(pa);
        b.start(pb);
        await writeAll(a, pa, data);
        // Without half-close, end only once the echo is back, or it would be cut off.
        if (!halfClose) await pa.until(() => pa.bytes === data.length, "echo");
        a.end();
        await pa.until(() => pa.ends === 1, "echoed end");
        // Chunks were retained as handed over; reused read buffers would corrupt the early ones.
        assert.ok(sameBytes(pa.received(), data), "echoed bytes differ");
        assert.ok(sameBytes(pb.received(), data), "bytes seen by the echo side differ");
        await pa.until(() => pa.closes.length === 1 && pb.closes.length === 1, "both closed");
        assert.deepEqual(pa.log.filter((e) => e !== "drain"), ["end", "close"]);
        assert.deepEqual(pb.log.filter((e) => e !== "drain"), ["end", "close"]);
        assert.deepEqual(pa.closes, [undefined]);
        assert.deepEqual(pb.closes, [undefined]);
      });
    });

    it("returns false from write while the peer is paused, drains after resume, loses nothing", {
      skip: !pauseStopsReading && "this transport cannot stop reading; pause holds data in memory",
    }, async () => {
      await withPair(makePair, { highWaterMark: 64 * 1024 }, async ({ a, b }, pa, pb) => {
        a.start(pa);
        b.start(pb);
        b.pause();
        const chunk = 32 * 1024;
        const data = pattern(chunk * 2048, 3);
        let written = 0;
        let refused = false;
        // Kernel buffers absorb a few MiB first; the bound keeps a broken pause from looping on.
        while (written < data.length) {
          const ok = a.write(data.subarray(written, written + chunk));
          written += chunk;
          if (!ok) {
            refused = true;
            break;
          }
          await tick();
        }
        assert.ok(refused, "write never returned false");
        assert.ok(a.bufferedAmount >= 64 * 1024);
        assert.equal(pa.drains, 0);
        b.resume();
        await pa.until(() => pa.drains === 1, "drain");
        assert.ok(a.bufferedAmount < 64 * 1024);
        await pb.until(() => pb.bytes === written, "all bytes");
        assert.ok(sameBytes(pb.received(), data.subarray(0, written)));
      });
    });

    // The bench's full-duplex echo stalled when its last write was refused: it waited for a drain
    // before end(). This pins the transport's half of that: end() right after a refused write (no
    // drain awaited) still sends every queued byte, then the FIN, through a backpressured echo.
    it("end() right after a refused write flushes everything, then ends", async () => {
      const mark = 256 * 1024;
      await withPair(makePair, { highWaterMark: mark }, async ({ a, b }, pa, pb) => {
        // Kernel buffers take a few MiB first (node:net writes through at once); the size bounds it.
        const data = pattern(32 * mark, 11);
        echo(b, pb);
        a.start(pa);
        b.start(pb);
        let written = 0;
        let refused = false;
        while (!refused && written < data.length) {
          refused = !a.write(data.subarray(written, written + 16 * 1024));
          written += 16 * 1024;
        }
        assert.ok(refused, "write never returned false");
        a.end();
        const sent = data.subarray(0, written);
        await pb.until(() => pb.ends === 1, "end at the echo side");
        assert.ok(sameBytes(pb.received(), sent), "bytes at the echo side differ");
        // Without half-close the echo side cannot answer after our end: its bytes are lost.
        if (!halfClose) return;
        await pa.until(() => pa.ends === 1, "echoed end");
        assert.ok(sameBytes(pa.received(), sent), "echoed bytes differ");
      });
    });

    it("without half-close: end reaches the peer as end then close", {
      skip: halfClose && "this transport half-closes (next case)",
    }, async () => {
      await withPair(makePair, {}, async ({ a, b }, pa, pb) => {
        a.start(pa);
        b.start(pb);
        a.write(new TextEncoder().encode("ping"));
        a.end();
        assert.equal(a.write(new Uint8Array(1)), false, "writes after end are dropped");
        await pb.until(() => pb.closes.length === 1, "b closed");
        assert.equal(new TextDecoder().decode(pb.received()), "ping");
        assert.deepEqual(pb.log, ["end", "close"]);
        await pa.until(() => pa.closes.length === 1, "a closed");
        assert.deepEqual(pa.log, ["end", "close"]);
        assert.deepEqual([...pa.closes, ...pb.closes], [undefined, undefined]);
      });
    });

    it("half-closes: end reaches the peer, which can still write back", {
      skip: !halfClose && "this transport has no half-close (previous case)",
    }, async () => {
      await withPair(makePair, {}, async ({ a, b }, pa, pb) => {
        a.start(pa);
        b.start(pb);
        a.write(new TextEncoder().encode("ping"));
        a.end();
        assert.equal(a.write(new Uint8Array(1)), false, "writes after end are dropped");
        await pb.until(() => pb.ends === 1, "end at b");
        assert.equal(new TextDecoder().decode(pb.received()), "ping");
        assert.equal(pb.closes.length, 0, "b must stay open for writing");
        assert.equal(b.write(new TextEncoder().encode("pong")), true);
        await pa.until(() => pa.bytes === 4, "pong");
        assert.equal(new TextDecoder().decode(pa.received()), "pong");
        assert.equal(pa.ends, 0);
        b.end();
        await pa.until(() => pa.closes.length === 1 && pb.closes.length === 1, "both closed");
        assert.deepEqual(pa.log, ["end", "close"]);
        assert.deepEqual(pb.log, ["end", "close"]);
        assert.deepEqual([...pa.closes, ...pb.closes], [undefined, undefined]);
      });
    });

    it("close reports close exactly once and drops later writes", async () => {
      await withPair(makePair, {}, async ({ a, b }, pa, pb) => {
        a.start(pa);
        b.start(pb);
        a.write(new Uint8Array(100));
        await pb.until(() => pb.bytes === 100, "data");
        a.close();
        a.close();
        assert.equal(a.write(new Uint8Array(10)), false);
        assert.equal(a.bufferedAmount, 0);
        await pa.until(() => pa.closes.length === 1, "close at a");
        assert.equal(pa.closes[0], undefined);
        // The peer learns through end (FIN) or close, depending on the transport.
        await pb.until(() => pb.ends + pb.closes.length > 0, "peer notices");
        b.close();
        b.close();
        await pb.until(() => pb.closes.length === 1, "close at b");
        await tick(10);
        assert.equal(pa.closes.length, 1);
        assert.equal(pb.closes.length, 1);
        assert.equal(pa.log.at(-1), "close");
        assert.equal(pb.log.at(-1), "close");
      });
    });

    it("pause holds data until resume", async () => {
      await withPair(makePair, {}, async ({ a, b }, pa, pb) => {
        a.start(pa);
        b.start(pb);
        b.pause();
        a.write(new TextEncoder().encode("hello"));
        a.end();
        // Give the bytes every chance to arrive; none may be delivered while paused.
        await tick(30);
        assert.equal(pb.bytes, 0);
        assert.equal(pb.ends, 0);
        b.resume();
        await pb.until(() => pb.ends === 1, "end after resume");
        assert.equal(new TextDecoder().decode(pb.received()), "hello");
      });
    });

    it("pausing inside a data handler stops further deliveries at once", async () => {
      await withPair(makePair, {}, async ({ a, b }, pa, pb) => {
        a.start(pa);
        pb.onData = () => b.pause();
        b.start(pb);
        a.write(new Uint8Array(10));
        await pb.until(() => pb.bytes > 0, "first chunk");
        const seen = pb.chunks.length;
        a.write(new Uint8Array(10));
        await tick(30);
        assert.equal(pb.chunks.length, seen);
        pb.onData = undefined;
        b.resume();
        await pb.until(() => pb.bytes === 20, "rest");
      });
    });

    it("delivers what arrived before start, then the end", async () => {
      await withPair(makePair, {}, async ({ a, b }, pa, pb) => {
        a.start(pa);
        a.write(new TextEncoder().encode("early"));
        a.end();
        await tick(30);
        b.start(pb);
        await pb.until(() => pb.ends === 1, "end");
        assert.equal(new TextDecoder().decode(pb.received()), "early");
        b.end();
        await pa.until(() => pa.closes.length === 1, "a closed");
      });
    });

    it("closes with the error when a handler throws", async () => {
      await withPair(makePair, {}, async ({ a, b }, pa, pb) => {
        a.start(pa);
        pb.onData = () => {
          throw new Error("boom");
        };
        b.start(pb);
        a.write(new Uint8Array(1));
        await pb.until(() => pb.closes.length === 1, "close");
        assert.equal(pb.closes[0]?.message, "boom");
        await pa.until(() => pa.ends + pa.closes.length > 0, "peer notices");
        const code = capabilities.handlerErrorCloseCode;
        if (code === undefined) return;
        await pa.until(() => pa.closes.length === 1, "peer closed");
        assert.equal((pa.closes[0] as Error & { code?: number } | undefined)?.code, code);
      });
    });
  });
}

/** Listener and address behaviour of a TCP adapter. */
export function tcpContract(name: string, adapter: TcpAdapter, skip = false): void {
  describe(`${name}: tcp`, { skip }, () => {
    it("reports host:port addresses that match across the connection", async () => {
      await withPair(tcpPairFactory(adapter), {}, ({ a, b }) => {
        assert.match(a.remoteAddress, /^127\.0\.0\.1:\d+$/);
        assert.match(a.localAddress, /^127\.0\.0\.1:\d+$/);
        assert.equal(a.remoteAddress, b.localAddress);
        assert.equal(a.localAddress, b.remoteAddress);
        return Promise.resolve();
      });
    });

    it("binds port 0 to a real port and stops accepting on close, keeping transports open", async () => {
      const accepted: Transport[] = [];
      const listener = await adapter.listen(
        { hostname: "127.0.0.1", port: 0 },
        (t) => accepted.push(t),
      );
      assert.equal(listener.hostname, "127.0.0.1");
      assert.ok(listener.port > 0);
      const a = await adapter.connect({ hostname: "127.0.0.1", port: listener.port });
      const pa = new Probe();
      const pb = new Probe();
      try {
        a.start(pa);
        await waitFor(() => accepted.length === 1, "accept");
        assert.equal(accepted.length, 1);
        const closing = listener.close();
        await Promise.all([closing, listener.close()]);
        await assert.rejects(adapter.connect({ hostname: "127.0.0.1", port: listener.port }));
        // Once close() resolved the port can be bound again, while a transport is still open.
        const again = await adapter.listen(
          { hostname: "127.0.0.1", port: listener.port },
          (t) => t.close(),
        );
        await again.close();
        const b = accepted[0];
        b.start(pb);
        a.write(new TextEncoder().encode("still here"));
        await pb.until(() => pb.bytes === 10, "data after listener close");
        b.close();
      } finally {
        a.close();
        for (const t of accepted) t.close();
        listener.close();
      }
    });

    it("rejects a refused connection without an unhandled rejection", async () => {
      const listener = await adapter.listen({ hostname: "127.0.0.1", port: 0 }, (t) => t.close());
      const port = listener.port;
      listener.close();
      await tick(10);
      await assert.rejects(adapter.connect({ hostname: "127.0.0.1", port }));
    });

    it("closes a transport whose onTransport callback throws", async () => {
      const listener = await adapter.listen({ hostname: "127.0.0.1", port: 0 }, () => {
        throw new Error("rejected");
      });
      const a = await adapter.connect({ hostname: "127.0.0.1", port: listener.port });
      const pa = new Probe();
      try {
        a.start(pa);
        await pa.until(() => pa.ends + pa.closes.length > 0, "server side closed");
      } finally {
        a.close();
        listener.close();
      }
    });
  });
}

/**
 * `whenFirstRead` of an adapter that has it (Bun's): `ready` comes with the peer's first bytes held for
 * the handlers when the peer spoke first, after a turn when it is silent, with its end when it
 * closed at once; and every byte sent before and after start arrives once, in order.
 */
export function firstReadContract(name: string, adapter: TcpAdapter, skip = false): void {
  describe(`${name}: whenFirstRead`, { skip }, () => {
    const accepting = async () => {
      const accepted: Transport[] = [];
      const listener = await adapter.listen({ hostname: "127.0.0.1", port: 0 }, (t) => {
        accepted.push(t);
      });
      const next = async () => {
        const n = accepted.length;
        const peer = await adapter.connect({ hostname: "127.0.0.1", port: listener.port });
        await waitFor(() => accepted.length > n, "accept");
        return { peer, visitor: accepted[n] };
      };
      return { listener, accepted, next };
    };

    it("calls on with the first bytes held when the peer spoke first, after a turn when not", async () => {
      const { listener, accepted, next } = await accepting();
      const opened: Transport[] = [];
      try {
        const speaking = await next();
        opened.push(speaking.peer);
        speaking.peer.start(new Probe());
        speaking.peer.write(new Uint8Array([1, 2, 3]));
        // Given time to arrive, the bytes are in when ready runs.
        await tick(20);
        await new Promise<void>((ready) => speaking.visitor.whenFirstRead!(ready));
        const got = new Probe();
        speaking.visitor.start(got);
        assert.deepEqual([...got.received()], [1, 2, 3], "the first bytes were in when ready ran");

        // A silent peer (a protocol whose server speaks first): ready still comes, and what the
        // peer sends later arrives once started.
        const silent = await next();
        opened.push(silent.peer);
        silent.peer.start(new Probe());
        await new Promise<void>((ready) => silent.visitor.whenFirstRead!(ready));
        const probe = new Probe();
        silent.visitor.start(probe);
        silent.peer.write(new Uint8Array([9, 8]));
        await probe.until(() => probe.bytes === 2, "bytes sent after ready");
      } finally {
        for (const t of [...opened, ...accepted]) t.close();
        await listener.close();
      }
    });

    it("holds a peer's end, and delivers a large first burst whole and in order", async () => {
      const { listener, accepted, next } = await accepting();
      const opened: Transport[] = [];
      try {
        const ending = await next();
        opened.push(ending.peer);
        ending.peer.start(new Probe());
        ending.peer.end();
        await tick(20);
        await new Promise<void>((ready) => ending.visitor.whenFirstRead!(ready));
        const ended = new Probe();
        ending.visitor.start(ended);
        await ended.until(() => ended.ends === 1, "the end held before start");

        // 1 MiB sent before start: one read may be held, the rest waits in the kernel.
        const burst = await next();
        opened.push(burst.peer);
        const writer = new Probe();
        burst.peer.start(writer);
        const payload = pattern(1024 * 1024);
        const written = writeAll(burst.peer, writer, payload).then(() => burst.peer.end());
        await new Promise<void>((ready) => burst.visitor.whenFirstRead!(ready));
        await tick(20);
        const probe = new Probe();
        burst.visitor.start(probe);
        await written;
        await probe.until(() => probe.ends === 1, "the burst's end");
        assert.ok(sameBytes(probe.received(), payload), "every byte once, in order");
      } finally {
        for (const t of [...opened, ...accepted]) t.close();
        await listener.close();
      }
    });
  });
}
