import { describe, it } from "node:test";
import assert from "node:assert/strict";
import fc from "fast-check";
import { Flag, FrameType, HEADER_LENGTH, MAX_UINT32 } from "./constants.ts";
import { FrameDecoder, type FrameSink } from "./frame_decoder.ts";
import { writeHeader } from "./header.ts";
import { frame } from "./_raw_peer.ts";
import { concat } from "../util/bytes/bytes.ts";
import { BufferPool, releaseBytes, takeFrontRoom } from "../util/bytes/buffer_pool.ts";

interface Decoded {
  type: number;
  flags: number;
  streamId: number;
  length: number;
  /** Data payload, concatenated over its pieces. */
  payload: number[];
  /** payloadEnd() calls for this frame. */
  ends: number;
}

interface Recorder extends FrameSink {
  frames: Decoded[];
  views: Uint8Array[];
  malformedCalls: [string, string][];
  events: string[];
}

function recorder(onFrame?: (decoder: FrameDecoder, f: Decoded) => void): {
  decoder: FrameDecoder;
  sink: Recorder;
} {
  const sink: Recorder = {
    frames: [],
    views: [],
    malformedCalls: [],
    events: [],
    frame(type, flags, streamId, length) {
      const f = { type, flags, streamId, length, payload: [], ends: 0 };
      sink.frames.push(f);
      sink.events.push(`frame:${type}`);
      onFrame?.(decoder, f);
    },
    payload(view) {
      sink.views.push(view);
      sink.events.push(`payload:${view.length}`);
      const f = sink.frames[sink.frames.length - 1];
      for (const b of view) f.payload.push(b);
    },
    payloadEnd() {
      sink.events.push("end");
      sink.frames[sink.frames.length - 1].ends++;
    },
    malformed(reason, detail) {
      sink.events.push(`malformed:${reason}`);
      sink.malformedCalls.push([reason, detail]);
    },
  };
  const decoder = new FrameDecoder(sink);
  return { decoder, sink };
}

interface FrameSpec {
  type: number;
  flags: number;
  streamId: number;
  length: number;
  payload: Uint8Array;
}

const dataFrame: fc.Arbitrary<FrameSpec> = fc.record({
  flags: fc.integer({ min: 0, max: 0xffff }),
  streamId: fc.integer({ min: 0, max: MAX_UINT32 }),
  payload: fc.oneof(
    fc.uint8Array({ maxLength: 0 }),
    fc.uint8Array({ minLength: 1, maxLength: 40 }),
    fc.uint8Array({ minLength: 100, maxLength: 700 }),
  ),
}).map((r) => ({ ...r, type: FrameType.Data, length: r.payload.length }));

const controlFrame: fc.Arbitrary<FrameSpec> = fc.record({
  type: fc.integer({ min: 1, max: 3 }),
  flags: fc.integer({ min: 0, max: 0xffff }),
  streamId: fc.integer({ min: 0, max: MAX_UINT32 }),
  length: fc.oneof(fc.constantFrom(0, 1, MAX_UINT32), fc.integer({ min: 0, max: MAX_UINT32 })),
}).map((r) => ({ ...r, payload: new Uint8Array(0) }));

const frames = fc.array(fc.oneof(dataFrame, controlFrame), { minLength: 0, maxLength: 25 });

/** Encodes with the engine's writeHeader (the frame builder in _raw_peer is independent). */
function encode(specs: readonly FrameSpec[]): Uint8Array {
  const size = specs.reduce((n, f) => n + HEADER_LENGTH + f.payload.length, 0);
  const out = new Uint8Array(size);
  let at = 0;
  for (const f of specs) {
    writeHeader(out, at, f.type, f.flags, f.streamId, f.length);
    out.set(f.payload, at + HEADER_LENGTH);
    at += HEADER_LENGTH + f.payload.length;
  }
  return out;
}

function expected(specs: readonly FrameSpec[]): Decoded[] {
  return specs.map((f) => ({
    type: f.type,
    flags: f.flags,
    streamId: f.streamId,
    length: f.length,
    payload: Array.from(f.payload),
    ends: f.type === FrameType.Data ? 1 : 0,
  }));
}

/** Cuts `bytes` at the given (unsorted, possibly repeated or out-of-range) points. */
function cut(bytes: Uint8Array, points: readonly number[]): Uint8Array[] {
  const sorted = [...new Set(points.map((p) => p % (bytes.length + 1)))].sort((a, b) => a - b);
  const pieces: Uint8Array[] = [];
  let from = 0;
  for (const p of sorted) {
    if (p <= from) continue;
    pieces.push(bytes.subarray(from, p));
    from = p;
  }
  if (from < bytes.length || pieces.length === 0) pieces.push(bytes.subarray(from));
  return pieces;
}

/** Cutting strategies: random points, every byte, or every byte of a random prefix. */
const cutting = fc.oneof(
  fc.record({ kind: fc.constant("points"), points: fc.array(fc.nat(), { maxLength: 60 }) }),
  fc.record({ kind: fc.constant("bytes"), points: fc.constant([] as number[]) }),
  fc.record({ kind: fc.constant("prefix-bytes"), points: fc.array(fc.nat(), { maxLength: 1 }) }),
);

function piecesFor(bytes: Uint8Array, c: { kind: string; points: number[] }): Uint8Array[] {
  if (c.kind === "bytes") return Array.from(bytes, (_, i) => bytes.subarray(i, i + 1));
  if (c.kind === "prefix-bytes") {
    const n = (c.points[0] ?? 0) % (bytes.length + 1);
    const head = Array.from(bytes.subarray(0, n), (_, i) => bytes.subarray(i, i + 1));
    return [...head, bytes.subarray(n)];
  }
  return cut(bytes, c.points);
}

describe("FrameDecoder: properties", () => {
  it("any split or coalescing of valid frames decodes to the same headers and payloads", () => {
    fc.assert(
      fc.property(frames, cutting, (specs, c) => {
        const bytes = encode(specs);
        const { decoder, sink } = recorder();
        for (const piece of piecesFor(bytes, c)) decoder.push(piece);
        assert.deepEqual(sink.frames, expected(specs));
        assert.equal(sink.malformedCalls.length, 0);
        assert.equal(decoder.stopped, false);
        for (const v of sink.views) assert.ok(v.length > 0, "no empty payload views");
      }),
      { numRuns: 300 },
    );
  });

  it("several batches pushed as separate coalesced chunks decode the same", () => {
    fc.assert(
      fc.property(fc.array(frames, { minLength: 1, maxLength: 5 }), (batches) => {
        const { decoder, sink } = recorder();
        for (const batch of batches) decoder.push(encode(batch));
        assert.deepEqual(sink.frames, expected(batches.flat()));
      }),
      { numRuns: 100 },
    );
  });

  it("encode/decode round trip in one chunk, against an independent encoder", () => {
    fc.assert(
      fc.property(frames, (specs) => {
        const engine = encode(specs);
        const independent = concat(
          specs.map((f) => frame(f.type, f.flags, f.streamId, f.length, f.payload)),
        );
        assert.deepEqual(engine, independent);
        const { decoder, sink } = recorder();
        decoder.push(engine);
        assert.deepEqual(sink.frames, expected(specs));
      }),
      { numRuns: 300 },
    );
  });
});

describe("FrameDecoder: malformed input", () => {
  for (const version of [1, 2, 0x80, 0xff]) {
    it(`bad version ${version} is reported once and decoding stops`, () => {
      const { decoder, sink } = recorder();
      decoder.push(concat([
        frame(FrameType.Ping, Flag.SYN, 0, 1),
        frame(FrameType.Ping, Flag.SYN, 0, 2, undefined, version),
        frame(FrameType.Ping, Flag.SYN, 0, 3),
      ]));
      decoder.push(frame(FrameType.Ping, Flag.SYN, 0, 4));
      decoder.push(frame(FrameType.Ping, Flag.SYN, 0, 5, undefined, version));
      assert.deepEqual(sink.frames.map((f) => f.length), [1]);
      assert.equal(sink.malformedCalls.length, 1);
      assert.equal(sink.malformedCalls[0][0], "bad_version");
      assert.equal(decoder.stopped, true);
    });
  }

  for (const type of [4, 5, 0x7f, 0xff]) {
    it(`unknown type ${type} is reported once and decoding stops (header split in 1-byte pieces)`, () => {
      const { decoder, sink } = recorder();
      const bytes = concat([
        frame(FrameType.Data, 0, 1, 2, new Uint8Array([7, 8])),
        frame(type, 0, 0, 0),
        frame(FrameType.Data, 0, 1, 2, new Uint8Array([9, 9])),
      ]);
      for (let i = 0; i < bytes.length; i++) decoder.push(bytes.subarray(i, i + 1));
      decoder.push(frame(type, 0, 0, 0));
      assert.equal(sink.frames.length, 1);
      assert.deepEqual(sink.frames[0].payload, [7, 8]);
      assert.deepEqual(sink.malformedCalls.map((m) => m[0]), ["unknown_type"]);
      assert.equal(decoder.stopped, true);
    });
  }

  it("a bad header inside a Data payload is just payload", () => {
    const { decoder, sink } = recorder();
    const inner = frame(0xff, 0, 0, 0, undefined, 0xff);
    decoder.push(frame(FrameType.Data, 0, 3, inner.length, inner));
    assert.equal(sink.malformedCalls.length, 0);
    assert.deepEqual(sink.frames[0].payload, Array.from(inner));
  });
});

describe("FrameDecoder: stop()", () => {
  it("stop() from inside frame() prevents payload delivery and everything after", () => {
    const { decoder, sink } = recorder((d, f) => {
      if (f.streamId === 5) d.stop();
    });
    decoder.push(concat([
      frame(FrameType.Data, 0, 3, 2, new Uint8Array([1, 2])),
      frame(FrameType.Data, 0, 5, 4, new Uint8Array([3, 4, 5, 6])),
      frame(FrameType.Ping, Flag.SYN, 0, 9),
    ]));
    decoder.push(frame(FrameType.Ping, Flag.SYN, 0, 10));
    assert.deepEqual(sink.events, ["frame:0", "payload:2", "end", "frame:0"]);
    assert.equal(decoder.stopped, true);
  });

  it("stop() from inside frame() for an empty Data frame suppresses payloadEnd", () => {
    const { decoder, sink } = recorder((d) => d.stop());
    decoder.push(frame(FrameType.Data, Flag.SYN, 1, 0));
    assert.deepEqual(sink.events, ["frame:0"]);
  });

  it("stop() when the header arrives alone: the later payload chunk is ignored", () => {
    const { decoder, sink } = recorder((d) => d.stop());
    decoder.push(frame(FrameType.Data, 0, 1, 3));
    decoder.push(new Uint8Array([1, 2, 3]));
    assert.deepEqual(sink.events, ["frame:0"]);
  });

  it("stop() from outside ignores the rest", () => {
    const { decoder, sink } = recorder();
    decoder.push(frame(FrameType.Ping, 0, 0, 1));
    decoder.stop();
    decoder.push(frame(FrameType.Ping, 0, 0, 2));
    assert.equal(sink.frames.length, 1);
    assert.equal(decoder.stopped, true);
  });
});

describe("FrameDecoder: zero copy", () => {
  it("payload views share the pushed chunk's buffer", () => {
    const { decoder, sink } = recorder();
    const chunk = concat([
      frame(FrameType.Data, 0, 1, 3, new Uint8Array([1, 2, 3])),
      frame(FrameType.WindowUpdate, 0, 1, 5),
      frame(FrameType.Data, 0, 3, 4, new Uint8Array([4, 5, 6, 7])),
    ]);
    decoder.push(chunk);
    assert.equal(sink.views.length, 2);
    for (const v of sink.views) assert.equal(v.buffer, chunk.buffer);
    assert.equal(sink.views[0].byteOffset, HEADER_LENGTH);
    assert.equal(sink.views[1].byteOffset, 3 * HEADER_LENGTH + 3);
  });

  it("a payload split across chunks arrives as views of each chunk", () => {
    const { decoder, sink } = recorder();
    const bytes = frame(FrameType.Data, 0, 1, 10, new Uint8Array(10).fill(7));
    const a = bytes.slice(0, 5); // header straddles: 5 of 12 bytes
    const b = bytes.slice(5, 16); // rest of header + 4 payload bytes
    const c = bytes.slice(16); // 6 payload bytes, the whole chunk
    decoder.push(a);
    decoder.push(b);
    decoder.push(c);
    assert.equal(sink.views.length, 2);
    assert.equal(sink.views[0].buffer, b.buffer);
    assert.equal(sink.views[0].length, 4);
    assert.equal(sink.views[1], c, "a chunk that is all payload is passed as is");
    assert.equal(sink.frames[0].ends, 1);
  });

  it("pushing a subarray (non-zero byteOffset) yields views into the same memory", () => {
    const { decoder, sink } = recorder();
    const backing = new Uint8Array(100);
    backing.set(frame(FrameType.Data, 0, 1, 2, new Uint8Array([0xab, 0xcd])), 50);
    decoder.push(backing.subarray(50, 64));
    assert.equal(sink.views[0].buffer, backing.buffer);
    assert.equal(sink.views[0].byteOffset, 62);
    assert.deepEqual(sink.frames[0].payload, [0xab, 0xcd]);
  });
});

describe("FrameDecoder: room in front of a payload", () => {
  it("offers a large payload's own decoded header to whoever frames it whole", () => {
    const pool = new BufferPool(64 * 1024, 2);
    const buffer = pool.acquire();
    const payload = new Uint8Array(10_000).fill(7);
    const bytes = concat([
      frame(FrameType.Data, 0, 1, 100, new Uint8Array(100)), // small: no offer
      frame(FrameType.Data, 0, 3, payload.length, payload),
    ]);
    buffer.set(bytes);
    const { decoder, sink } = recorder();
    decoder.push(buffer.subarray(0, bytes.length));
    assert.equal(sink.views.length, 2);
    assert.equal(takeFrontRoom(sink.views[0], HEADER_LENGTH), undefined, "a small payload");
    const framed = takeFrontRoom(sink.views[1], HEADER_LENGTH)!;
    assert.equal(framed.byteOffset, HEADER_LENGTH + 100, "its own header's place");
    assert.equal(framed.length, HEADER_LENGTH + 10_000);
    releaseBytes(buffer);
  });

  it("offers nothing for a payload whose header came in the chunk before", () => {
    const pool = new BufferPool(64 * 1024, 2);
    const buffer = pool.acquire();
    const bytes = frame(FrameType.Data, 0, 1, 10_000, new Uint8Array(10_000));
    buffer.set(bytes);
    const { decoder, sink } = recorder();
    decoder.push(buffer.subarray(0, 6)); // half a header
    decoder.push(buffer.subarray(6, bytes.length));
    assert.equal(sink.views.length, 1);
    assert.equal(takeFrontRoom(sink.views[0], HEADER_LENGTH), undefined);
    releaseBytes(buffer);
  });
});

describe("FrameDecoder: readLimit", () => {
  const CAPACITY = 66_000;

  it("has no wish before a large Data frame, after a small one, mid-header or while held", () => {
    const { decoder } = recorder();
    assert.equal(decoder.readLimit(CAPACITY), 0, "nothing seen yet");
    decoder.push(frame(FrameType.Data, 0, 1, 100, new Uint8Array(100)));
    assert.equal(decoder.readLimit(CAPACITY), 0, "after a small frame");
    const large = frame(FrameType.Data, 0, 1, 20_000, new Uint8Array(20_000));
    decoder.push(large);
    assert.equal(decoder.readLimit(CAPACITY), HEADER_LENGTH + 20_000, "the next frame, as large");
    decoder.push(large.subarray(0, 5));
    assert.equal(decoder.readLimit(CAPACITY), 0, "half a header");
    decoder.push(large.subarray(5, 1_000));
    assert.equal(decoder.readLimit(CAPACITY), 19_012 + HEADER_LENGTH + 20_000, "its rest too");
    decoder.hold();
    assert.equal(decoder.readLimit(CAPACITY), 0, "held");
    decoder.release();
    assert.equal(decoder.readLimit(30_000), 30_000, "never more than the capacity");
  });

  it("a control frame in between leaves the wish to the Data frame before it", () => {
    const { decoder } = recorder();
    decoder.push(frame(FrameType.Data, 0, 1, 20_000, new Uint8Array(20_000)));
    decoder.push(frame(FrameType.WindowUpdate, 0, 1, 5_000));
    assert.equal(decoder.readLimit(CAPACITY), HEADER_LENGTH + 20_000);
  });

  /**
   * Reads `bytes` as a transport that sizes its reads would: `readLimit` bytes when the decoder
   * has a wish, else `fallback`, never more than what is left. Returns the payload pieces.
   */
  function readAsked(bytes: Uint8Array, fallback: number, wishes: boolean): number[] {
    const { decoder, sink } = recorder();
    for (let at = 0; at < bytes.length;) {
      const wish = wishes ? decoder.readLimit(CAPACITY) : 0;
      const n = Math.min(wish || fallback, bytes.length - at);
      decoder.push(bytes.subarray(at, at + n));
      at += n;
    }
    return sink.views.map((view) => view.length);
  }

  it("reads it sizes hand over every full frame whole, one cut per control frame between", () => {
    const fallback = 65_504; // a read that a frame of 65,504 bytes and its header never fits
    const data = frame(FrameType.Data, 0, 1, fallback, new Uint8Array(fallback));
    const ping = frame(FrameType.Ping, 0, 0, 1);
    const bytes = concat([
      ...Array(20).fill(data),
      ping,
      ...Array(20).fill(data),
    ]);
    const asked = readAsked(bytes, fallback, true);
    // The first read cuts the first frame (no wish yet) and the ping cuts the one after it.
    assert.equal(asked.length, 42, `${asked.length} pieces for 40 frames`);
    assert.equal(asked.filter((n) => n === fallback).length, 38);
    // Without wishes every frame is cut in two.
    assert.equal(readAsked(bytes, fallback, false).length, 80);
  });
});
