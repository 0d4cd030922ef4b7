import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { constantTimeEqual } from "./constant_time.ts";

describe("constantTimeEqual", () => {
  it("is true only for the same bytes", () => {
    const a = Uint8Array.from([1, 2, 3, 4]);
    assert.equal(constantTimeEqual(a, Uint8Array.from([1, 2, 3, 4])), true);
    assert.equal(constantTimeEqual(new Uint8Array(0), new Uint8Array(0)), true);
    for (let i = 0; i < a.length; i++) {
      const b = a.slice();
      b[i] ^= 0x80;
      assert.equal(constantTimeEqual(a, b), false, `byte ${i}`);
    }
    assert.equal(constantTimeEqual(a, a.subarray(0, 3)), false);
  });
});
