/**
 * The form of a client token and of its stored hash: generating a token, hashing it to the
 * `sha256:…` form that configuration and the token store keep, and recognising that form. Only
 * hashes are kept, so a leaked config or heap dump does not leak credentials; a plain SHA-256
 * (not a slow KDF) is enough because tokens are long random strings, not passwords, and config
 * validation refuses short plain tokens for that reason. Verification is `tokens/verifier.ts`.
 *
 * @example
 * ```ts
 * import { generateToken, hashToken, isTokenHash } from "./token_hash.ts";
 * console.assert(isTokenHash(hashToken(generateToken())));
 * ```
 *
 * @module
 */

import { randomBase64Url } from "../../util/crypto/random.ts";
import { sha256Hex } from "../../util/crypto/sha256.ts";

/** Prefix of a stored token hash; the rest is 64 lowercase hex digits. */
export const TOKEN_HASH_PREFIX = "sha256:";

/** The shortest plain token accepted from configuration (about 96 bits even if only hex). */
export const MIN_TOKEN_LENGTH = 24;

const HASH_PATTERN = /^sha256:[0-9a-f]{64}$/;

/** Hashes a token to its stored form `sha256:<hex>`. */
export function hashToken(token: string): string {
  return TOKEN_HASH_PREFIX + sha256Hex(token);
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
  return "tmx_" + randomBase64Url(32);
}
