/**
 * Client tokens checked in constant time against their stored hashes (`config/token_hash.ts`
 * makes and recognises those).
 *
 * @module
 */

import { constantTimeEqual } from "../../util/crypto/constant_time.ts";
import { sha256 } from "../../util/crypto/sha256.ts";
import { hashToken, isTokenHash, TOKEN_HASH_PREFIX } from "../config/token_hash.ts";

/** Longer presented tokens are refused without hashing, so a client cannot make us hash megabytes. */
export const MAX_TOKEN_LENGTH = 1024;

/**
 * Whether `secret` hashes to `hash` (a stored `sha256:` hash), compared in constant time.
 *
 * @example
 * ```ts
 * import { hashToken } from "../config/token_hash.ts";
 * import { tokenMatches } from "./verifier.ts";
 * console.assert(tokenMatches("a-group-key", hashToken("a-group-key")));
 * console.assert(!tokenMatches("another", hashToken("a-group-key")));
 * ```
 */
export function tokenMatches(secret: string, hash: string): boolean {
  const encoder = new TextEncoder();
  return constantTimeEqual(encoder.encode(hashToken(secret)), encoder.encode(hash));
}

/** One client's stored credential. */
export interface TokenEntry {
  /** The client name that a matching token authenticates as. */
  name: string;
  /** The stored hash, `sha256:<hex>`. */
  hash: string;
}

/** Options of a {@link TokenVerifier}. */
export interface TokenVerifierOptions {
  /** The digest comparison; `constantTimeEqual` unless a test wants to count the comparisons. */
  compare?: (a: Uint8Array, b: Uint8Array) => boolean;
}

interface Stored {
  name: string;
  digest: Uint8Array;
}

/**
 * Checks presented tokens against the configured clients. Every stored digest is compared on
 * every call, with `constantTimeEqual` and no early exit, so neither the time taken nor the order
 * of clients in the config tells an attacker how close a guess was or which client it hit.
 */
export class TokenVerifier {
  #entries: Stored[] = [];
  readonly #compare: (a: Uint8Array, b: Uint8Array) => boolean;

  /** Builds a verifier; throws on malformed or duplicate hashes (config validation catches both first). */
  constructor(entries: readonly TokenEntry[], options: TokenVerifierOptions = {}) {
    this.#compare = options.compare ?? constantTimeEqual;
    this.replace(entries);
  }

  /**
   * Swaps in a new set of credentials (SIGHUP reload) atomically: the new list is built and
   * checked completely before it replaces the old one, so a bad reload keeps the old tokens.
   */
  replace(entries: readonly TokenEntry[]): void {
    const next: Stored[] = [];
    const seen = new Set<string>();
    for (const { name, hash } of entries) {
      if (!isTokenHash(hash)) throw new Error(`client "${name}": malformed token hash`);
      if (seen.has(hash)) throw new Error(`client "${name}": duplicate token`);
      seen.add(hash);
      next.push({ name, digest: fromHex(hash.slice(TOKEN_HASH_PREFIX.length)) });
    }
    this.#entries = next;
  }

  /** How many credentials are loaded. */
  get size(): number {
    return this.#entries.length;
  }

  /** The client name the presented token belongs to, or undefined. Never logs the token. */
  verify(presented: unknown): string | undefined {
    if (typeof presented !== "string" || presented.length === 0) return undefined;
    if (presented.length > MAX_TOKEN_LENGTH) return undefined;
    const digest = sha256(presented);
    const entries = this.#entries; // one snapshot, even if replace() runs meanwhile
    let match: string | undefined;
    for (const entry of entries) {
      // Comparing every entry (no break) keeps the time independent of which one matched.
      const equal = this.#compare(digest, entry.digest);
      if (equal) match = entry.name;
    }
    return match;
  }
}

/** The bytes of an even-length hex string (already checked by `isTokenHash`). */
function fromHex(hex: string): Uint8Array {
  const bytes = new Uint8Array(hex.length / 2);
  for (let i = 0; i < bytes.length; i++) bytes[i] = parseInt(hex.slice(i * 2, i * 2 + 2), 16);
  return bytes;
}
