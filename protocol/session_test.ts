import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { Session, SESSION_TRANSITIONS, type SessionOptions } from "./session.ts";
import { StreamState } from "./stream_state.ts";
import { YamuxError } from "./errors.ts";
import type { Stream } from "./stream.ts";
import type { Transport } from "./transport.ts";
import { memoryPair } from "../transport/memory.ts";
import { echoStream } from "../tunnel/echo.ts";
import { roundTrip } from "../tools/echo_check.ts";
import { EACH_TURN, waitFor } from "../testing/wait.ts";
import { concat, pattern } from "../util/bytes/bytes.ts";
import { Lifecycle } from "../util/lifecycle.ts";
import { Flag, FrameType } from "./constants.ts";
import { frame, type RawFrame, RawPeer } from "./_raw_peer.ts";
import { resolveSessionConfig } from "./config.ts";

const QUIET = { enableKeepAlive: false } as const;

/** Two sessions over an in-memory pair; `server` options may set onStream. */
function connected(
  server: Partial<SessionOptions> = {},
  client: Partial<SessionOptions> = {},
  transports: [Transport, Transport] = memoryPair(),
): { client: Session; server: Session; done: () => void } {
  const c = new Session(transports[0], { client: true, config: QUIET, ...client });
  const s = new Session(transports[1], { client: false, config: QUIET, ...server });
  return {
    client: c,
    server: s,
    done: () => {
      c.destroy();
      s.destroy();
    },
  };
}

/** Resolves after pending microtasks and one macrotask turn. */
function tick(times = 1): Promise<void> {
  let p = Promise.resolve();
  for (let i = 0; i < times; i++) p = p.then(() => new Promise((r) => setTimeout(r, 0)));
  return p;
}

function collect(stream: Stream): { chunks: Uint8Array[]; ended: Promise<Uint8Array> } {
  const chunks: Uint8Array[] = [];
  const ended = new Promise<Uint8Array>((resolve, reject) => {
    stream.onData = (chunk) => chunks.push(chunk);
    stream.onEnd = () => resolve(concat(chunks));
    stream.onClose = (error) => error && reject(error);
  });
  return { chunks, ended };
}

describe("Session: streams", () => {
  it("echoes with half-close and both sides end closed with no streams left", async () => {
    const { client, server, done } = connected({ onStream: echoStream });
    try {
      const stream = client.open();
      assert.equal(stream.id, 1);
      const payload = pattern(300_000, 1);
      const echoed = await roundTrip(stream, payload);
      assert.deepEqual(echoed, payload);
      await waitFor(() => client.streamCount === 0 && server.streamCount === 0, EACH_TURN);
      assert.equal(stream.state, StreamState.Closed);
      assert.equal(client.stats.streamsOpened, 1);
      assert.equal(server.stats.streamsAccepted, 1);
    } finally {
      done();
    }
  });

  it("ids: client odd from 1, server even from 2", () => {
    const { client, server, done } = connected();
    try {
      assert.deepEqual([client.open().id, client.open().id], [1, 3]);
      assert.deepEqual([server.open().id, server.open().id], [2, 4]);
    } finally {
      done();
    }
  });

  it("accept(): ACK goes out only when the stream is accepted", async () => {
    const { client, server, done } = connected();
    try {
      const stream = client.open();
      stream.write(new Uint8Array([1, 2, 3]));
      await tick(3);
      assert.equal(stream.state, StreamState.SynSent, "not acknowledged before accept");
      const accepted = await server.accept();
      assert.equal(accepted.id, stream.id);
      await waitFor(() => stream.state === StreamState.Established, EACH_TURN);
      const { ended } = collect(accepted);
      stream.end();
      assert.deepEqual(await ended, new Uint8Array([1, 2, 3]));
    } finally {
      done();
    }
  });

  it("the peer's half-close still lets us send the full response", async () => {
    const { client, done } = connected({
      onStream: (stream) => {
        const request = collect(stream);
        request.ended.then((bytes) => {
          stream.write(pattern(bytes.length * 100, 9));
          stream.end();
        });
      },
    });
    try {
      const stream = client.open();
      const response = collect(stream);
      stream.write(pattern(1000, 0));
      stream.end();
      assert.deepEqual(await response.ended, pattern(100_000, 9));
    } finally {
      done();
    }
  });

  it("reset mid-stream errors the peer's stream and leaves its siblings alone", async () => {
    let serverSide: Stream | undefined;
    const { client, done } = connected({
      onStream: (stream) => {
        if (stream.id === 1) {
          serverSide = stream;
          stream.onData = () => {};
        } else echoStream(stream);
      },
    });
    try {
      const victim = client.open();
      const sibling = client.open();
      victim.write(pattern(1000, 1));
      await waitFor(() => serverSide !== undefined && serverSide.bytesIn === 1000, EACH_TURN);
      const closed = new Promise<Error | undefined>((resolve) => serverSide!.onClose = resolve);
      victim.reset();
      const error = await closed;
      assert.ok(error instanceof YamuxError);
      assert.equal(error.code, "stream_reset");
      assert.equal(serverSide!.state, StreamState.Reset);
      assert.equal(victim.write(new Uint8Array(1)), false, "a reset stream takes no more data");
      assert.deepEqual(await roundTrip(sibling, pattern(50_000, 2)), pattern(50_000, 2));
    } finally {
      done();
    }
  });

  it("a reset's reason code reaches the peer as resetCode", async () => {
    let serverSide: Stream | undefined;
    const { client, done } = connected({ onStream: (s) => serverSide = s });
    try {
      const stream = client.open();
      stream.write(new Uint8Array([1]));
      await waitFor(() => serverSide !== undefined, EACH_TURN);
      const closed = new Promise<Error | undefined>((resolve) => stream.onClose = resolve);
      serverSide!.reset(7);
      const error = (await closed) as YamuxError;
      assert.equal(error.code, "stream_reset");
      assert.equal(error.resetCode, 7);
      assert.equal(stream.sendWindow, 256 * 1024 - 1, "the code is not taken as credit");
    } finally {
      done();
    }
  });

  it("write() reports backpressure at the high-water mark and onDrain follows", async () => {
    const { client, done } = connected({ onStream: (s) => s.onData = () => {} }, {
      config: { ...QUIET, writeHighWaterMark: 64 * 1024 },
    });
    try {
      const stream = client.open();
      assert.equal(stream.write(new Uint8Array(32 * 1024)), true);
      assert.equal(stream.write(new Uint8Array(32 * 1024)), false);
      await new Promise<void>((resolve) => stream.onDrain = resolve);
      assert.ok(stream.queuedBytes <= 32 * 1024);
    } finally {
      done();
    }
  });

  it("a stalled reader holds at most its window while other streams keep flowing", async () => {
    let stalled: Stream | undefined;
    const { client, done } = connected({
      onStream: (stream) => {
        if (stream.id === 1) {
          stalled = stream;
          stream.pause();
          stream.onData = () => {};
        } else echoStream(stream);
      },
    });
    try {
      const writer = client.open();
      let offered = 0;
      const chunk = new Uint8Array(64 * 1024);
      const offer = () => {
        while (offered < 8 * 1024 * 1024) {
          offered += chunk.length;
          if (!writer.write(chunk)) return;
        }
      };
      writer.onDrain = offer;
      offer();
      await waitFor(() => writer.sendWindow === 0, EACH_TURN);
      const other = pattern(4 * 1024 * 1024, 3);
      assert.deepEqual(await roundTrip(client.open(), other), other);
      assert.ok(stalled!.bufferedBytes <= stalled!.receiveWindow);
      assert.equal(stalled!.bufferedBytes, 256 * 1024, "exactly the initial window is buffered");
      assert.ok(writer.queuedBytes <= client.config.writeHighWaterMark + chunk.length);
      stalled!.resume();
      await waitFor(() => stalled!.bufferedBytes === 0 && writer.sendWindow > 0, EACH_TURN);
    } finally {
      done();
    }
  });

  it("auto-tuning grows a fast reader's window up to the maximum", async () => {
    const max = 1024 * 1024;
    const { client, server, done } = connected({ config: { ...QUIET, maxStreamWindow: max } }, {});
    try {
      await client.ping(); // both sides learn the round trip
      await server.ping();
      let receiver: Stream | undefined;
      server.onStream = (stream) => {
        receiver = stream;
        stream.onData = () => {};
      };
      const stream = client.open();
      const chunk = new Uint8Array(64 * 1024);
      let sent = 0;
      const pump = () => {
        while (sent < 64 * 1024 * 1024) {
          sent += chunk.length;
          if (!stream.write(chunk)) return;
        }
        stream.end();
      };
      stream.onDrain = pump;
      pump();
      await waitFor(() => receiver !== undefined && receiver.bytesIn === 64 * 1024 * 1024, {
        ...EACH_TURN,
        tries: 20_000,
      });
      assert.ok(receiver!.receiveWindow > 256 * 1024, `window grew (${receiver!.receiveWindow})`);
      assert.ok(receiver!.receiveWindow <= max);
    } finally {
      done();
    }
  });

  it("auto-tuning leaves the window of a reader that pauses (it sets the pace, not the window)", async () => {
    const { client, server, done } = connected({ config: QUIET }, {});
    try {
      await client.ping();
      await server.ping();
      let receiver: Stream | undefined;
      server.onStream = (stream) => {
        receiver = stream;
        // A relay whose other side keeps pushing back: every chunk pauses it for a moment.
        stream.onData = () => {
          stream.pause();
          setTimeout(() => stream.resume(), 0);
        };
      };
      const stream = client.open();
      const chunk = new Uint8Array(64 * 1024);
      for (let i = 0; i < 256; i++) stream.write(chunk);
      stream.end();
      await waitFor(() => receiver !== undefined && receiver.bytesIn === 256 * 64 * 1024, {
        ...EACH_TURN,
        tries: 20_000,
      });
      assert.equal(receiver!.receiveWindow, 256 * 1024);
    } finally {
      done();
    }
  });

  it("the session receive budget caps window growth", async () => {
    const { client, server, done } = connected({
      config: { ...QUIET, sessionReceiveBudget: 1 },
    });
    try {
      await server.ping();
      let receiver: Stream | undefined;
      server.onStream = (stream) => {
        receiver = stream;
        stream.onData = () => {};
      };
      const stream = client.open();
      const chunk = new Uint8Array(64 * 1024);
      for (let i = 0; i < 64; i++) stream.write(chunk);
      stream.end();
      await waitFor(() => receiver !== undefined && receiver.bytesIn === 64 * 64 * 1024, {
        ...EACH_TURN,
        tries: 20_000,
      });
      assert.ok(receiver!.receiveWindow <= 256 * 1024 + 1);
    } finally {
      done();
    }
  });

  it("stream-id exhaustion: the last id works, then GoAway and streams_exhausted", async () => {
    const { client, server, done } = connected({ onStream: echoStream }, {
      firstStreamId: 0xffff_fffd,
    });
    try {
      assert.equal(client.open().id, 0xffff_fffd);
      const last = client.open();
      assert.equal(last.id, 0xffff_ffff);
      assert.throws(
        () => client.open(),
        (e: unknown) => (e as YamuxError).code === "streams_exhausted",
      );
      assert.equal(client.localGoAway, true);
      assert.deepEqual(await roundTrip(last, pattern(1000, 8)), pattern(1000, 8));
      await waitFor(() => server.remoteGoAway, EACH_TURN);
    } finally {
      done();
    }
  });

  it("a refused incoming stream's reset carries the refusalCode for its reason", async () => {
    const { client, done } = connected({
      onStream: (s) => s.onData = () => {},
      config: { ...QUIET, maxStreams: 1 },
      refusalCode: (why) => why === "too_many_streams" ? 7 : 10,
    });
    try {
      client.open().write(new Uint8Array([1]));
      const refused = client.open();
      refused.write(new Uint8Array([2]));
      const error = (await new Promise<Error | undefined>((r) =>
        refused.onClose = r
      )) as YamuxError;
      assert.equal(error.resetCode, 7);
    } finally {
      done();
    }
  });

  it("open() refuses past maxStreams", () => {
    const { client, done } = connected({}, { config: { ...QUIET, maxStreams: 2 } });
    try {
      client.open();
      client.open();
      assert.throws(
        () => client.open(),
        (e: unknown) => (e as YamuxError).code === "too_many_streams",
      );
    } finally {
      done();
    }
  });
});

describe("Session: writer", () => {
  it("coalesces the frames of one tick into one transport write", async () => {
    const [a, b] = memoryPair();
    let writes = 0;
    const write = a.write.bind(a);
    a.write = (chunk) => {
      writes++;
      return write(chunk);
    };
    const { client, done } = connected({ onStream: (s) => s.onData = () => {} }, {}, [a, b]);
    try {
      await tick(3);
      writes = 0;
      for (let i = 0; i < 20; i++) client.open().write(new Uint8Array(100));
      await tick(1);
      assert.equal(writes, 1);
      assert.equal(client.stats.framesOut.data, 20);
    } finally {
      done();
    }
  });
});

describe("Session: lifecycle", () => {
  it("ping resolves with a round-trip time and feeds rtt", async () => {
    const { client, done } = connected();
    try {
      const rtt = await client.ping();
      assert.ok(rtt >= 0);
      assert.ok(client.rtt > 0);
    } finally {
      done();
    }
  });

  it("close() drains: GoAway, existing streams finish, then both sides close cleanly", async () => {
    const { client, server, done } = connected({ onStream: echoStream });
    try {
      const stream = client.open();
      const echoed = roundTrip(stream, pattern(100_000, 4));
      const closing = client.close();
      assert.equal(client.state, "draining");
      assert.throws(() => client.open(), YamuxError);
      assert.deepEqual(await echoed, pattern(100_000, 4));
      assert.equal(await closing, undefined);
      assert.equal(await server.closed, undefined);
      assert.equal(server.remoteGoAway, true);
      assert.deepEqual(client.stats.goAwaySent, { normal: 1 });
      assert.deepEqual(server.stats.goAwayReceived, { normal: 1 });
    } finally {
      done();
    }
  });

  it("after a peer's GoAway, open() throws remote_goaway", async () => {
    const { client, server, done } = connected();
    try {
      server.goAway();
      await waitFor(() => client.remoteGoAway, EACH_TURN);
      assert.equal(client.state, "draining");
      assert.throws(
        () => client.open(),
        (e: unknown) => (e as YamuxError).code === "remote_goaway",
      );
    } finally {
      done();
    }
  });

  it("destroy() fails streams, waiters and pings, and the peer sees the close", async () => {
    const { client, server, done } = connected();
    try {
      const stream = client.open();
      const streamClosed = new Promise<Error | undefined>((resolve) => stream.onClose = resolve);
      const accepting = client.accept();
      const pinging = client.ping();
      client.destroy();
      assert.equal(((await streamClosed) as YamuxError).code, "session_closed");
      await assert.rejects(accepting, YamuxError);
      await assert.rejects(pinging, YamuxError);
      assert.ok((await server.closed) instanceof YamuxError, "peer closed with an error");
      assert.throws(() => client.open(), YamuxError);
    } finally {
      done();
    }
  });
});

describe("Stream: listen(handlers)", () => {
  /** Handlers that record what they are told, called as methods (they read `this`). */
  class Recorder {
    readonly events: string[] = [];
    readonly chunks: Uint8Array[] = [];
    data(chunk: Uint8Array): void {
      this.chunks.push(chunk);
    }
    end(): void {
      this.events.push("end");
    }
    drain(): void {
      this.events.push("drain");
    }
    close(error?: Error): void {
      this.events.push(error ? `close: ${error.message}` : "close");
    }
  }

  it("reports data already buffered, then end, drain and close, as methods of the object", async () => {
    let served: Stream | undefined;
    const { client, done } = connected({ onStream: (s) => served = s }, {
      config: { ...QUIET, writeHighWaterMark: 64 * 1024 },
    });
    try {
      const stream = client.open();
      stream.write(pattern(3000, 1));
      await waitFor(() => served !== undefined && served.bytesIn === 3000, "the data buffered");
      const got = new Recorder();
      served!.listen(got);
      await waitFor(() => got.chunks.length > 0, "the buffered data delivered");
      // Backpressure reported to the object too.
      const mine = new Recorder();
      stream.listen(mine);
      assert.equal(stream.write(new Uint8Array(64 * 1024)), false);
      await waitFor(() => mine.events.includes("drain"), "drain");
      stream.end();
      await waitFor(() => got.events.includes("end"), "end");
      assert.equal(concat(got.chunks).length, 3000 + 64 * 1024);
      assert.deepEqual(concat(got.chunks).subarray(0, 3000), pattern(3000, 1));
      served!.end();
      await waitFor(() => got.events.includes("close") && mine.events.includes("close"), "closed");
      assert.deepEqual(got.events, ["end", "close"]);
      assert.deepEqual(mine.events, ["drain", "end", "close"]);
    } finally {
      done();
    }
  });

  it("gives way to a callback set later: the object hears nothing more", async () => {
    let served: Stream | undefined;
    const { client, done } = connected({ onStream: (s) => served = s });
    try {
      const stream = client.open();
      stream.write(pattern(10, 2));
      await waitFor(() => served !== undefined, "the stream");
      const first = new Recorder();
      served!.listen(first);
      await waitFor(() => first.chunks.length === 1, "the first chunk to the object");
      const later: Uint8Array[] = [];
      served!.onData = (chunk) => later.push(chunk);
      stream.write(pattern(20, 3));
      await waitFor(() => later.length === 1, "the next chunk to the callback");
      stream.end();
      await tick(3);
      assert.equal(first.chunks.length, 1);
      assert.deepEqual(first.events, [], "neither end nor close reach the object");
    } finally {
      done();
    }
  });
});

describe("Stream: Web Streams adapters", () => {
  it("readable, writable and for-await carry data with backpressure", async () => {
    const { client, done } = connected({
      onStream: async (stream) => {
        await stream.readable.pipeTo(stream.writable);
      },
    });
    try {
      const stream = client.open();
      const writer = stream.writable.getWriter();
      const payload = pattern(1_000_000, 5);
      const writing = (async () => {
        for (let at = 0; at < payload.length; at += 10_000) {
          await writer.write(payload.subarray(at, at + 10_000));
        }
        await writer.close();
      })();
      const chunks: Uint8Array[] = [];
      for await (const chunk of stream) chunks.push(chunk);
      await writing;
      assert.deepEqual(concat(chunks), payload);
    } finally {
      done();
    }
  });
});

describe("Lifecycle", () => {
  it("session lifecycle: open → draining → closed, and closed is final", () => {
    const session = new Lifecycle(SESSION_TRANSITIONS, "open");
    assert.equal(session.fire("go_away"), true);
    assert.equal(session.state, "draining");
    assert.equal(session.fire("go_away"), false);
    assert.equal(session.fire("close"), true);
    assert.equal(session.fire("close"), false);
    assert.equal(session.state, "closed");
  });
});

describe("Session: what a paused stream keeps of a received chunk", () => {
  /** A server session on a raw peer whose streams pause as soon as they arrive. */
  function pausedStreams(): { peer: RawPeer; session: Session; streams: Map<number, Stream> } {
    const peer = new RawPeer();
    const streams = new Map<number, Stream>();
    const session = new Session(peer, {
      client: false,
      config: { ...QUIET, autoTuneWindow: false },
      onStream: (stream) => {
        stream.pause();
        streams.set(stream.id, stream);
      },
    });
    return { peer, session, streams };
  }

  /** Resumes `stream` and resolves with the first chunk it delivers. */
  function firstChunk(stream: Stream): Promise<Uint8Array> {
    return new Promise((resolve) => {
      stream.onData = (chunk) => {
        stream.onData = null;
        resolve(chunk);
      };
      stream.resume();
    });
  }

  it("keeps views that hold most of their chunk, and copies a small one among others' frames once the next chunk is in", async () => {
    const { peer, session, streams } = pausedStreams();
    try {
      // Streams 1 and 3 open; both readers pause.
      peer.send(
        frame(FrameType.WindowUpdate, Flag.SYN, 1, 0),
        frame(FrameType.WindowUpdate, Flag.SYN, 3, 0),
      );
      await tick();
      assert.deepEqual([...streams.keys()], [1, 3]);
      // One chunk that is nearly all stream 1's: its views stay views of the chunk.
      const bulk = concat([
        frame(FrameType.Data, 0, 1, 3000, pattern(3000)),
        frame(FrameType.Data, 0, 1, 3000, pattern(3000)),
      ]);
      peer.handlers.data(bulk);
      const one = streams.get(1)!;
      assert.equal((await firstChunk(one)).buffer, bulk.buffer, "stream 1's views were copied");
      one.onData = () => {};
      await tick(); // stream 1 has read what it buffered, and now reads at once
      // One chunk where stream 3 has 100 bytes beside 5000 of stream 1's, which its reader takes
      // at once: keeping the 100 would keep the whole chunk alive, so they are copied once the
      // next chunk shows that stream 3's reader did not take them meanwhile.
      const mixed = concat([
        frame(FrameType.Data, 0, 3, 100, pattern(100)),
        frame(FrameType.Data, 0, 1, 5000, pattern(5000)),
      ]);
      peer.handlers.data(mixed);
      peer.handlers.data(frame(FrameType.Data, 0, 1, 10, pattern(10)));
      const small = await firstChunk(streams.get(3)!);
      assert.notEqual(small.buffer, mixed.buffer, "stream 3's small view was kept");
      assert.deepEqual(small, pattern(100));
    } finally {
      session.destroy();
    }
  });

  it("copies nothing a reader takes before the next chunk", async () => {
    const { peer, session, streams } = pausedStreams();
    try {
      peer.send(
        frame(FrameType.WindowUpdate, Flag.SYN, 1, 0),
        frame(FrameType.WindowUpdate, Flag.SYN, 3, 0),
        frame(FrameType.WindowUpdate, Flag.SYN, 5, 0),
      );
      await tick();
      const one = streams.get(1)!;
      one.onData = () => {};
      one.resume();
      await tick();
      // Streams 3 and 5 keep 100 bytes each beside 5000 of stream 1's, which its reader takes.
      const mixed = concat([
        frame(FrameType.Data, 0, 3, 100, pattern(100)),
        frame(FrameType.Data, 0, 5, 100, pattern(100, 7)),
        frame(FrameType.Data, 0, 1, 5000, pattern(5000)),
      ]);
      peer.handlers.data(mixed);
      // Stream 3's reader takes its bytes before the next chunk: they are the chunk's own.
      const small = await firstChunk(streams.get(3)!);
      assert.equal(small.buffer, mixed.buffer, "stream 3's view was copied");
      assert.deepEqual(small, pattern(100));
      // Stream 5's reader did not: the next chunk has its bytes copied.
      peer.handlers.data(frame(FrameType.Data, 0, 1, 10, pattern(10)));
      const kept = await firstChunk(streams.get(5)!);
      assert.notEqual(kept.buffer, mixed.buffer, "stream 5's small view was kept");
      assert.deepEqual(kept, pattern(100, 7));
    } finally {
      session.destroy();
    }
  });
});

describe("Session: ackDelay", () => {
  /** A server session on a raw peer, with `ackDelay`, answering each stream with `answer`. */
  function server(ackDelay: number, answer: (stream: Stream) => void) {
    const peer = new RawPeer();
    const session = new Session(peer, {
      client: false,
      config: { ...QUIET, ackDelay },
      onStream: answer,
    });
    return { peer, session };
  }

  /** Waits for `n` frames of stream 1 and returns them (the session's own pings aside). */
  async function streamFrames(peer: RawPeer, n: number): Promise<RawFrame[]> {
    await waitFor(() => peer.frames().filter((f) => f.streamId === 1).length >= n, {
      ...EACH_TURN,
      message: `${n} frames of stream 1`,
    });
    return peer.frames().filter((f) => f.streamId === 1);
  }

  it("an answer within the delay carries the ACK: one frame", async () => {
    const { peer, session } = server(1_000, (stream) => {
      // A service answering a little later, as a dial and a reply take.
      setTimeout(() => stream.write(new Uint8Array([7, 7])), 5);
    });
    try {
      peer.send(frame(FrameType.Data, Flag.SYN, 1, 1, new Uint8Array([1])));
      const frames = await streamFrames(peer, 1);
      assert.equal(frames.length, 1);
      assert.equal(frames[0].type, FrameType.Data);
      assert.equal(frames[0].flags, Flag.ACK);
      assert.deepEqual([...frames[0].payload], [7, 7]);
    } finally {
      session.close();
    }
  });

  it("a silent stream still acknowledges, once the delay is over", async () => {
    const { peer, session } = server(20, () => {});
    try {
      peer.send(frame(FrameType.WindowUpdate, Flag.SYN, 1, 0));
      await tick(3);
      assert.equal(peer.framesOf(FrameType.WindowUpdate, 0, 1).length, 0, "acknowledged early");
      const frames = await streamFrames(peer, 1);
      assert.equal(frames[0].type, FrameType.WindowUpdate);
      assert.equal(frames[0].flags, Flag.ACK);
      assert.equal(frames[0].streamId, 1);
    } finally {
      session.close();
    }
  });

  it("without a delay the ACK goes at once, alone", async () => {
    const { peer, session } = server(0, (stream) => {
      setTimeout(() => stream.write(new Uint8Array([7])), 5);
    });
    try {
      peer.send(frame(FrameType.WindowUpdate, Flag.SYN, 1, 0));
      const frames = await streamFrames(peer, 2);
      assert.deepEqual(frames.map((f) => [f.type, f.flags]), [
        [FrameType.WindowUpdate, Flag.ACK],
        [FrameType.Data, 0],
      ]);
    } finally {
      session.close();
    }
  });

  it("is at most a second", () => {
    assert.throws(() => resolveSessionConfig({ ackDelay: 1_001 }), /ackDelay/);
    assert.equal(resolveSessionConfig({ ackDelay: 0 }).ackDelay, 0);
  });
});
