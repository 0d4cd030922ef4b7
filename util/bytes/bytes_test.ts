import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { concat, pattern, sameBytes } from "./bytes.ts";

describe("bytes", () => {
  it("concat joins in order, empty chunks included", () => {
    const out = concat([new Uint8Array([1, 2]), new Uint8Array(0), new Uint8Array([3])]);
    assert.deepEqual([...out], [1, 2, 3]);
    assert.equal(concat([]).length, 0);
  });
  it("pattern is deterministic per seed and differs across seeds", () => {
    assert.ok(sameBytes(pattern(4096, 5), pattern(4096, 5)));
    assert.ok(!sameBytes(pattern(4096, 5), pattern(4096, 6)));
    assert.ok(new Set(pattern(4096, 1)).size > 200, "spread over the byte values");
  });
  it("sameBytes compares length and content", () => {
    assert.ok(sameBytes(new Uint8Array([1, 2]), new Uint8Array([1, 2])));
    assert.ok(!sameBytes(new Uint8Array([1, 2]), new Uint8Array([1])));
    assert.ok(!sameBytes(new Uint8Array([1, 2]), new Uint8Array([1, 3])));
  });
});
