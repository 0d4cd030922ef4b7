/**
 * Client tokens: hashing, generation and constant-time verification. Only SHA-256 hashes are
 * kept in memory and in config files, so a leaked config or heap dump does not leak credentials.
 * A plain SHA-256 (not a slow KDF) is enough because tokens are long random strings, not
 * passwords; config validation refuses short plain tokens for that reason.
 *
 * @module
 */

import { Buffer } from "node:buffer";
import { createHash, randomBytes, timingSafeEqual } from "node:crypto";

/** Prefix of a stored token hash; the rest is 64 lowercase hex digits. */
export const TOKEN_HASH_PREFIX = "sha256:";

/** The shortest plain token accepted from configuration (about 96 bits even if only hex). */
export const MIN_TOKEN_LENGTH = 24;

/** Longer presented tokens are refused without hashing, so a client cannot make us hash megabytes. */
export const MAX_TOKEN_LENGTH = 1024;

const HASH_PATTERN = /^sha256:[0-9a-f]{64}$/;

/** Hashes a token to its stored form `sha256:<hex>`. */
export function hashToken(token: string): string {
  return TOKEN_HASH_PREFIX + createHash("sha256").update(token, "utf8").digest("hex");
}

/**
 * Whether `secret` hashes to `hash` (a stored `sha256:` hash), compared in constant time.
 *
 * @example
 * ```ts
 * import { hashToken, tokenMatches } from "./verifier.ts";
 * console.assert(tokenMatches("a-group-key", hashToken("a-group-key")));
 * console.assert(!tokenMatches("another", hashToken("a-group-key")));
 * ```
 */
export function tokenMatches(secret: string, hash: string): boolean {
  const actual = Buffer.from(hashToken(secret));
  const expected = Buffer.from(hash);
  return actual.length === expected.length && timingSafeEqual(actual, expected);
}

/** True when `text` is a stored token hash (`sha256:` and 64 lowercase hex digits). */
export function isTokenHash(text: string): boolean {
  return HASH_PATTERN.test(text);
}

/**
 * Generates a fresh token: `tmx_` and 32 crypto-random bytes in base64url (256 bits). The prefix
 * lets secret scanners and humans recognise a leaked tunnelmux token.
 */
export function generateToken(): string {
  return "tmx_" + randomBytes(32).toString("base64url");
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
  /** The digest comparison; `timingSafeEqual` unless a test wants to count the comparisons. */
  compare?: (a: Uint8Array, b: Uint8Array) => boolean;
}

interface Stored {
  name: string;
  digest: Uint8Array;
}

/**
 * Checks presented tokens against the configured clients. Every stored digest is compared on
 * every call, with `timingSafeEqual` and no early exit, so neither the time taken nor the order
 * of clients in the config tells an attacker how close a guess was or which client it hit.
 */
export class TokenVerifier {
  #entries: Stored[] = [];
  readonly #compare: (a: Uint8Array, b: Uint8Array) => boolean;

  /** Builds a verifier; throws on malformed or duplicate hashes (config validation catches both first). */
  constructor(entries: readonly TokenEntry[], options: TokenVerifierOptions = {}) {
    this.#compare = options.compare ?? timingSafeEqual;
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
      next.push({ name, digest: Buffer.from(hash.slice(TOKEN_HASH_PREFIX.length), "hex") });
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
    const digest = createHash("sha256").update(presented, "utf8").digest();
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
