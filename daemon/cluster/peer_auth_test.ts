import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { anyProofMatches, newNonce, peerProof, peerProofs, proofMatches } from "./peer_auth.ts";
import { MAX_AGE_MS, openSigned, seal } from "./signed.ts";

const KEY = "cluster-key-0123456789abcdefgh";
const facts = { dialer: "a", acceptor: "b", dialerNonce: newNonce(), acceptorNonce: newNonce() };

describe("peer proofs", () => {
  it("match under the same key, role and facts", () => {
    assert.ok(proofMatches(peerProof(KEY, "dialer", facts), peerProof(KEY, "dialer", facts)));
  });
  const changes: [string, () => string][] = [
    ["another key", () => peerProof(KEY + "x", "dialer", facts)],
    ["the other role (a reflected proof)", () => peerProof(KEY, "acceptor", facts)],
    [
      "another nonce (a replay)",
      () => peerProof(KEY, "dialer", { ...facts, dialerNonce: newNonce() }),
    ],
    [
      "swapped node names",
      () => peerProof(KEY, "dialer", { ...facts, dialer: "b", acceptor: "a" }),
    ],
  ];
  for (const [what, proof] of changes) {
    it(`differ with ${what}`, () => {
      assert.equal(proofMatches(proof(), peerProof(KEY, "dialer", facts)), false);
    });
  }
  it("anything but a string of the right length is refused", () => {
    const expected = peerProof(KEY, "dialer", facts);
    for (const received of [undefined, 42, "", expected.slice(1), { toString: () => expected }]) {
      assert.equal(proofMatches(received, expected), false);
    }
  });
  it("nonces are fresh", () => assert.notEqual(newNonce(), newNonce()));
});

describe("peer proofs under several keys (a key rotation)", () => {
  const OLD = KEY;
  const NEW = "new-cluster-key-0123456789abcdef";
  const ring = (...keys: string[]) => peerProofs(keys, "dialer", facts);

  it("are one proof per key, the first under the first key", () => {
    assert.deepEqual(ring(NEW, OLD), [
      peerProof(NEW, "dialer", facts),
      peerProof(OLD, "dialer", facts),
    ]);
  });
  it("match when the two sides share any key", () => {
    assert.ok(anyProofMatches(ring(NEW, OLD), ring(OLD)));
    assert.ok(anyProofMatches(ring(OLD), ring(NEW, OLD)));
    assert.ok(anyProofMatches(ring(OLD, NEW), ring(NEW)));
  });
  it("do not match when they share none, nor in the other role", () => {
    assert.equal(anyProofMatches(ring(NEW), ring(OLD)), false);
    assert.equal(anyProofMatches(ring(OLD), ring(NEW)), false);
    assert.equal(anyProofMatches(peerProofs([NEW, OLD], "acceptor", facts), ring(NEW, OLD)), false);
    assert.equal(anyProofMatches([undefined, 7, ""], ring(OLD)), false);
    assert.equal(anyProofMatches([], ring(OLD)), false);
  });
});

describe("signed NATS messages", () => {
  it("open under the same key and subject", () => {
    assert.deepEqual(openSigned(KEY, "s", seal(KEY, "s", { a: [1] })), { a: [1] });
  });
  it("refuse another key, another subject, a changed body, garbage and old messages", () => {
    const text = seal(KEY, "s", { kick: "s1" });
    assert.equal(openSigned(KEY + "x", "s", text), undefined);
    assert.equal(openSigned(KEY, "t", text), undefined);
    const parsed = JSON.parse(text);
    assert.equal(
      openSigned(KEY, "s", JSON.stringify({ ...parsed, body: '{"kick":"s2"}' })),
      undefined,
    );
    assert.equal(openSigned(KEY, "s", "not json"), undefined);
    const old = { ...parsed, at: parsed.at - MAX_AGE_MS - 1 };
    assert.equal(openSigned(KEY, "s", JSON.stringify(old)), undefined, "a replay past its age");
  });
});
