import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { randomBase64Url, randomBytes, randomHex, randomUint32 } from "./random.ts";

describe("random", () => {
  it("gives the asked sizes in their alphabets, and differs between calls", () => {
    assert.equal(randomBytes(16).length, 16);
    assert.match(randomHex(8), /^[0-9a-f]{16}$/);
    for (let i = 0; i < 20; i++) assert.match(randomBase64Url(32), /^[A-Za-z0-9_-]{43}$/);
    assert.notEqual(randomHex(16), randomHex(16));
    const n = randomUint32();
    assert.ok(Number.isInteger(n) && n >= 0 && n < 2 ** 32);
  });
});
