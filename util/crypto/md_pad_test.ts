import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { mdPad } from "./md_pad.ts";

describe("mdPad", () => {
  it("fills whole blocks with the bytes, a 1 bit, zeros and the bit length", () => {
    for (const length of [0, 1, 55, 56, 63, 64, 119, 120, 200]) {
      const { padded, view } = mdPad(new Uint8Array(length).fill(0xab));
      assert.equal(padded.length % 64, 0, `${length}`);
      assert.ok(padded.length >= length + 9 && padded.length < length + 9 + 64);
      assert.ok(padded.subarray(0, length).every((b) => b === 0xab));
      assert.equal(padded[length], 0x80);
      assert.equal(view.getUint32(padded.length - 4), length * 8);
      assert.equal(view.getUint32(padded.length - 8), 0);
    }
  });
});
