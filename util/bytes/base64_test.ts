import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { Buffer } from "node:buffer";
import { fromBase64, fromBase64Url, toBase64, toBase64Url } from "./base64.ts";
import { prng } from "../crypto/prng.ts";

describe("base64", () => {
  it("agrees with Buffer both ways, for every length up to 100 and a large input", () => {
    const next = prng(3);
    for (const length of [...Array(101).keys(), 100_000]) {
      const bytes = Uint8Array.from({ length }, () => Math.floor(next() * 256));
      const b64 = Buffer.from(bytes).toString("base64");
      const url = Buffer.from(bytes).toString("base64url");
      assert.equal(toBase64(bytes), b64);
      assert.equal(toBase64Url(bytes), url);
      assert.deepEqual(fromBase64(b64), bytes);
      assert.deepEqual(fromBase64Url(url), bytes);
    }
  });

  it("refuses what is not in the alphabet", () => {
    assert.throws(() => fromBase64Url("ab+c"));
    assert.throws(() => fromBase64("ab$c"));
  });
});
