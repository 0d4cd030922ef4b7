/**
 * Flow-control properties of two real sessions over an in-memory pair that re-splits and coalesces
 * the byte stream: random interleavings of writes, pauses, resumes, ends and resets on several
 * streams in both directions.
 */
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import fc from "fast-check";
import type { SessionConfig } from "./config.ts";
import { Session } from "./session.ts";
import type { Stream } from "./stream.ts";
import { testPair, tick } from "./_raw_peer.ts";
import { EACH_TURN, waitFor } from "../testing/wait.ts";

const STREAMS = 3;

type Side = 0 | 1; // 0: client, 1: server

type Op =
  | { kind: "write"; side: Side; stream: number; size: number }
  | { kind: "pause" | "resume" | "end" | "reset"; side: Side; stream: number }
  | { kind: "tick"; turns: number }
  | { kind: "expectBuffered"; side: Side; stream: number; bytes: number };

const side = fc.constantFrom<Side>(0, 1);
const streamIndex = fc.integer({ min: 0, max: STREAMS - 1 });
const size = fc.oneof(
  { arbitrary: fc.integer({ min: 1, max: 64 }), weight: 4 },
  { arbitrary: fc.integer({ min: 65, max: 20_000 }), weight: 4 },
  { arbitrary: fc.integer({ min: 60_000, max: 300_000 }), weight: 1 },
);

const op: fc.Arbitrary<Op> = fc.oneof(
  {
    arbitrary: fc.record({ kind: fc.constant("write" as const), side, stream: streamIndex, size }),
    weight: 8,
  },
  {
    arbitrary: fc.record({
      kind: fc.constantFrom("pause" as const, "resume" as const),
      side,
      stream: streamIndex,
    }),
    weight: 3,
  },
  {
    arbitrary: fc.record({ kind: fc.constant("end" as const), side, stream: streamIndex }),
    weight: 1,
  },
  {
    arbitrary: fc.record({ kind: fc.constant("reset" as const), side, stream: streamIndex }),
    weight: 1,
  },
  {
    arbitrary: fc.record({
      kind: fc.constant("tick" as const),
      turns: fc.integer({ min: 1, max: 4 }),
    }),
    weight: 3,
  },
);

const configArb: fc.Arbitrary<Partial<SessionConfig>> = fc.record({
  autoTuneWindow: fc.boolean(),
  maxDataFrameSize: fc.constantFrom(1024, 16 * 1024, 64 * 1024),
  maxWriteBatch: fc.constantFrom(4096, 64 * 1024, 256 * 1024),
  writeHighWaterMark: fc.constantFrom(1024, 256 * 1024),
});

/** The byte a side sends at `offset` of stream `index`. */
function byteAt(from: Side, index: number, offset: number): number {
  return (offset * 31 + index * 17 + from * 101 + (offset >>> 8)) & 0xff;
}

interface Pipe {
  sent: number;
  received: number;
  mismatches: number;
}

interface Endpoint {
  stream: Stream;
  ended: boolean;
  gotEnd: boolean;
}

async function runScenario(
  ops: readonly Op[],
  config: Partial<SessionConfig>,
  seed: number,
  maxPiece: number,
): Promise<void> {
  const [ta, tb] = testPair({ seed, maxPiece, highWaterMark: 32 * 1024 });
  const errors: string[] = [];
  const common = { ...config, enableKeepAlive: false };
  const endpoints: [Endpoint[], Endpoint[]] = [[], []];
  // pipes[from][i]: bytes side `from` sent on stream i and what the other side received.
  const pipes: Pipe[][] = [0, 1].map(() =>
    Array.from({ length: STREAMS }, () => ({ sent: 0, received: 0, mismatches: 0 }))
  );
  const wasReset = new Array<boolean>(STREAMS).fill(false);
  const windowViolations: string[] = [];

  const checkWindows = (where: string) => {
    for (const [name, session] of [["client", client], ["server", server]] as const) {
      for (const s of session.streams()) {
        if (s.bufferedBytes > s.receiveWindow) {
          windowViolations.push(
            `${where}: ${name} stream ${s.id} buffers ${s.bufferedBytes} > window ${s.receiveWindow}`,
          );
        }
      }
    }
  };

  const attach = (at: Side, index: number, stream: Stream): Endpoint => {
    const endpoint: Endpoint = { stream, ended: false, gotEnd: false };
    const pipe = pipes[at === 0 ? 1 : 0][index];
    const from: Side = at === 0 ? 1 : 0;
    stream.onData = (chunk) => {
      for (let k = 0; k < chunk.length; k++) {
        if (chunk[k] !== byteAt(from, index, pipe.received + k)) pipe.mismatches++;
      }
      pipe.received += chunk.length;
      if (stream.bufferedBytes > stream.receiveWindow) {
        windowViolations.push(`onData: stream ${stream.id} over its window`);
      }
    };
    stream.onEnd = () => endpoint.gotEnd = true;
    return endpoint;
  };

  const client = new Session(ta, {
    client: true,
    config: common,
    onError: (_e, reason) => errors.push(`client: ${reason}`),
  });
  const server = new Session(tb, {
    client: false,
    config: common,
    onStream: (stream) => {
      const index = (stream.id - 1) / 2;
      endpoints[1][index] = attach(1, index, stream);
    },
    onError: (_e, reason) => errors.push(`server: ${reason}`),
  });
  let sessionClosed = false;
  client.closed.then(() => sessionClosed = true);
  server.closed.then(() => sessionClosed = true);

  try {
    for (let i = 0; i < STREAMS; i++) endpoints[0][i] = attach(0, i, client.open());
    await waitFor(() => server.streamCount === STREAMS, {
      ...EACH_TURN,
      message: "server sees every stream",
    });

    for (const o of ops) {
      if (o.kind === "tick") {
        await tick(o.turns);
        checkWindows("tick");
        continue;
      }
      if (o.kind === "expectBuffered") {
        const s = endpoints[o.side][o.stream].stream;
        await waitFor(() => s.bufferedBytes >= o.bytes, {
          ...EACH_TURN,
          message: `${o.bytes} bytes buffered`,
        });
        await tick(4);
        assert.equal(s.bufferedBytes, o.bytes);
        continue;
      }
      const endpoint = endpoints[o.side][o.stream];
      const stream = endpoint.stream;
      switch (o.kind) {
        case "write": {
          if (endpoint.ended || wasReset[o.stream]) break;
          const pipe = pipes[o.side][o.stream];
          const chunk = new Uint8Array(o.size);
          for (let k = 0; k < chunk.length; k++) chunk[k] = byteAt(o.side, o.stream, pipe.sent + k);
          pipe.sent += chunk.length;
          stream.write(chunk);
          break;
        }
        case "pause":
          stream.pause();
          break;
        case "resume":
          stream.resume();
          break;
        case "end":
          endpoint.ended = true;
          stream.end();
          break;
        case "reset":
          wasReset[o.stream] = true;
          stream.reset();
          break;
      }
      checkWindows(o.kind);
    }

    // Finish: every reader resumes, every writer ends.
    for (const at of [0, 1] as const) {
      for (const endpoint of endpoints[at]) {
        endpoint.stream.resume();
        endpoint.ended = true;
        endpoint.stream.end();
      }
    }
    await waitFor(() => {
      checkWindows("finish");
      return client.streamCount === 0 && server.streamCount === 0;
    }, { ...EACH_TURN, message: "every stream finished", tries: 50_000 });

    assert.deepEqual(windowViolations, []);
    assert.deepEqual(errors, []);
    assert.equal(sessionClosed, false, "no session closed");
    for (let i = 0; i < STREAMS; i++) {
      if (wasReset[i]) continue;
      for (const from of [0, 1] as const) {
        const pipe = pipes[from][i];
        assert.equal(pipe.received, pipe.sent, `stream ${i} from ${from}: all bytes arrive`);
        assert.equal(pipe.mismatches, 0, `stream ${i} from ${from}: bytes intact and in order`);
        assert.equal(endpoints[from === 0 ? 1 : 0][i].gotEnd, true, `stream ${i}: end delivered`);
      }
    }
    assert.deepEqual(client.stats.errors, {});
    assert.deepEqual(server.stats.errors, {});
    assert.equal(client.state, "open");
    assert.equal(server.state, "open");
  } finally {
    client.destroy();
    server.destroy();
    await tick();
  }
}

describe("flow control: properties over a re-splitting in-memory pair", () => {
  it("bytes arrive intact, buffers stay within windows, streams finish, no session error", async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(op, { minLength: 1, maxLength: 30 }),
        configArb,
        fc.integer({ min: 1, max: 0x7fffffff }),
        fc.constantFrom(16, 1500, 65536),
        (ops, config, seed, maxPiece) => runScenario(ops, config, seed, maxPiece),
      ),
      { numRuns: 30 },
    );
  });

  it("a paused reader holds exactly its window while the writer pushes far more", async () => {
    await runScenario(
      [
        { kind: "pause", side: 1, stream: 0 },
        { kind: "write", side: 0, stream: 0, size: 300_000 },
        { kind: "write", side: 0, stream: 0, size: 300_000 },
        { kind: "write", side: 0, stream: 1, size: 100_000 },
        { kind: "expectBuffered", side: 1, stream: 0, bytes: 256 * 1024 },
        { kind: "resume", side: 1, stream: 0 },
        { kind: "pause", side: 0, stream: 2 },
        { kind: "write", side: 1, stream: 2, size: 280_000 },
        { kind: "reset", side: 1, stream: 1 },
      ],
      { autoTuneWindow: false },
      12345,
      1500,
    );
  });
});
