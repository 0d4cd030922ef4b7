// RFC 6455 framing (ws/frame.ts): encode/decode round trips at the length-encoding boundaries,
// masking, fragmented messages fed in pieces split anywhere, and the rule violations a peer can
// commit. Runs under `deno test -A` and `bun test`.

import assert from "node:assert/strict";
import { describe, it } from "node:test";
import {
  applyMask,
  decodeClosePayload,
  encodeClosePayload,
  encodeFrame,
  encodeFrameInPlace,
  encodeHeader,
  encodeMaskedInto,
  FrameError,
  MAX_HEADER_SIZE,
  MessageDecoder,
  Opcode,
  randomMask,
} from "./frame.ts";
import { pattern, sameBytes } from "../_test_util.ts";
import { concat } from "../../util/bytes/bytes.ts";
import { isPooled, releaseBytes, retainBytes } from "../../util/bytes/buffer_pool.ts";

/** Decodes `bytes` fed in the given piece sizes (cycled); returns what came out. */
function decode(
  bytes: Uint8Array,
  options: { masked: boolean; max?: number; pieces?: number[] },
): { opcode: number; payload: Uint8Array }[] {
  const decoder = new MessageDecoder({
    masked: options.masked,
    maxMessageSize: options.max ?? 1 << 20,
  });
  const out: { opcode: number; payload: Uint8Array }[] = [];
  const pieces = options.pieces ?? [bytes.length || 1];
  let at = 0;
  for (let i = 0; at < bytes.length; i++) {
    const n = pieces[i % pieces.length];
    // Fresh copies: the decoder may keep views, and must not depend on chunk memory lasting.
    decoder.push(bytes.slice(at, at + n), (opcode, payload) => out.push({ opcode, payload }));
    at += n;
  }
  return out;
}

/** A deterministic pseudo-random generator, so failures reproduce. */
function lcg(seed: number): () => number {
  let s = seed >>> 0;
  return () => (s = (Math.imul(s, 1664525) + 1013904223) >>> 0) / 0x1_0000_0000;
}

const BOUNDARIES = [0, 1, 125, 126, 127, 65535, 65536, 70000];

describe("ws/frame: encodeFrame", () => {
  it("uses the 7-, 16- and 64-bit length forms at the RFC boundaries", () => {
    const headerSize = (n: number) => encodeFrame(Opcode.Binary, new Uint8Array(n)).length - n;
    assert.deepEqual(BOUNDARIES.map(headerSize), [2, 2, 2, 4, 4, 4, 10, 10]);
    const f125 = encodeFrame(Opcode.Binary, new Uint8Array(125));
    assert.deepEqual([f125[0], f125[1]], [0x82, 125]);
    const f126 = encodeFrame(Opcode.Binary, new Uint8Array(126));
    assert.deepEqual([...f126.subarray(0, 4)], [0x82, 126, 0, 126]);
    const f65535 = encodeFrame(Opcode.Binary, new Uint8Array(65535));
    assert.deepEqual([...f65535.subarray(0, 4)], [0x82, 126, 0xff, 0xff]);
    const f65536 = encodeFrame(Opcode.Binary, new Uint8Array(65536));
    assert.deepEqual([...f65536.subarray(0, 10)], [0x82, 127, 0, 0, 0, 0, 0, 1, 0, 0]);
  });

  it("masks with the key after the length and leaves the input untouched", () => {
    const payload = pattern(1000, 5);
    const before = payload.slice();
    const mask = new Uint8Array([0x12, 0x34, 0x56, 0x78]);
    const frame = encodeFrame(Opcode.Binary, payload, mask);
    assert.equal(frame[1] & 0x80, 0x80, "mask bit");
    assert.deepEqual([...frame.subarray(4, 8)], [...mask]);
    for (let i = 0; i < payload.length; i++) assert.equal(frame[8 + i], payload[i] ^ mask[i % 4]);
    assert.ok(sameBytes(payload, before), "input changed");
  });

  it("applyMask is its own inverse, aligned or not, at every tail length", () => {
    const mask = randomMask();
    // Past 300 bytes: a few turns of the word loop (16 words of 4 or 8 bytes) and every tail.
    for (let n = 0; n < 300; n++) {
      for (const offset of [0, 1, 2, 3, 4, 5, 6, 7]) {
        const data = pattern(n + offset, n).subarray(offset);
        const copy = data.slice();
        applyMask(data, mask);
        for (let i = 0; i < n; i++) assert.equal(data[i], copy[i] ^ mask[i % 4]);
        applyMask(data, mask);
        assert.ok(sameBytes(data, copy), `n=${n} offset=${offset}`);
      }
    }
  });

  it("gives every frame a fresh random key", () => {
    const keys = new Set<string>();
    for (let i = 0; i < 3000; i++) keys.add(randomMask().join(","));
    // 3000 draws from 2^32: a repeat is possible but vanishingly rare; a stuck pool repeats all.
    assert.ok(keys.size >= 2999, `only ${keys.size} distinct keys`);
  });
});

describe("ws/frame: MessageDecoder", () => {
  it("round-trips every length boundary, masked and unmasked, whole and byte by byte", () => {
    for (const n of BOUNDARIES) {
      const payload = pattern(n, n);
      for (const masked of [false, true]) {
        const frame = encodeFrame(Opcode.Binary, payload, masked ? randomMask() : undefined);
        for (const pieces of [undefined, [1], [3, 7, 1]]) {
          if (pieces?.[0] === 1 && n > 70000) continue;
          const out = decode(frame, { masked, pieces });
          assert.equal(out.length, 1, `n=${n} masked=${masked}`);
          assert.equal(out[0].opcode, Opcode.Binary);
          assert.ok(sameBytes(out[0].payload, payload), `n=${n} masked=${masked} ${pieces}`);
        }
      }
    }
  });

  it("reassembles fragmented messages, with control frames between, split at random bytes", () => {
    const random = lcg(7);
    for (let round = 0; round < 50; round++) {
      const frames: Uint8Array[] = [];
      const expected: { opcode: number; payload: Uint8Array }[] = [];
      for (let m = 0; m < 4; m++) {
        const parts = 1 + Math.floor(random() * 5);
        const whole: Uint8Array[] = [];
        for (let p = 0; p < parts; p++) {
          const size = [0, 1, 125, 126, 300, 65536][Math.floor(random() * 6)];
          const part = pattern(size, round * 31 + m * 7 + p);
          whole.push(part);
          const opcode = p === 0 ? Opcode.Binary : Opcode.Continuation;
          frames.push(encodeFrame(opcode, part, randomMask(), p === parts - 1));
          if (p < parts - 1 && random() < 0.5) {
            // A ping may sit between fragments (§5.4); it is delivered at once, in order.
            const ping = pattern(10, p);
            frames.push(encodeFrame(Opcode.Ping, ping, randomMask()));
            expected.push({ opcode: Opcode.Ping, payload: ping });
          }
        }
        expected.push({ opcode: Opcode.Binary, payload: concat(whole) });
      }
      const stream = concat(frames);
      const pieces = Array.from({ length: 8 }, () => 1 + Math.floor(random() * 9000));
      const out = decode(stream, { masked: true, pieces });
      assert.equal(out.length, expected.length, `round ${round}`);
      out.forEach((got, i) => {
        assert.equal(got.opcode, expected[i].opcode);
        assert.ok(sameBytes(got.payload, expected[i].payload), `round ${round} message ${i}`);
      });
    }
  });

  it("accepts a message exactly at the limit and refuses one byte more from the header alone", () => {
    assert.equal(
      decode(encodeFrame(2, new Uint8Array(1000)), { masked: false, max: 1000 }).length,
      1,
    );
    // Only the header of a huge frame: the decoder must refuse before any payload arrives.
    const header = encodeFrame(2, new Uint8Array(70000)).subarray(0, 10);
    assert.throws(
      () => decode(header, { masked: false, max: 1000 }),
      (e: unknown) =>
        e instanceof FrameError && e.code === 1009 && /maxMessageSize/.test(e.message),
    );
    // Fragments count together.
    const two = concat([
      encodeFrame(2, new Uint8Array(600), undefined, false),
      encodeFrame(0, new Uint8Array(600)).subarray(0, 4),
    ]);
    assert.throws(
      () => decode(two, { masked: false, max: 1000 }),
      (e: unknown) => e instanceof FrameError && e.code === 1009,
    );
  });

  it("refuses frames that break the rules with 1002", () => {
    const bad: [string, Uint8Array, boolean][] = [
      ["masked server frame", encodeFrame(2, new Uint8Array(3), randomMask()), false],
      ["unmasked client frame", encodeFrame(2, new Uint8Array(3)), true],
      ["reserved bit", Uint8Array.of(0xc2, 0), false],
      ["unknown data opcode", Uint8Array.of(0x83, 0), false],
      ["unknown control opcode", Uint8Array.of(0x8b, 0), false],
      ["fragmented control frame", Uint8Array.of(0x09, 0), false],
      ["control frame above 125 bytes", encodeFrame(9, new Uint8Array(126)), false],
      ["continuation without a message", encodeFrame(0, new Uint8Array(1)), false],
      [
        "new message inside a fragmented one",
        concat([
          encodeFrame(2, new Uint8Array(1), undefined, false),
          encodeFrame(2, new Uint8Array(1)),
        ]),
        false,
      ],
      [
        "64-bit length with the top bit",
        Uint8Array.of(0x82, 127, 0x80, 0, 0, 0, 0, 0, 0, 1),
        false,
      ],
    ];
    for (const [what, bytes, masked] of bad) {
      assert.throws(
        () => decode(bytes, { masked }),
        (e: unknown) => e instanceof FrameError && e.code === 1002,
        what,
      );
    }
  });

  it("is spent after an error: later input is ignored", () => {
    const decoder = new MessageDecoder({ masked: false, maxMessageSize: 100 });
    const seen: number[] = [];
    assert.throws(() => decoder.push(Uint8Array.of(0xc2, 0), (op) => seen.push(op)), FrameError);
    decoder.push(encodeFrame(2, new Uint8Array(1)), (op) => seen.push(op));
    assert.deepEqual(seen, []);
  });
});

describe("ws/frame: close payloads", () => {
  it("round-trips code and reason; empty means 1005; bad codes and 1 byte are protocol errors", () => {
    assert.deepEqual(decodeClosePayload(encodeClosePayload(1000, "bye")), {
      code: 1000,
      reason: "bye",
    });
    assert.deepEqual(decodeClosePayload(new Uint8Array(0)), { code: 1005, reason: "" });
    for (const payload of [Uint8Array.of(3), encodeClosePayload(1005), encodeClosePayload(999)]) {
      assert.throws(() => decodeClosePayload(payload), FrameError);
    }
  });

  it("cuts a long reason to 123 bytes without splitting a UTF-8 character", () => {
    const payload = encodeClosePayload(1011, "é".repeat(100));
    assert.ok(payload.length <= 125);
    const { reason } = decodeClosePayload(payload);
    assert.equal(reason, "é".repeat(61));
  });
});

describe("ws/frame: encodeFrameInPlace", () => {
  it("writes the same bytes as encodeFrame, framing the payload where it lies", () => {
    for (const n of [0, 1, 125, 126, 65535, 65536, 70000]) {
      for (const mask of [undefined, new Uint8Array([1, 2, 3, 250])]) {
        const payload = new Uint8Array(n).map((_, i) => (i * 7) & 0xff);
        const expected = encodeFrame(2, payload, mask);
        const buffer = new Uint8Array(MAX_HEADER_SIZE + 2 + n);
        const room = buffer.subarray(MAX_HEADER_SIZE + 2);
        room.set(payload);
        const frame = encodeFrameInPlace(2, room, mask);
        assert.deepEqual(frame, expected, `n=${n} mask=${mask !== undefined}`);
        assert.equal(frame.buffer, buffer.buffer, "no copy");
      }
    }
  });

  it("refuses a payload without room in front for its header", () => {
    const buffer = new Uint8Array(100);
    assert.throws(() => encodeFrameInPlace(2, buffer.subarray(5), new Uint8Array(4)), RangeError);
    assert.equal(encodeFrameInPlace(2, buffer.subarray(6), new Uint8Array(4)).length, 100);
  });
});

describe("ws/frame: frames around a payload that is not ours to change", () => {
  it("encodeMaskedInto writes encodeFrame's bytes, wherever payload and buffer lie", () => {
    const mask = new Uint8Array([1, 2, 3, 250]);
    for (const n of [0, 31, 32, 125, 126, 1000, 65535, 65536, 70000]) {
      for (let from = 0; from < 8; from++) {
        for (const to of [0, 1, 3, 6]) {
          const source = new Uint8Array(from + n);
          const payload = source.subarray(from);
          payload.set(pattern(n, n + from));
          const expected = encodeFrame(2, payload, mask);
          const into = new Uint8Array(to + n + MAX_HEADER_SIZE + 7).subarray(to);
          const frame = encodeMaskedInto(2, payload, mask, into);
          const where = `n=${n} payload at ${from} buffer at ${to}`;
          assert.ok(sameBytes(frame, expected), where);
          assert.equal(frame.buffer, into.buffer, `no buffer of its own: ${where}`);
          assert.ok(sameBytes(payload, pattern(n, n + from)), `payload unchanged: ${where}`);
          // The copy lies as the payload does, so both take whole words.
          const copyAt = frame.byteOffset + frame.length - n;
          assert.equal(copyAt % 8, payload.byteOffset % 8, where);
        }
      }
    }
  });

  it("encodeMaskedInto with a prefix writes encodeFrame's bytes for prefix and payload joined", () => {
    const mask = new Uint8Array([9, 200, 33, 4]);
    for (const p of [1, 3, 4, 12, 37]) {
      for (const n of [0, 31, 32, 1000, 70000]) {
        for (let from = 0; from < 8; from += 3) {
          const prefix = pattern(p, p);
          const source = new Uint8Array(from + n);
          const payload = source.subarray(from);
          payload.set(pattern(n, n + 1));
          const expected = encodeFrame(2, concat([prefix, payload]), mask);
          const into = new Uint8Array(p + n + MAX_HEADER_SIZE + 7);
          const frame = encodeMaskedInto(2, payload, mask, into, prefix);
          const where = `prefix ${p} n=${n} payload at ${from}`;
          assert.ok(sameBytes(frame, expected), where);
          assert.ok(sameBytes(prefix, pattern(p, p)), `prefix unchanged: ${where}`);
          assert.ok(sameBytes(payload, pattern(n, n + 1)), `payload unchanged: ${where}`);
          const copyAt = frame.byteOffset + frame.length - n;
          assert.equal(copyAt % 8, payload.byteOffset % 8, where);
        }
      }
    }
  });

  it("encodeHeader is encodeFrame's header for an unmasked payload", () => {
    for (const n of [0, 1, 125, 126, 65535, 65536, 70000]) {
      const payload = pattern(n, 3);
      assert.ok(
        sameBytes(concat([encodeHeader(2, n), payload]), encodeFrame(2, payload)),
        `n=${n}`,
      );
    }
  });
});

describe("ws/frame: MessageDecoder in pooled mode", () => {
  it("unmasks a frame where it lies in the chunk it owns", () => {
    const payload = pattern(3000, 4);
    const chunk = encodeFrame(Opcode.Binary, payload, randomMask());
    const decoder = new MessageDecoder({ masked: true, maxMessageSize: 1 << 20, pooled: true });
    let got: Uint8Array | undefined;
    decoder.push(chunk, (_opcode, p) => got = p);
    assert.ok(got && sameBytes(got, payload));
    assert.equal(got.buffer, chunk.buffer, "a view of the chunk, not a copy");
  });

  it("gathers a frame split across chunks in a pooled buffer that returns unless claimed", () => {
    const payload = pattern(40_000, 5);
    const frame = encodeFrame(Opcode.Binary, payload, randomMask());
    for (const keep of [false, true]) {
      const decoder = new MessageDecoder({ masked: true, maxMessageSize: 1 << 20, pooled: true });
      let got: Uint8Array | undefined;
      let pooledInCall = false;
      let intact = false;
      decoder.push(frame.slice(0, 20_000), () => assert.fail("not complete yet"));
      decoder.push(frame.slice(20_000), (_opcode, p) => {
        got = p;
        pooledInCall = isPooled(p);
        intact = sameBytes(p, payload);
        if (keep) retainBytes(p);
      });
      assert.ok(got && intact);
      assert.ok(pooledInCall, "gathered in a pooled buffer");
      assert.equal(isPooled(got), keep, keep ? "kept by the callee's claim" : "back in the pool");
      if (keep) releaseBytes(got);
    }
  });

  it("joins a fragmented message whose pieces were gathered, each piece claimed until joined", () => {
    const payload = pattern(30_000, 6);
    const frames = concat([
      encodeFrame(Opcode.Binary, payload.subarray(0, 10_000), randomMask(), false),
      encodeFrame(Opcode.Continuation, payload.subarray(10_000), randomMask()),
    ]);
    const decoder = new MessageDecoder({ masked: true, maxMessageSize: 1 << 20, pooled: true });
    const got: Uint8Array[] = [];
    for (let at = 0; at < frames.length; at += 7_000) {
      decoder.push(frames.slice(at, at + 7_000), (_opcode, p) => got.push(p.slice()));
    }
    assert.equal(got.length, 1);
    assert.ok(sameBytes(got[0], payload));
  });
});

describe("ws/frame: MessageDecoder.readLimit", () => {
  const CAPACITY = 66_000;

  it("asks for the rest of a frame and one more as large, after a large data frame only", () => {
    const decoder = new MessageDecoder({ masked: false, maxMessageSize: 1 << 20 });
    const ignore = () => {};
    assert.equal(decoder.readLimit(CAPACITY), 0, "nothing seen yet");
    decoder.push(encodeFrame(Opcode.Binary, new Uint8Array(100)), ignore);
    assert.equal(decoder.readLimit(CAPACITY), 0, "after a small frame");
    const large = encodeFrame(Opcode.Binary, new Uint8Array(20_000)); // a 4-byte header
    decoder.push(large, ignore);
    assert.equal(decoder.readLimit(CAPACITY), 20_004);
    decoder.push(encodeFrame(Opcode.Ping, new Uint8Array(4)), ignore);
    assert.equal(decoder.readLimit(CAPACITY), 20_004, "a ping between says nothing");
    decoder.push(large.subarray(0, 3), ignore);
    assert.equal(decoder.readLimit(CAPACITY), 0, "mid-header");
    decoder.push(large.subarray(3, 1_004), ignore);
    assert.equal(decoder.readLimit(CAPACITY), 19_000 + 20_004, "its rest too");
    assert.equal(decoder.readLimit(30_000), 30_000, "never more than the capacity");
  });

  it("reads it sizes hand large messages over as views of the read, not gathered", () => {
    const payload = pattern(65_536, 3);
    const message = encodeFrame(Opcode.Binary, payload, randomMask());
    const bytes = concat(Array(12).fill(message));
    for (const wishes of [true, false]) {
      const decoder = new MessageDecoder({ masked: true, maxMessageSize: 1 << 20, pooled: true });
      let gathered = 0;
      let count = 0;
      for (let at = 0; at < bytes.length;) {
        const n = Math.min((wishes ? decoder.readLimit(CAPACITY) : 0) || 65_504, bytes.length - at);
        const read = bytes.slice(at, at + n);
        decoder.push(read, (_opcode, p) => {
          count++;
          assert.ok(sameBytes(p, payload));
          if (p.buffer !== read.buffer) gathered++;
        });
        at += n;
      }
      assert.equal(count, 12);
      // The first message comes before any wish; without wishes every one is cut.
      assert.equal(gathered, wishes ? 1 : 12);
    }
  });
});
