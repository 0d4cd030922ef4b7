import { describe, it } from "node:test";
import assert from "node:assert/strict";
import {
  generateToken,
  hashToken,
  isTokenHash,
  MIN_TOKEN_LENGTH,
  TOKEN_HASH_PREFIX,
} from "./token_hash.ts";

describe("token hashes", () => {
  it("hash a token to sha256: and the hex SHA-256 of its UTF-8 bytes", () => {
    // FIPS 180-2's test vector for "abc".
    assert.equal(
      hashToken("abc"),
      "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad",
    );
    // "é" is hashed as its two UTF-8 bytes (c3 a9), not as one Latin-1 byte.
    assert.equal(
      hashToken("\u00e9"),
      "sha256:4a99557e4033c3539de2eb65472017cad5f9557f7a0625a09f1c3f6e2ba69c4c",
    );
    assert.notEqual(hashToken("abc"), hashToken("abd"));
  });

  it("recognise the stored form only: the prefix and exactly 64 lowercase hex digits", () => {
    const hex = "0123456789abcdef".repeat(4);
    assert.equal(TOKEN_HASH_PREFIX, "sha256:");
    assert.ok(isTokenHash(`sha256:${hex}`));
    assert.ok(isTokenHash(hashToken("any token")));
    for (
      const text of [
        hex,
        `sha256:${hex.slice(1)}`,
        `sha256:${hex}0`,
        `sha256:${hex.toUpperCase()}`,
        `SHA256:${hex}`,
        `sha512:${hex}`,
        `sha256:${hex.slice(1)}g`,
        ` sha256:${hex}`,
        `sha256:${hex}\n`,
        "",
      ]
    ) {
      assert.equal(isTokenHash(text), false, JSON.stringify(text));
    }
  });

  it("generate fresh tmx_ tokens of 256 random bits in base64url, long enough for config", () => {
    const tokens = Array.from({ length: 20 }, () => generateToken());
    assert.equal(new Set(tokens).size, tokens.length);
    for (const token of tokens) {
      assert.match(token, /^tmx_[A-Za-z0-9_-]{43}$/);
      assert.equal(Buffer.from(token.slice(4), "base64url").length, 32);
      assert.ok(token.length >= MIN_TOKEN_LENGTH);
      assert.ok(isTokenHash(hashToken(token)));
    }
  });
});
