/**
 * How two nodes prove to each other that they hold the cluster key, without sending it: each side
 * sends a fresh nonce, and each answers with an HMAC-SHA256 over both nonces, both node names and
 * its role, under the key. The roles keep one side's proof from being replayed as the other's;
 * the nonces keep an old proof from being replayed in a new handshake. Compared in constant time.
 *
 * While the cluster rolls over to a new key, a node holds several (`cluster.key` and
 * `cluster.previousKeys`): it sends a proof under each ({@linkcode peerProofs}), and takes a peer
 * whose proofs include one under any key it holds ({@linkcode anyProofMatches}), so two nodes
 * sharing one key interoperate, whichever each signs with first.
 *
 * @example
 * ```ts
 * import { peerProof, proofMatches } from "./peer_auth.ts";
 * const key = "a-shared-cluster-key-of-24+chars";
 * const facts = { dialer: "a", acceptor: "b", dialerNonce: "n1", acceptorNonce: "n2" };
 * const proof = peerProof(key, "acceptor", facts);
 * console.assert(proofMatches(proof, peerProof(key, "acceptor", facts)));
 * console.assert(!proofMatches(proof, peerProof(key, "dialer", facts)));
 * ```
 *
 * @module
 */

import { Buffer } from "node:buffer";
import { createHmac, randomBytes, timingSafeEqual } from "node:crypto";

/** What both proofs cover. */
export interface HandshakeFacts {
  /** The dialing node's name. */
  dialer: string;
  /** The accepting node's name. */
  acceptor: string;
  /** The dialer's nonce (hex). */
  dialerNonce: string;
  /** The acceptor's nonce (hex). */
  acceptorNonce: string;
}

/** A fresh random nonce, hex. */
export function newNonce(): string {
  return randomBytes(32).toString("hex");
}

/** The proof `role` sends: HMAC-SHA256 under `key` of the role and the facts, hex. */
export function peerProof(key: string, role: "dialer" | "acceptor", facts: HandshakeFacts): string {
  return createHmac("sha256", key)
    .update(
      [
        "tunnelmux-peer-v1",
        role,
        facts.dialer,
        facts.acceptor,
        facts.dialerNonce,
        facts.acceptorNonce,
      ].join("\n"),
    )
    .digest("hex");
}

/** Whether a received proof equals the expected one (constant time; any non-string is false). */
export function proofMatches(received: unknown, expected: string): boolean {
  if (typeof received !== "string" || received.length !== expected.length) return false;
  return timingSafeEqual(Buffer.from(received), Buffer.from(expected));
}

/** Proofs under each of `keys`, in their order (the first is what a single-key peer checks). */
export function peerProofs(
  keys: readonly string[],
  role: "dialer" | "acceptor",
  facts: HandshakeFacts,
): string[] {
  return keys.map((key) => peerProof(key, role, facts));
}

/**
 * Whether any received proof equals any expected one: every pair is compared, each in constant
 * time, so the time taken does not tell which matched.
 */
export function anyProofMatches(
  received: readonly unknown[],
  expected: readonly string[],
): boolean {
  let matched = false;
  for (const proof of received) {
    for (const wanted of expected) matched = proofMatches(proof, wanted) || matched;
  }
  return matched;
}
