/**
 * An h2spec-like conformance table: for each bad (or edge-case) input from a raw peer, the exact
 * frames a `Session` answers with and what happens to the session.
 */
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { Flag, FrameType, INITIAL_STREAM_WINDOW, MAX_UINT32 } from "./constants.ts";
import type { SessionConfig } from "./config.ts";
import { YamuxError } from "./errors.ts";
import { Session } from "./session.ts";
import type { Stream } from "./stream.ts";
import { StreamState } from "./stream_state.ts";
import { frame, type RawFrame, RawPeer, tick } from "./_raw_peer.ts";
import { concat } from "../util/bytes/bytes.ts";
import { EACH_TURN, waitFor } from "../testing/wait.ts";

const { Data, WindowUpdate: WU, Ping, GoAway } = FrameType;
const { SYN, ACK, FIN, RST } = Flag;

const QUIET: Partial<SessionConfig> = { enableKeepAlive: false, autoTuneWindow: false };

interface Ctx {
  peer: RawPeer;
  session: Session;
  /** Streams handed to onStream (when `accept` is set). */
  accepted: Stream[];
  /** Reasons reported to onError. */
  errors: string[];
}

interface SetupOptions {
  client: boolean;
  config?: Partial<SessionConfig>;
  /** Install an onStream handler that records (and optionally touches) each incoming stream. */
  onStream?: boolean | ((stream: Stream) => void);
}

/** Runs `body` against a session on a raw peer, destroying everything afterwards. */
async function withSession(
  options: SetupOptions,
  body: (ctx: Ctx) => Promise<void> | void,
): Promise<void> {
  const peer = new RawPeer();
  const accepted: Stream[] = [];
  const errors: string[] = [];
  const extra = typeof options.onStream === "function" ? options.onStream : undefined;
  const session = new Session(peer, {
    client: options.client,
    config: { ...QUIET, ...options.config },
    onStream: options.onStream
      ? (stream) => {
        accepted.push(stream);
        extra?.(stream);
      }
      : undefined,
    onError: (_error, reason) => errors.push(reason),
  });
  try {
    await body({ peer, session, accepted, errors });
  } finally {
    session.destroy();
    peer.peerClose();
    await tick();
  }
}

function flagNames(flags: number): string {
  const names: string[] = [];
  if (flags & SYN) names.push("SYN");
  if (flags & ACK) names.push("ACK");
  if (flags & FIN) names.push("FIN");
  if (flags & RST) names.push("RST");
  const rest = flags & ~0xf;
  if (rest) names.push(`0x${rest.toString(16)}`);
  return names.join("|") || "-";
}

const TYPE_NAMES = ["Data", "WU", "Ping", "GoAway"];

/** A frame as a compact string, e.g. `WU ACK 1 0` or `GoAway - 0 1`. */
function show(f: RawFrame): string {
  const v = f.version === 0 ? "" : `v${f.version} `;
  return `${v}${TYPE_NAMES[f.type] ?? `type${f.type}`} ${
    flagNames(f.flags)
  } ${f.streamId} ${f.length}`;
}

function shown(peer: RawPeer, from = 0): string[] {
  return peer.frames().slice(from).map(show);
}

let markerSeq = 0xc0de0000;

/**
 * After a turn, sends a ping and waits for its reply: everything the session wrote in answer to earlier input is
 * before it. Returns the frames written since `from`, without the marker reply.
 */
async function sync(peer: RawPeer, from = 0): Promise<string[]> {
  const marker = markerSeq++;
  // Let the session flush what earlier input (or the test's own calls) produced: within one batch,
  // queued control frames such as ping replies go before stream frames.
  await tick();
  peer.send(frame(Ping, SYN, 0, marker));
  await waitFor(
    () => peer.frames().some((f) => f.type === Ping && f.flags === ACK && f.length === marker),
    { ...EACH_TURN, message: `ping reply ${marker}` },
  );
  const frames = peer.frames();
  const at = frames.findIndex((f) => f.type === Ping && f.flags === ACK && f.length === marker);
  return frames.slice(from, at).map(show);
}

/** Asserts the session answered with exactly one GoAway(protocol error), then ended its transport. */
async function expectProtocolError(ctx: Ctx, reason: string, from = 0): Promise<void> {
  const { peer, session } = ctx;
  await peer.waitGone();
  const error = await session.closed;
  assert.deepEqual(shown(peer, from), ["GoAway - 0 1"], "exactly one GoAway(protocol error)");
  assert.equal(peer.framesAtEnd, peer.frames().length, "GoAway is the last frame before end");
  assert.ok(error instanceof YamuxError, "session.closed resolves with an error");
  assert.equal(error.code, "protocol_error");
  assert.equal(session.state, "closed");
  assert.equal(session.stats.errors[reason], 1, `stats.errors.${reason}`);
  assert.deepEqual(ctx.errors, [reason]);
  assert.equal(session.stats.framesOut.goAway, 1);
}

const BOTH = [true, false] as const;
const side = (client: boolean) => (client ? "client" : "server");
/** A stream id the peer of `client` may open. */
const peerId = (client: boolean, n = 0) => (client ? 2 : 1) + 2 * n;
/** A stream id of our own parity. */
const ourId = (client: boolean, n = 0) => (client ? 1 : 2) + 2 * n;

describe("conformance: malformed framing -> GoAway(protocol error)", () => {
  for (const client of BOTH) {
    for (const version of [1, 0xff]) {
      it(`${side(client)}: version ${version} -> GoAway(1), bad_version`, async () => {
        await withSession({ client }, async (ctx) => {
          ctx.peer.send(frame(Ping, SYN, 0, 1, undefined, version));
          await expectProtocolError(ctx, "bad_version");
        });
      });
    }

    for (const type of [4, 255]) {
      it(`${side(client)}: unknown type ${type} -> GoAway(1), unknown_type`, async () => {
        await withSession({ client }, async (ctx) => {
          ctx.peer.send(frame(type, 0, 0, 0));
          await expectProtocolError(ctx, "unknown_type");
        });
      });
    }

    it(`${side(client)}: bad version after a valid ping -> ping answered, then GoAway(1)`, async () => {
      await withSession({ client }, async (ctx) => {
        ctx.peer.sendCoalesced(frame(Ping, SYN, 0, 77), frame(Ping, SYN, 0, 78, undefined, 1));
        await ctx.peer.waitGone();
        // The reply queued in the same tick is dropped: the GoAway is the session's last word.
        const frames = shown(ctx.peer);
        assert.equal(frames[frames.length - 1], "GoAway - 0 1");
        assert.equal(ctx.session.stats.errors.bad_version, 1);
      });
    });
  }
});

describe("conformance: stream id rules", () => {
  const rows: [string, Uint8Array][] = [
    ["Data on stream 0", frame(Data, 0, 0, 3, new Uint8Array([1, 2, 3]))],
    ["Data SYN on stream 0 (header only)", frame(Data, SYN, 0, 3)],
    ["WindowUpdate on stream 0", frame(WU, 0, 0, 100)],
    ["WindowUpdate SYN on stream 0", frame(WU, SYN, 0, 0)],
    ["Ping on stream 1", frame(Ping, SYN, 1, 5)],
    ["Ping ACK on stream 2", frame(Ping, ACK, 2, 5)],
    ["GoAway on stream 1", frame(GoAway, 0, 1, 0)],
  ];
  for (const client of BOTH) {
    for (const [name, bytes] of rows) {
      it(`${side(client)}: ${name} -> GoAway(1), bad_stream_id`, async () => {
        await withSession({ client }, async (ctx) => {
          ctx.peer.send(bytes);
          await expectProtocolError(ctx, "bad_stream_id");
        });
      });
    }

    it(`${side(client)}: SYN with our parity (WindowUpdate) -> GoAway(1), syn_parity`, async () => {
      await withSession({ client, onStream: true }, async (ctx) => {
        ctx.peer.send(frame(WU, SYN, ourId(client), 0));
        await expectProtocolError(ctx, "syn_parity");
        assert.equal(ctx.accepted.length, 0);
      });
    });

    it(`${side(client)}: SYN with our parity (Data) -> GoAway(1), syn_parity`, async () => {
      await withSession({ client, onStream: true }, async (ctx) => {
        ctx.peer.send(frame(Data, SYN, ourId(client, 5), 2, new Uint8Array([1, 2])));
        await expectProtocolError(ctx, "syn_parity");
      });
    });

    it(`${side(client)}: SYN on an existing stream -> GoAway(1), duplicate_syn`, async () => {
      await withSession({ client }, async (ctx) => {
        ctx.peer.send(frame(WU, SYN, peerId(client), 0));
        await tick(2);
        assert.equal(ctx.session.streamCount, 1);
        ctx.peer.send(frame(Data, SYN, peerId(client), 1, new Uint8Array([1])));
        await expectProtocolError(ctx, "duplicate_syn");
      });
    });

    it(`${side(client)}: SYN on a stream we opened -> GoAway(1)`, async () => {
      await withSession({ client }, async (ctx) => {
        const stream = ctx.session.open();
        await ctx.peer.waitFrames(1);
        ctx.peer.send(frame(WU, SYN, stream.id, 0));
        await ctx.peer.waitGone();
        assert.deepEqual(shown(ctx.peer), [`WU SYN ${stream.id} 0`, "GoAway - 0 1"]);
        assert.ok((await ctx.session.closed) instanceof YamuxError);
      });
    });
  }
});

describe("conformance: flow control", () => {
  for (const client of BOTH) {
    const id = peerId(client);

    it(`${side(client)}: WindowUpdate past 2^32-1 -> RST that stream only, window_overflow`, async () => {
      const received: number[] = [];
      await withSession({
        client,
        onStream: (s) => s.onData = (c) => received.push(...c),
      }, async (ctx) => {
        ctx.peer.send(frame(WU, SYN, id, 0));
        assert.deepEqual(await sync(ctx.peer), [`WU ACK ${id} 0`]);
        // Exactly up to 2^32-1 is fine.
        ctx.peer.send(frame(WU, 0, id, MAX_UINT32 - INITIAL_STREAM_WINDOW));
        let from = ctx.peer.frames().length;
        assert.deepEqual(await sync(ctx.peer, from), []);
        assert.equal(ctx.accepted[0].sendWindow, MAX_UINT32);
        // One more byte of credit overflows.
        ctx.peer.send(frame(WU, 0, id, 1));
        from = ctx.peer.frames().length;
        assert.deepEqual(await sync(ctx.peer, from), [`WU RST ${id} 0`]);
        assert.equal(ctx.session.stats.errors.window_overflow, 1);
        assert.equal(ctx.session.stats.resetsSent, 1);
        assert.equal(ctx.accepted[0].state, StreamState.Reset);
        assert.ok(ctx.accepted[0].error instanceof YamuxError);
        assert.equal(ctx.session.state, "open");
        // Another stream still works.
        const id2 = peerId(client, 1);
        ctx.peer.send(frame(Data, SYN, id2, 3, new Uint8Array([7, 8, 9])));
        from = ctx.peer.frames().length;
        assert.deepEqual(await sync(ctx.peer, from), [`WU ACK ${id2} 0`]);
        assert.deepEqual(received, [7, 8, 9]);
        assert.equal(ctx.session.streamCount, 1);
      });
    });

    it(`${side(client)}: WindowUpdate SYN with credit 2^32-1 on a new stream -> RST`, async () => {
      await withSession({ client, onStream: true }, async (ctx) => {
        ctx.peer.send(frame(WU, SYN, id, MAX_UINT32));
        assert.deepEqual(await sync(ctx.peer), [`WU RST ${id} 0`]);
        assert.equal(ctx.session.stats.errors.window_overflow, 1);
        assert.equal(ctx.session.state, "open");
      });
    });

    it(`${side(client)}: SYN+Data header of 256 KiB + 1 (no payload) -> GoAway(1), window_exceeded`, async () => {
      await withSession({ client }, async (ctx) => {
        ctx.peer.send(frame(Data, SYN, id, INITIAL_STREAM_WINDOW + 1));
        await expectProtocolError(ctx, "window_exceeded");
      });
    });

    it(`${side(client)}: exactly 256 KiB is accepted, one more byte header -> window_exceeded`, async () => {
      await withSession({ client }, async (ctx) => {
        const payload = new Uint8Array(INITIAL_STREAM_WINDOW).fill(1);
        ctx.peer.send(frame(Data, SYN, id, payload.length, payload));
        assert.deepEqual(await sync(ctx.peer), []);
        assert.equal(ctx.session.stats.errors.window_exceeded, undefined);
        const from = ctx.peer.frames().length;
        ctx.peer.send(frame(Data, 0, id, 1));
        await expectProtocolError(ctx, "window_exceeded", from);
      });
    });

    it(`${side(client)}: Data length above maxFrameLength (header only) -> GoAway(1), frame_too_large`, async () => {
      await withSession({ client }, async (ctx) => {
        ctx.peer.send(frame(Data, SYN, id, 16 * 1024 * 1024 + 1));
        await expectProtocolError(ctx, "frame_too_large");
      });
    });

    it(`${side(client)}: Data above a configured maxFrameLength on an unknown stream -> frame_too_large`, async () => {
      await withSession(
        { client, config: { maxFrameLength: 300_000, maxStreamWindow: 300_000 } },
        async (ctx) => {
          ctx.peer.send(frame(Data, 0, 999, 300_001));
          await expectProtocolError(ctx, "frame_too_large");
        },
      );
    });

    it(`${side(client)}: Data after the peer's FIN -> RST that stream, data_after_fin`, async () => {
      await withSession({ client, onStream: true }, async (ctx) => {
        ctx.peer.send(frame(WU, SYN | FIN, id, 0));
        assert.deepEqual(await sync(ctx.peer), [`WU ACK ${id} 0`]);
        // The payload is itself a bad header: if it were parsed, the session would fail.
        const junk = frame(9, 0, 0, 0, undefined, 7);
        ctx.peer.send(frame(Data, 0, id, junk.length, junk));
        const from = ctx.peer.frames().length;
        assert.deepEqual(await sync(ctx.peer, from), [`WU RST ${id} 0`]);
        assert.equal(ctx.session.stats.errors.data_after_fin, 1);
        assert.equal(ctx.accepted[0].state, StreamState.Reset);
        assert.equal(ctx.session.state, "open");
        assert.equal(ctx.session.streamCount, 0);
      });
    });

    it(`${side(client)}: consumed credit is returned once half the window is read`, async () => {
      await withSession({ client, onStream: (s) => s.onData = () => {} }, async (ctx) => {
        const half = INITIAL_STREAM_WINDOW / 2;
        ctx.peer.send(frame(Data, SYN, id, half - 1, new Uint8Array(half - 1)));
        assert.deepEqual(await sync(ctx.peer), [`WU ACK ${id} 0`]);
        ctx.peer.send(frame(Data, 0, id, 1, new Uint8Array(1)));
        const from = ctx.peer.frames().length;
        assert.deepEqual(await sync(ctx.peer, from), [`WU - ${id} ${half}`]);
      });
    });
  }
});

describe("conformance: frames for unknown or closed streams are drained and ignored", () => {
  for (const client of BOTH) {
    it(`${side(client)}: Data, WindowUpdate, FIN, RST for unknown ids -> no response`, async () => {
      await withSession({ client }, async (ctx) => {
        const junk = frame(0xee, 0, 0, 0, undefined, 3); // would be malformed if parsed
        const bytes = concat([
          frame(Data, 0, 7, junk.length, junk),
          frame(Data, ACK, 8, 0),
          frame(WU, 0, 9, 1000),
          frame(WU, FIN, 11, 0),
          frame(WU, RST, 13, 0),
          frame(Data, RST, 15, 0),
          frame(Data, FIN, 16, 4, new Uint8Array([1, 2, 3, 4])),
        ]);
        // Split into 1-byte pieces so the drained payload straddles chunks.
        for (let i = 0; i < bytes.length; i++) ctx.peer.send(bytes.subarray(i, i + 1));
        assert.deepEqual(await sync(ctx.peer), []);
        assert.equal(ctx.session.stats.framesForUnknownStreams, 7);
        assert.equal(ctx.session.stats.resetsReceived, 0);
        assert.equal(ctx.session.state, "open");
        assert.deepEqual(ctx.errors, []);
      });
    });

    it(`${side(client)}: frames for a stream the peer reset -> no response`, async () => {
      await withSession({ client, onStream: true }, async (ctx) => {
        const id = peerId(client);
        ctx.peer.send(frame(WU, SYN, id, 0));
        assert.deepEqual(await sync(ctx.peer), [`WU ACK ${id} 0`]);
        ctx.peer.send(frame(WU, RST, id, 0));
        ctx.peer.send(frame(Data, 0, id, 5, new Uint8Array(5)));
        ctx.peer.send(frame(WU, FIN, id, 10));
        const from = ctx.peer.frames().length;
        assert.deepEqual(await sync(ctx.peer, from), []);
        assert.equal(ctx.session.stats.resetsReceived, 1);
        assert.equal(ctx.session.stats.framesForUnknownStreams, 2);
        assert.equal(ctx.accepted[0].error?.constructor, YamuxError);
      });
    });
  }
});

describe("conformance: flags", () => {
  for (const flags of [0x8000 | SYN, 0xfff0 | SYN]) {
    it(`unknown flag bits 0x${flags.toString(16)} are ignored: the stream opens normally`, async () => {
      const received: number[] = [];
      await withSession({
        client: false,
        onStream: (s) => s.onData = (c) => received.push(...c),
      }, async (ctx) => {
        ctx.peer.send(frame(WU, flags, 1, 0));
        ctx.peer.send(frame(Data, flags & ~SYN, 1, 2, new Uint8Array([4, 2])));
        ctx.peer.send(frame(Data, 0x4000 | SYN, 3, 1, new Uint8Array([9])));
        assert.deepEqual(await sync(ctx.peer), ["WU ACK 1 0", "WU ACK 3 0"]);
        assert.deepEqual(received, [4, 2, 9]);
        assert.equal(ctx.accepted.length, 2);
        assert.equal(ctx.session.stats.resetsReceived, 0);
        assert.equal(ctx.accepted[0].state, StreamState.Established);
      });
    });
  }

  it("ACK is sent once: the first frame of an accepted stream carries it, later ones do not", async () => {
    await withSession({
      client: false,
      onStream: (s) => s.write(new Uint8Array([1])),
    }, async (ctx) => {
      ctx.peer.send(frame(WU, SYN, 1, 0));
      assert.deepEqual(await sync(ctx.peer), ["Data ACK 1 1"]);
      ctx.accepted[0].write(new Uint8Array([2, 3]));
      ctx.accepted[0].end();
      const from = ctx.peer.frames().length;
      // FIN rides in its own header-only frame after the data (as hashicorp and go-yamux send it).
      assert.deepEqual(await sync(ctx.peer, from), ["Data - 1 2", "WU FIN 1 0"]);
    });
  });

  it("accept(): the ACK goes out only when the stream is accepted, as a WindowUpdate", async () => {
    await withSession({ client: false }, async (ctx) => {
      ctx.peer.send(frame(WU, SYN, 1, 0));
      assert.deepEqual(await sync(ctx.peer), []);
      let from = ctx.peer.frames().length;
      const stream = await ctx.session.accept();
      assert.equal(stream.id, 1);
      assert.deepEqual(await sync(ctx.peer, from), ["WU ACK 1 0"]);
      stream.write(new Uint8Array([5]));
      from = ctx.peer.frames().length;
      assert.deepEqual(await sync(ctx.peer, from), ["Data - 1 1"]);
    });
  });

  it("SYN piggybacks: open() + write() in one tick -> a single Data frame with SYN", async () => {
    await withSession({ client: true }, async (ctx) => {
      const stream = ctx.session.open();
      stream.write(new Uint8Array([1, 2, 3]));
      stream.write(new Uint8Array([4]));
      assert.deepEqual(await sync(ctx.peer), ["Data SYN 1 4"]);
      assert.deepEqual(Array.from(ctx.peer.frames()[0].payload), [1, 2, 3, 4]);
      const s2 = ctx.session.open();
      s2.write(new Uint8Array([5]));
      s2.end();
      const from = ctx.peer.frames().length;
      assert.deepEqual(await sync(ctx.peer, from), ["Data SYN 3 1", "WU FIN 3 0"]);
    });
  });

  it("open() alone -> one WindowUpdate SYN with delta 0", async () => {
    await withSession({ client: false }, async (ctx) => {
      ctx.session.open();
      assert.deepEqual(await sync(ctx.peer), ["WU SYN 2 0"]);
    });
  });
});

describe("conformance: ping", () => {
  for (const client of BOTH) {
    for (const value of [0, 1, 0x7fffffff, 0x80000000, MAX_UINT32]) {
      it(`${side(client)}: Ping SYN ${value} -> Ping ACK with exactly ${value}`, async () => {
        await withSession({ client }, async (ctx) => {
          ctx.peer.send(frame(Ping, SYN, 0, value));
          const frames = await ctx.peer.waitFrames(1);
          assert.deepEqual(frames.map(show), [`Ping ACK 0 ${value}`]);
        });
      });
    }
  }

  it("a Ping ACK nobody asked for is ignored", async () => {
    await withSession({ client: true }, async (ctx) => {
      ctx.peer.send(frame(Ping, ACK, 0, 12345));
      assert.deepEqual(await sync(ctx.peer), []);
      assert.equal(ctx.session.state, "open");
    });
  });

  it("ping() sends Ping SYN and resolves on the matching ACK", async () => {
    await withSession({ client: true }, async (ctx) => {
      const rtt = ctx.session.ping();
      const [f] = await ctx.peer.waitFrames(1);
      assert.equal(show(f).startsWith("Ping SYN 0 "), true);
      ctx.peer.send(frame(Ping, ACK, 0, f.length));
      assert.equal(typeof await rtt, "number");
    });
  });

  it("a flood of 10,000 pings while the peer does not read: replies bounded, the rest dropped", async () => {
    await withSession({ client: false }, async (ctx) => {
      const { peer, session } = ctx;
      const max = session.config.maxPendingPingReplies;
      peer.writeReturns = false; // never calls drain
      // One chunk of 5,000, then 50 chunks of 100 with turns in between.
      peer.sendCoalesced(...Array.from({ length: 5000 }, (_, i) => frame(Ping, SYN, 0, i)));
      await tick(2);
      for (let c = 0; c < 50; c++) {
        peer.sendCoalesced(
          ...Array.from({ length: 100 }, (_, i) => frame(Ping, SYN, 0, 5000 + c * 100 + i)),
        );
        await tick();
      }
      await tick(2);
      const written = peer.framesOf(Ping, ACK).length;
      assert.ok(written <= max, `${written} replies written while blocked (max ${max})`);
      assert.equal(session.stats.framesIn.ping, 10_000);
      assert.ok(
        session.stats.pingRepliesDropped >= 10_000 - 2 * max,
        `dropped ${session.stats.pingRepliesDropped}`,
      );
      assert.equal(session.state, "open");
      // Once the transport drains, the queued replies (at most max) go out; nothing was lost
      // silently: every ping is either answered or counted as dropped.
      peer.writeReturns = true;
      peer.drain();
      await tick(2);
      const total = peer.framesOf(Ping, ACK).length;
      assert.ok(total <= 2 * max);
      assert.equal(total + session.stats.pingRepliesDropped, 10_000);
      assert.equal(peer.partialBytes, 0);
    });
  });
});

describe("conformance: GoAway received", () => {
  it("GoAway(0): open() throws remote_goaway, existing streams keep working", async () => {
    const received: number[] = [];
    await withSession({ client: true }, async (ctx) => {
      const { peer, session } = ctx;
      const stream = session.open();
      stream.onData = (c) => received.push(...c);
      assert.deepEqual(await sync(peer), ["WU SYN 1 0"]);
      peer.send(frame(WU, ACK, 1, 0));
      peer.send(frame(GoAway, 0, 0, 0));
      let from = peer.frames().length;
      assert.deepEqual(await sync(peer, from), [], "no answer to GoAway(0)");
      assert.equal(session.remoteGoAway, true);
      assert.equal(session.state, "draining");
      assert.throws(
        () => session.open(),
        (e) => e instanceof YamuxError && e.code === "remote_goaway",
      );
      stream.write(new Uint8Array([1, 2]));
      peer.send(frame(Data, 0, 1, 2, new Uint8Array([3, 4])));
      from = peer.frames().length;
      assert.deepEqual(await sync(peer, from), ["Data - 1 2"]);
      assert.deepEqual(received, [3, 4]);
      assert.equal(stream.state, StreamState.Established);
    });
  });

  for (const code of [1, 2, 3]) {
    it(`GoAway(${code}): the session closes with remote_goaway`, async () => {
      await withSession({ client: false }, async (ctx) => {
        const { peer, session } = ctx;
        const stream = session.open();
        await peer.waitFrames(1);
        peer.send(frame(GoAway, 0, 0, code));
        const error = await session.closed;
        assert.ok(error instanceof YamuxError);
        assert.equal(error.code, "remote_goaway");
        assert.equal(session.state, "closed");
        assert.equal(stream.state, StreamState.Reset);
        assert.equal(peer.closed || peer.ended, true);
        assert.deepEqual(ctx.errors, ["remote_goaway"]);
        assert.deepEqual(shown(peer), ["WU SYN 2 0"], "nothing sent in answer");
      });
    });
  }
});

describe("conformance: refusing streams", () => {
  it("SYN beyond acceptBacklog (nobody accepting) -> RST for the extra stream", async () => {
    await withSession({ client: false, config: { acceptBacklog: 2 } }, async (ctx) => {
      const { peer, session } = ctx;
      peer.send(frame(WU, SYN, 1, 0), frame(WU, SYN, 3, 0));
      peer.send(frame(Data, SYN, 5, 3, new Uint8Array([1, 2, 3])));
      assert.deepEqual(await sync(peer), ["WU RST 5 0"]);
      assert.equal(session.stats.streamsRefused, 1);
      assert.equal(session.stats.errors.backlog_full, 1);
      assert.equal(session.streamCount, 2);
      const from = peer.frames().length;
      assert.equal((await session.accept()).id, 1);
      peer.send(frame(WU, SYN, 7, 0));
      assert.deepEqual(await sync(peer, from), ["WU ACK 1 0"], "7 fits in the backlog again");
      assert.equal(session.stats.streamsRefused, 1);
    });
  });

  it("SYN beyond maxStreams -> RST", async () => {
    await withSession({ client: true, config: { maxStreams: 2 }, onStream: true }, async (ctx) => {
      const { peer, session } = ctx;
      peer.send(frame(WU, SYN, 2, 0), frame(WU, SYN, 4, 0), frame(WU, SYN, 6, 0));
      assert.deepEqual((await sync(peer)).sort(), ["WU ACK 2 0", "WU ACK 4 0", "WU RST 6 0"]);
      assert.equal(session.stats.streamsRefused, 1);
      assert.equal(session.stats.errors.too_many_streams, 1);
      assert.equal(ctx.accepted.length, 2);
    });
  });

  it("after local goAway(), an incoming SYN -> RST", async () => {
    await withSession({ client: false, onStream: true }, async (ctx) => {
      const { peer, session } = ctx;
      session.goAway();
      assert.deepEqual(await sync(peer), ["GoAway - 0 0"]);
      peer.send(frame(Data, SYN, 1, 2, new Uint8Array([1, 2])));
      const from = peer.frames().length;
      assert.deepEqual(await sync(peer, from), ["WU RST 1 0"]);
      assert.equal(session.stats.streamsRefused, 1);
      assert.equal(session.stats.errors.going_away, 1);
      assert.equal(ctx.accepted.length, 0);
    });
  });
});

describe("conformance: open limits", () => {
  it("more than maxUnackedOpens opens: only that many SYNs until ACKs arrive", async () => {
    await withSession({ client: true, config: { maxUnackedOpens: 2 } }, async (ctx) => {
      const { peer, session } = ctx;
      const streams = Array.from({ length: 5 }, () => session.open());
      streams[2].write(new Uint8Array([42]));
      assert.deepEqual(await sync(peer), ["WU SYN 1 0", "WU SYN 3 0"]);
      await tick(3);
      assert.equal(peer.frames().length, 3, "no more SYNs without ACKs (only the sync reply)");
      peer.send(frame(WU, ACK, 1, 0));
      let from = peer.frames().length;
      assert.deepEqual(await sync(peer, from), ["Data SYN 5 1"]);
      peer.send(frame(WU, ACK, 3, 0), frame(WU, ACK, 5, 0));
      from = peer.frames().length;
      assert.deepEqual(await sync(peer, from), ["WU SYN 7 0", "WU SYN 9 0"]);
    });
  });

  it("a queued open whose SYN never left is reset locally without an RST on the wire", async () => {
    await withSession({ client: true, config: { maxUnackedOpens: 1 } }, async (ctx) => {
      const { peer, session } = ctx;
      session.open();
      const queued = session.open();
      queued.write(new Uint8Array([1]));
      assert.deepEqual(await sync(peer), ["WU SYN 1 0"]);
      queued.reset();
      peer.send(frame(WU, ACK, 1, 0));
      const from = peer.frames().length;
      assert.deepEqual(await sync(peer, from), []);
      assert.equal(session.streamCount, 1);
    });
  });
});

describe("conformance: timeouts", () => {
  it("open timeout: no ACK within openTimeout -> RST for that stream, session stays open", async () => {
    await withSession({ client: true, config: { openTimeout: 50 } }, async (ctx) => {
      const { peer, session } = ctx;
      const stream = session.open();
      const closedWith: { error?: Error; called: boolean } = { called: false };
      stream.onClose = (error) => Object.assign(closedWith, { error, called: true });
      await waitFor(() => stream.state === StreamState.Reset, {
        message: "open timeout",
        tries: 2000,
        intervalMs: 5,
      });
      assert.deepEqual(shown(peer), ["WU SYN 1 0", "WU RST 1 0"]);
      assert.equal(session.stats.errors.open_timeout, 1);
      assert.equal(session.state, "open");
      assert.ok(
        closedWith.called && closedWith.error instanceof YamuxError,
        "onClose gets an error",
      );
      assert.equal(session.streamCount, 0);
      session.open();
      assert.deepEqual(await sync(peer, 2), ["WU SYN 3 0"]);
    });
  });

  it("open timeout: the stream's error has code open_timeout", async () => {
    await withSession({ client: true, config: { openTimeout: 50 } }, async (ctx) => {
      const stream = ctx.session.open();
      await waitFor(() => stream.state === StreamState.Reset, {
        message: "open timeout",
        tries: 2000,
        intervalMs: 5,
      });
      assert.ok(stream.error instanceof YamuxError);
      assert.equal(stream.error.code, "open_timeout");
    });
  });

  it("open timeout frees the SYN slot: with maxUnackedOpens 1 the next open still sends SYN", async () => {
    const config = { openTimeout: 50, maxUnackedOpens: 1 };
    await withSession({ client: true, config }, async (ctx) => {
      const { peer, session } = ctx;
      const first = session.open();
      await waitFor(() => first.state === StreamState.Reset, {
        message: "open timeout",
        tries: 2000,
        intervalMs: 5,
      });
      assert.deepEqual(shown(peer), ["WU SYN 1 0", "WU RST 1 0"]);
      session.open();
      assert.deepEqual(await sync(peer, 2), ["WU SYN 3 0"], "SYN 3 goes out");
    });
  });

  it("open timeout of an open still waiting for a SYN slot sends no RST for it", async () => {
    const config = { openTimeout: 50, maxUnackedOpens: 1 };
    await withSession({ client: true, config }, async (ctx) => {
      const { peer, session } = ctx;
      const first = session.open();
      const queued = session.open();
      await waitFor(() => first.state === StreamState.Reset && queued.state === StreamState.Reset, {
        message: "open timeouts",
        tries: 2000,
        intervalMs: 5,
      });
      await tick(2);
      assert.deepEqual(shown(peer), ["WU SYN 1 0", "WU RST 1 0"], "no frame for stream 3");
    });
  });

  it("close timeout: we FIN, the peer never FINs -> RST, session stays open", async () => {
    await withSession({ client: true, config: { closeTimeout: 50 } }, async (ctx) => {
      const { peer, session } = ctx;
      const stream = session.open();
      assert.deepEqual(await sync(peer), ["WU SYN 1 0"]);
      peer.send(frame(WU, ACK, 1, 0));
      stream.end();
      await waitFor(() => stream.state === StreamState.Reset, {
        message: "close timeout",
        tries: 2000,
        intervalMs: 5,
      });
      assert.deepEqual(shown(peer).filter((f) => !f.startsWith("Ping")), [
        "WU SYN 1 0",
        "WU FIN 1 0",
        "WU RST 1 0",
      ]);
      assert.equal(session.stats.errors.close_timeout, 1);
      assert.equal(session.state, "open");
      assert.equal(session.streamCount, 0);
    });
  });

  it("close timeout: the stream's error has code close_timeout", async () => {
    await withSession({ client: true, config: { closeTimeout: 50 } }, async (ctx) => {
      const stream = ctx.session.open();
      await sync(ctx.peer);
      ctx.peer.send(frame(WU, ACK, 1, 0));
      stream.end();
      await waitFor(() => stream.state === StreamState.Reset, {
        message: "close timeout",
        tries: 2000,
        intervalMs: 5,
      });
      assert.ok(stream.error instanceof YamuxError);
      assert.equal(stream.error.code, "close_timeout");
    });
  });

  it("keepalive: a silent peer gets a Ping SYN, then the session closes with keepalive_timeout", async () => {
    const config = { enableKeepAlive: true, keepAliveInterval: 20, keepAliveTimeout: 40 };
    await withSession({ client: true, config }, async (ctx) => {
      const { peer, session } = ctx;
      const result: { done: boolean; error?: Error } = { done: false };
      session.closed.then((error) => Object.assign(result, { done: true, error }));
      await waitFor(() => result.done, { message: "keepalive close", tries: 2000, intervalMs: 5 });
      assert.ok(result.error instanceof YamuxError);
      assert.equal(result.error.code, "keepalive_timeout");
      assert.equal(session.stats.errors.keepalive_timeout, 1);
      const pings = peer.framesOf(Ping, SYN);
      assert.equal(pings.length, 1, "one keepalive ping");
      assert.equal(pings[0].streamId, 0);
      assert.equal(peer.closed || peer.ended, true);
    });
  });

  it("keepalive: a peer that keeps sending data but never answers pings does not time out", async () => {
    const config = { enableKeepAlive: true, keepAliveInterval: 20, keepAliveTimeout: 40 };
    await withSession(
      { client: false, config, onStream: (s) => s.onData = () => {} },
      async (ctx) => {
        const { peer, session } = ctx;
        peer.send(frame(WU, SYN, 1, 0));
        // Each time the session pings, answer with a data frame instead of a Ping ACK.
        for (let i = 1; i <= 4; i++) {
          await waitFor(() => peer.framesOf(Ping, SYN).length >= i, {
            message: `keepalive ping ${i}`,
            tries: 4000,
            intervalMs: 2,
          });
          peer.send(frame(Data, 0, 1, 1, new Uint8Array([i])));
        }
        assert.equal(session.state, "open");
        assert.equal(session.stats.errors.keepalive_timeout, undefined);
        assert.ok(peer.framesOf(Ping, SYN).length >= 4);
      },
    );
  });
});

describe("conformance: transport", () => {
  it("the peer ends the transport mid-session -> the session closes with an error", async () => {
    await withSession({ client: true }, async (ctx) => {
      const stream = ctx.session.open();
      await sync(ctx.peer);
      ctx.peer.peerEnd();
      const error = await ctx.session.closed;
      assert.ok(error instanceof YamuxError);
      assert.equal(error.code, "session_closed");
      assert.equal(stream.state, StreamState.Reset);
    });
  });

  it("a refused SYN+Data has its payload drained", async () => {
    await withSession({ client: false, config: { acceptBacklog: 1 } }, async (ctx) => {
      const junk = frame(0xee, 0, 0, 0, undefined, 3);
      ctx.peer.sendCoalesced(frame(WU, SYN, 1, 0), frame(Data, SYN, 3, junk.length, junk));
      assert.deepEqual(await sync(ctx.peer), ["WU RST 3 0"]);
      assert.equal(ctx.session.state, "open");
    });
  });
});

describe("conformance: graceful close", () => {
  it("close() with no streams -> GoAway(0), then the transport ends; closed resolves clean", async () => {
    await withSession({ client: true }, async (ctx) => {
      const { peer, session } = ctx;
      const error = await session.close();
      assert.equal(error, undefined);
      await peer.waitGone();
      assert.deepEqual(shown(peer), ["GoAway - 0 0"]);
      assert.equal(peer.framesAtEnd, 1);
      assert.equal(peer.writesAfterEnd, 0);
    });
  });

  it("close() waits for a stream; our last FIN goes out before the transport ends", async () => {
    await withSession({ client: false, onStream: true }, async (ctx) => {
      const { peer, session } = ctx;
      peer.send(frame(WU, SYN | FIN, 1, 0));
      assert.deepEqual(await sync(peer), ["WU ACK 1 0"]);
      const closed = session.close();
      const from = peer.frames().length;
      assert.deepEqual(await sync(peer, from), ["GoAway - 0 0"]);
      assert.equal(session.streamCount, 1, "the stream is not cut off");
      ctx.accepted[0].write(new Uint8Array([1, 2]));
      ctx.accepted[0].end();
      assert.equal(await closed, undefined);
      await peer.waitGone();
      assert.deepEqual(shown(peer).filter((f) => !f.startsWith("Ping")), [
        "WU ACK 1 0",
        "GoAway - 0 0",
        "Data - 1 2",
        "WU FIN 1 0",
      ]);
      assert.equal(peer.writesAfterEnd, 0, "nothing written after transport.end()");
      assert.equal(peer.framesAtEnd, peer.frames().length, "the FIN went out before end()");
    });
  });

  it("close() waits for a stream; the peer's FIN (after ours) finishes it cleanly", async () => {
    await withSession({ client: true }, async (ctx) => {
      const { peer, session } = ctx;
      const stream = session.open();
      stream.onEnd = () => {};
      stream.end();
      assert.deepEqual(await sync(peer), ["WU SYN|FIN 1 0"]);
      const closed = session.close();
      peer.send(frame(WU, ACK | FIN, 1, 0));
      assert.equal(await closed, undefined);
      await peer.waitGone();
      assert.deepEqual(shown(peer).filter((f) => !f.startsWith("Ping")), [
        "WU SYN|FIN 1 0",
        "GoAway - 0 0",
      ]);
      assert.equal(peer.writesAfterEnd, 0);
    });
  });
});

describe("conformance: backpressure on control frames", () => {
  it("refusals queued while the peer does not read: past maxQueuedControlFrames it is not read either, and stays up", async () => {
    const config = { acceptBacklog: 1, maxQueuedControlFrames: 8 };
    await withSession({ client: false, config }, async (ctx) => {
      const { peer, session } = ctx;
      peer.writeReturns = false;
      peer.send(frame(WU, SYN, 1, 0));
      assert.deepEqual(await sync(peer), [], "the marker reply was the write that pushed back");
      const before = peer.frames().length;
      // 20 opens past the backlog, all in one read: 8 refusals fill the queue, then reading stops.
      peer.sendCoalesced(...Array.from({ length: 20 }, (_, i) => frame(WU, SYN, 3 + 2 * i, 0)));
      assert.equal(peer.paused, true, "the transport is paused");
      assert.equal(session.stats.streamsRefused, 8);
      assert.equal(session.stats.readPauses, 1);
      assert.equal(session.state, "open");
      // The peer reads again: the refusals go out, the rest of its input is decoded, reading resumes.
      peer.writeReturns = true;
      peer.drain();
      await tick();
      assert.equal(peer.paused, false);
      assert.deepEqual(
        await sync(peer, before),
        Array.from({ length: 20 }, (_, i) => `WU RST ${3 + 2 * i} 0`),
        "every open is refused, in order, none lost",
      );
      assert.equal(session.stats.errors.control_overflow, undefined);
      assert.equal(session.state, "open");
    });
  });

  it("a burst of 20,000 opens in one read from a peer that reads: each refused, no GoAway, pings answered", async () => {
    await withSession({ client: false, config: { maxStreams: 100 } }, async (ctx) => {
      const { peer, session } = ctx;
      const opens = Array.from({ length: 20_000 }, (_, i) => frame(WU, SYN, 1 + 2 * i, 0));
      peer.sendCoalesced(...opens);
      const replies = await sync(peer);
      const refused = session.stats.streamsRefused;
      assert.equal(session.stats.streamsAccepted + refused, 20_000);
      assert.ok(refused >= 19_900, `at most maxStreams accepted (${refused} refused)`);
      assert.equal(replies.filter((f) => f.startsWith("WU RST")).length, refused, "one RST each");
      assert.equal(replies.filter((f) => f.startsWith("GoAway")).length, 0);
      assert.equal(session.state, "open");
    });
  });
});

describe("conformance: streams and GoAway edge cases", () => {
  it("GoAway(0) received: an open still waiting for a SYN slot fails with remote_goaway", async () => {
    await withSession({ client: true, config: { maxUnackedOpens: 1 } }, async (ctx) => {
      const { peer, session } = ctx;
      const first = session.open();
      const queued = session.open();
      assert.deepEqual(await sync(peer), ["WU SYN 1 0"]);
      peer.send(frame(GoAway, 0, 0, 0));
      peer.send(frame(WU, ACK, 1, 0));
      const from = peer.frames().length;
      assert.deepEqual(await sync(peer, from), [], "the queued SYN never goes out");
      assert.equal(queued.state, StreamState.Reset);
      assert.ok(queued.error instanceof YamuxError);
      assert.equal(queued.error.code, "remote_goaway");
      assert.equal(first.state, StreamState.Established);
      assert.equal(session.streamCount, 1);
    });
  });

  it("a stream the peer reset while it waited in the backlog frees its backlog slot", async () => {
    await withSession({ client: false, config: { acceptBacklog: 1 } }, async (ctx) => {
      const { peer, session } = ctx;
      peer.send(frame(WU, SYN, 1, 0), frame(WU, RST, 1, 0));
      peer.send(frame(WU, SYN, 3, 0));
      assert.deepEqual(await sync(peer), [], "stream 3 must not be refused");
      assert.equal(session.stats.streamsRefused, 0);
      assert.equal(session.streamCount, 1);
    });
  });

  it("accept() skips a stream the peer reset while it waited in the backlog", async () => {
    await withSession({ client: false }, async (ctx) => {
      const { peer, session } = ctx;
      peer.send(frame(WU, SYN, 1, 0), frame(WU, RST, 1, 0), frame(WU, SYN, 3, 0));
      await sync(peer);
      const stream = await session.accept();
      assert.equal(stream.id, 3);
    });
  });
});
