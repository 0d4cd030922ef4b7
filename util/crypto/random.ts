/**
 * Random identifiers and secrets from the platform's cryptographic generator (Web Crypto's
 * `getRandomValues`, present on Deno, Bun and Node without an import; `node:crypto` would cost
 * Deno's start its Node compatibility layer).
 *
 * @example
 * ```ts
 * import { randomBase64Url, randomHex, randomUint32 } from "./random.ts";
 * console.assert(/^[0-9a-f]{12}$/.test(randomHex(6)));
 * console.assert(randomBase64Url(32).length === 43);
 * console.assert(Number.isInteger(randomUint32()));
 * ```
 *
 * @module
 */

import { toBase64Url } from "../bytes/base64.ts";
import { toHex } from "./sha256.ts";

/** `count` random bytes. */
export function randomBytes(count: number): Uint8Array {
  return crypto.getRandomValues(new Uint8Array(count));
}

/** `count` random bytes as lower-case hex (2 × `count` digits). */
export function randomHex(count: number): string {
  return toHex(randomBytes(count));
}

/** `count` random bytes in unpadded base64url (RFC 4648 §5). */
export function randomBase64Url(count: number): string {
  return toBase64Url(randomBytes(count));
}

/** A random integer from 0 to 2³² − 1. */
export function randomUint32(): number {
  return crypto.getRandomValues(new Uint32Array(1))[0];
}
