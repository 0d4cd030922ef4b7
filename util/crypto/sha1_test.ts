import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { sha1 } from "./sha1.ts";
import { toHex } from "./sha256.ts";
import { prng } from "./prng.ts";

describe("sha1", () => {
  it("gives the FIPS 180-4 examples' digests", () => {
    assert.equal(toHex(sha1("abc")), "a9993e364706816aba3e25717850c26c9cd0d89d");
    assert.equal(toHex(sha1("")), "da39a3ee5e6b4b0d3255bfef95601890afd80709");
    assert.equal(
      toHex(sha1("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq")),
      "84983e441c3bd26ebaae4aa1f95129e5e54670f1",
    );
  });

  it("agrees with node:crypto on every length across block boundaries", () => {
    const next = prng(11);
    for (let length = 0; length <= 300; length++) {
      const bytes = Uint8Array.from({ length }, () => Math.floor(next() * 256));
      assert.equal(toHex(sha1(bytes)), createHash("sha1").update(bytes).digest("hex"), `${length}`);
    }
  });
});
