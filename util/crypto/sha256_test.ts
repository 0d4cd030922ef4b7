import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { sha256, sha256Hex, toHex } from "./sha256.ts";
import { prng } from "./prng.ts";

describe("sha256", () => {
  it("gives the FIPS 180-4 examples' digests", () => {
    assert.equal(
      sha256Hex(""),
      "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
    );
    assert.equal(
      sha256Hex("abc"),
      "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad",
    );
    assert.equal(
      sha256Hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
      "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1",
    );
  });

  it("agrees with node:crypto on every length across block boundaries, and on UTF-8 text", () => {
    const next = prng(7);
    for (let length = 0; length <= 300; length++) {
      const bytes = Uint8Array.from({ length }, () => Math.floor(next() * 256));
      assert.equal(
        toHex(sha256(bytes)),
        createHash("sha256").update(bytes).digest("hex"),
        `${length}`,
      );
    }
    const text = "tmx_ÄÖü-ключ-🔑-" + "x".repeat(70);
    assert.equal(sha256Hex(text), createHash("sha256").update(text, "utf8").digest("hex"));
  });
});
