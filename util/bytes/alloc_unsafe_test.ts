import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { allocUnsafe, SLAB_CUT_MAX } from "./alloc_unsafe.ts";

describe("allocUnsafe", () => {
  it("never hands out the same bytes twice, small or large", () => {
    const arrays: Uint8Array[] = [];
    const sizes = [1, 7, 8, 100, 1000, SLAB_CUT_MAX, SLAB_CUT_MAX + 1, 3, 65536, 2, 4000];
    for (let round = 0; round < 20; round++) {
      for (const size of sizes) arrays.push(allocUnsafe(size));
    }
    arrays.forEach((array, i) => array.fill(i & 0xff));
    arrays.forEach((array, i) => {
      assert.equal(array.length, sizes[i % sizes.length]);
      assert.ok(array.every((byte) => byte === (i & 0xff)), `array ${i} kept its bytes`);
    });
  });

  it("gives zero bytes for size 0", () => {
    assert.equal(allocUnsafe(0).length, 0);
  });
});
