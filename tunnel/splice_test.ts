import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { LiveThrottle, splice, streamEnd, transportEnd } from "./splice.ts";
import { Session } from "../protocol/session.ts";
import type { Stream } from "../protocol/stream.ts";
import { memoryPair } from "../transport/memory.ts";
import { connectTcp, listenTcp } from "../transport/mod.ts";
import type { Transport, TransportHandlers } from "../protocol/transport.ts";
import { pattern } from "../util/bytes/bytes.ts";

const QUIET = { enableKeepAlive: false };

/** A TCP echo server on 127.0.0.1 that echoes and half-closes back; `stall` stops reading. */
async function tcpEcho(options: { stall?: boolean } = {}) {
  const sockets: Transport[] = [];
  const closes: (Error | undefined)[] = [];
  const listener = await listenTcp({ hostname: "127.0.0.1", port: 0 }, (t) => {
    sockets.push(t);
    t.start({
      data: (chunk) => {
        if (!t.write(chunk)) t.pause();
      },
      drain: () => t.resume(),
      end: () => t.end(),
      close: (error) => closes.push(error),
    });
    if (options.stall) t.pause();
  });
  return {
    port: listener.port,
    sockets,
    closes,
    close() {
      listener.close();
      for (const s of sockets) s.close();
    },
  };
}

function collect(stream: Stream): Promise<Uint8Array> {
  const chunks: Uint8Array[] = [];
  return new Promise((resolve, reject) => {
    stream.onData = (chunk) => chunks.push(chunk);
    stream.onEnd = () => {
      const out = new Uint8Array(chunks.reduce((n, c) => n + c.length, 0));
      let at = 0;
      for (const c of chunks) (out.set(c, at), at += c.length);
      resolve(out);
    };
    stream.onClose = (error) => error && reject(error);
  });
}

describe("splice: stream ↔ TCP socket", () => {
  it("pipes both ways with half-close, the first bytes going ahead", async () => {
    const echo = await tcpEcho();
    const [a, b] = memoryPair();
    const results: Promise<unknown>[] = [];
    const server = new Session(b, {
      client: false,
      config: QUIET,
      onStream: (stream) => {
        results.push(
          connectTcp({ hostname: "127.0.0.1", port: echo.port }).then((socket) =>
            splice(streamEnd(stream), transportEnd(socket), { aFirst: new Uint8Array([42]) })
          ),
        );
      },
    });
    const client = new Session(a, { client: true, config: QUIET });
    try {
      const stream = client.open();
      const echoed = collect(stream);
      const payload = pattern(3 * 1024 * 1024, 1);
      for (let at = 0; at < payload.length; at += 65536) {
        stream.write(payload.subarray(at, at + 65536));
      }
      stream.end();
      const got = await echoed;
      assert.equal(got.length, payload.length + 1);
      assert.equal(got[0], 42);
      assert.deepEqual(got.subarray(1), payload);
      const [result] = await Promise.all(results) as {
        aToB: number;
        bToA: number;
        error?: Error;
      }[];
      assert.equal(result.error, undefined);
      assert.equal(result.aToB, payload.length + 1);
      assert.equal(result.bToA, payload.length + 1);
    } finally {
      client.destroy();
      server.destroy();
      echo.close();
    }
  });

  it("a socket that stops reading stalls only its stream; memory stays within the window", async () => {
    const echo = await tcpEcho({ stall: true });
    const [a, b] = memoryPair();
    let serverStream: Stream | undefined;
    let socket: Transport | undefined;
    const server = new Session(b, {
      client: false,
      config: QUIET,
      onStream: async (stream) => {
        serverStream = stream;
        socket = await connectTcp({ hostname: "127.0.0.1", port: echo.port });
        splice(streamEnd(stream), transportEnd(socket));
      },
    });
    const client = new Session(a, { client: true, config: QUIET });
    try {
      const stream = client.open();
      stream.onData = () => {};
      const chunk = new Uint8Array(65536);
      let offered = 0;
      const offer = () => {
        while (offered < 64 * 1024 * 1024) {
          offered += chunk.length;
          if (!stream.write(chunk)) return;
        }
      };
      stream.onDrain = offer;
      offer();
      for (let i = 0; i < 2000 && stream.sendWindow > 0; i++) {
        await new Promise((r) => setTimeout(r, 5));
      }
      assert.equal(stream.sendWindow, 0, "the writer ran out of credit");
      assert.ok(serverStream!.bufferedBytes <= serverStream!.receiveWindow);
      assert.ok(
        socket!.bufferedAmount <= 2 * 1024 * 1024,
        `socket buffer ${socket!.bufferedAmount}`,
      );
      assert.ok(offered < 64 * 1024 * 1024, "backpressure reached the writer");
    } finally {
      client.destroy();
      server.destroy();
      echo.close();
    }
  });

  it("a failing side aborts the other: the peer's reset closes the socket", async () => {
    const echo = await tcpEcho();
    const [a, b] = memoryPair();
    const splices: Promise<{ error?: Error }>[] = [];
    const server = new Session(b, {
      client: false,
      config: QUIET,
      onStream: async (stream) => {
        const socket = await connectTcp({ hostname: "127.0.0.1", port: echo.port });
        splices.push(splice(streamEnd(stream), transportEnd(socket)));
      },
    });
    const client = new Session(a, { client: true, config: QUIET });
    try {
      const stream = client.open();
      stream.onData = () => stream.reset(); // the echo proves the splice runs; then fail it
      stream.write(new Uint8Array([1]));
      for (let i = 0; i < 1000 && echo.closes.length === 0; i++) {
        await new Promise((r) => setTimeout(r, 5));
      }
      assert.equal(echo.closes.length, 1, "the socket behind the reset stream was closed");
      const [result] = await Promise.all(splices);
      assert.match(String(result.error), /reset/);
    } finally {
      client.destroy();
      server.destroy();
      echo.close();
    }
  });

  it("a throttle holds its direction's reading: the source waits, nothing piles up here", async () => {
    const echo = await tcpEcho();
    const [a, b] = memoryPair();
    let spent = 0, calls = 0;
    const server = new Session(b, {
      client: false,
      config: QUIET,
      onStream: async (stream) => {
        const socket = await connectTcp({ hostname: "127.0.0.1", port: echo.port });
        // Every chunk asks for an hour's hold: after the first, the stream must stop reading.
        const hour = { spend: (n: number) => (spent += n, calls++, 3_600_000) };
        void splice(streamEnd(stream), transportEnd(socket), { throttle: { aToB: hour } });
      },
    });
    const client = new Session(a, { client: true, config: QUIET });
    try {
      const stream = client.open();
      const payload = pattern(4 * 1024 * 1024, 3);
      for (let at = 0; at < payload.length; at += 65536) {
        stream.write(payload.subarray(at, at + 65536));
      }
      for (let i = 0; i < 100 && calls === 0; i++) await new Promise((r) => setTimeout(r, 5));
      assert.ok(calls > 0, "the throttle saw the first chunk");
      // Unheld, the 4 MiB would flow to the echo in a few turns; held, at most what arrived
      // before the pause (one receive window) is ever read.
      for (let i = 0; i < 20; i++) await new Promise((r) => setTimeout(r, 5));
      assert.ok(spent <= 512 * 1024, `${spent} bytes read while held`);
    } finally {
      client.destroy();
      server.destroy();
      echo.close();
    }
  });

  it("a held direction resumes when its hold is over and delivers every byte", async () => {
    const echo = await tcpEcho();
    const [a, b] = memoryPair();
    const holds: number[] = [];
    const server = new Session(b, {
      client: false,
      config: QUIET,
      onStream: async (stream) => {
        const socket = await connectTcp({ hostname: "127.0.0.1", port: echo.port });
        const some = { spend: () => (holds.push(holds.length < 3 ? 20 : 0), holds.at(-1)!) };
        void splice(streamEnd(stream), transportEnd(socket), {
          throttle: { aToB: some, bToA: some },
        });
      },
    });
    const client = new Session(a, { client: true, config: QUIET });
    try {
      const stream = client.open();
      const echoed = collect(stream);
      const payload = pattern(1024 * 1024, 4);
      for (let at = 0; at < payload.length; at += 65536) {
        stream.write(payload.subarray(at, at + 65536));
      }
      stream.end();
      assert.deepEqual(await echoed, payload);
      assert.ok(holds.length > 3, "every chunk went through the throttle");
    } finally {
      client.destroy();
      server.destroy();
      echo.close();
    }
  });
});

describe("LiveThrottle", () => {
  it("looks its limit up only when the generation moved: none per chunk while there is no rule", () => {
    let generation = 3;
    let limit: { spend(n: number): number } | undefined;
    let lookups = 0;
    const live = new LiveThrottle(() => (lookups++, limit), () => generation);
    assert.equal(lookups, 1, "looked up once, when made");
    for (let i = 0; i < 1000; i++) assert.equal(live.spend(16 * 1024), 0);
    assert.equal(lookups, 1, "no lookup per chunk while no rule changes");
    // A rule put in force later: its owner moves the generation, and the next chunk meets it.
    const spent: number[] = [];
    limit = { spend: (n) => (spent.push(n), n > 100 ? 5 : 0) };
    assert.equal(live.spend(10), 0, "not seen before the generation moved");
    generation++;
    assert.equal(live.spend(50), 0);
    assert.equal(live.spend(500), 5);
    assert.equal(live.current(), limit);
    assert.deepEqual(spent, [50, 500]);
    assert.equal(lookups, 2);
    // Lifted: nothing spent from then on.
    limit = undefined;
    generation++;
    assert.equal(live.spend(500), 0);
    assert.equal(live.current(), undefined);
    assert.deepEqual(spent, [50, 500]);
    assert.equal(lookups, 3);
  });
});

describe("splice: read sizes", () => {
  /** A transport that only keeps the handlers the splice gives it. */
  function idleTransport(): Transport & {
    handlers?: TransportHandlers;
  } {
    return {
      remoteAddress: "idle",
      localAddress: "idle",
      bufferedAmount: 0,
      start(handlers) {
        this.handlers = handlers;
      },
      write: () => true,
      pause() {},
      resume() {},
      end() {},
      close() {},
    } as Transport & { handlers?: TransportHandlers };
  }

  it("a socket spliced to a stream reads no more at once than the stream frames whole", () => {
    // A frame size under 16 KiB is met by copying: reads that small would cost a call each.
    const cases = [[20_000, 20_000], [256 * 1024, 0], [1000, 0]];
    for (const [maxDataFrameSize, expected] of cases) {
      const [a, b] = memoryPair();
      const client = new Session(a, { client: true, config: { ...QUIET, maxDataFrameSize } });
      const server = new Session(b, { client: false, config: QUIET });
      try {
        const socket = idleTransport();
        const stream = client.open();
        void splice(transportEnd(socket), streamEnd(stream));
        assert.equal(socket.handlers!.readLimit!(65_504, 266_208), expected);
        // Nothing larger is asked for than the socket would read anyway.
        assert.equal(socket.handlers!.readLimit!(8_000, 266_208), 0);
        socket.handlers!.close();
      } finally {
        client.destroy();
        server.destroy();
      }
    }
  });
});
