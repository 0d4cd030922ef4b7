import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { Buffer } from "node:buffer";
import { timingSafeEqual } from "node:crypto";
import { MAX_TOKEN_LENGTH, TokenVerifier } from "./verifier.ts";
import { generateToken, hashToken, isTokenHash } from "../config/token_hash.ts";

describe("tokens: hashing and generation", () => {
  it("hashToken gives sha256:<hex> of the UTF-8 bytes", () => {
    assert.equal(
      hashToken("abc"),
      "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad",
    );
    assert.equal(
      hashToken(""),
      "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
    );
    assert.notEqual(hashToken("é"), hashToken("e\u0301")); // no normalisation: bytes are compared
  });

  it("isTokenHash accepts only the stored form", () => {
    assert.ok(isTokenHash(hashToken("x")));
    for (
      const bad of [
        "sha256:" + "A".repeat(64),
        "sha256:" + "a".repeat(63),
        "sha256:" + "a".repeat(65),
        "sha512:" + "a".repeat(64),
        "a".repeat(64),
        "sha256:" + "g".repeat(64),
        " sha256:" + "a".repeat(64),
      ]
    ) assert.equal(isTokenHash(bad), false, bad);
  });

  it("generateToken is URL-safe, 256-bit and unique", () => {
    const seen = new Set<string>();
    for (let i = 0; i < 200; i++) {
      const token = generateToken();
      assert.match(token, /^tmx_[A-Za-z0-9_-]{43}$/);
      assert.equal(Buffer.from(token.slice(4), "base64url").length, 32);
      seen.add(token);
    }
    assert.equal(seen.size, 200);
  });
});

describe("tokens: TokenVerifier", () => {
  const tokens = {
    alice: "tok-alice-0123456789abcdef",
    bob: "tok-bob-0123456789abcdef",
    carol: "c".repeat(40),
  };
  const entries = Object.entries(tokens).map(([name, token]) => ({ name, hash: hashToken(token) }));

  const cases: [string, unknown, string | undefined][] = [
    ["first client", tokens.alice, "alice"],
    ["middle client", tokens.bob, "bob"],
    ["last client", tokens.carol, "carol"],
    ["wrong token", "tok-alice-0123456789abcdeF", undefined],
    ["prefix of a token", tokens.alice.slice(0, -1), undefined],
    ["token plus a byte", tokens.alice + "x", undefined],
    ["the stored hash itself", hashToken(tokens.alice), undefined],
    ["the hex of the hash", hashToken(tokens.alice).slice(7), undefined],
    ["empty", "", undefined],
    ["not a string", 42, undefined],
    ["undefined", undefined, undefined],
    ["oversized", "x".repeat(MAX_TOKEN_LENGTH + 1), undefined],
  ];
  const verifier = new TokenVerifier(entries);
  for (const [label, presented, expected] of cases) {
    it(`${label} → ${expected ?? "rejected"}`, () =>
      assert.equal(verifier.verify(presented), expected));
  }

  it("compares against every stored hash, with timingSafeEqual semantics (no early exit)", () => {
    const many = Array.from(
      { length: 50 },
      (_, i) => ({ name: `c${i}`, hash: hashToken(`token-${i}-padding`) }),
    );
    let calls = 0;
    const v = new TokenVerifier(many, {
      compare: (a, b) => {
        calls++;
        assert.equal(a.length, 32);
        assert.equal(b.length, 32);
        return timingSafeEqual(a, b);
      },
    });
    for (
      const [presented, expected] of [["token-0-padding", "c0"], ["token-49-padding", "c49"], [
        "nope",
        undefined,
      ]]
    ) {
      calls = 0;
      assert.equal(v.verify(presented), expected);
      assert.equal(calls, 50, `every entry compared for ${presented}`);
    }
  });

  it("replace swaps the credentials (SIGHUP reload)", () => {
    const v = new TokenVerifier(entries);
    assert.equal(v.verify(tokens.alice), "alice");
    v.replace([{ name: "alice", hash: hashToken("rotated-alice-token-000000") }, entries[1]]);
    assert.equal(v.verify(tokens.alice), undefined);
    assert.equal(v.verify("rotated-alice-token-000000"), "alice");
    assert.equal(v.verify(tokens.bob), "bob");
    assert.equal(v.verify(tokens.carol), undefined);
    assert.equal(v.size, 2);
  });

  it("a bad reload throws and keeps the old credentials", () => {
    const v = new TokenVerifier(entries);
    assert.throws(() => v.replace([entries[0], { name: "x", hash: "sha256:nothex" }]), /malformed/);
    assert.throws(() => v.replace([entries[0], { name: "x", hash: entries[0].hash }]), /duplicate/);
    assert.equal(v.verify(tokens.carol), "carol");
    assert.equal(v.size, 3);
  });

  it("an empty verifier rejects everything", () => {
    const v = new TokenVerifier([]);
    assert.equal(v.verify(tokens.alice), undefined);
    assert.equal(v.size, 0);
  });

  it("error messages never contain a token", () => {
    try {
      new TokenVerifier([{ name: "n", hash: tokens.alice }]);
      assert.fail("expected a throw");
    } catch (error) {
      assert.ok(!String(error).includes(tokens.alice));
    }
  });
});
