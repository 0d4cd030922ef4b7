/**
 * Password hashes for a tunnel's basic auth: `scrypt:N:r:p:SALT:HASH` (SALT and HASH base64url).
 * The client hashes before it sends a policy, so neither the wire, the daemon's registry nor a
 * cluster record ever holds a password; the daemon verifies in constant time. The cost
 * parameters travel in the string, bounded on both sides so a hash cannot make the daemon spend
 * more than a fixed amount of memory and time on one attempt.
 *
 * @example
 * ```ts
 * import { hashPassword, verifyPassword } from "./password_hash.ts";
 * const hash = await hashPassword("s3cret");
 * console.assert(await verifyPassword("s3cret", hash));
 * ```
 *
 * @module
 */

import { fromBase64Url, toBase64Url } from "../../util/bytes/base64.ts";
import { constantTimeEqual } from "../../util/crypto/constant_time.ts";
import { nodeBuiltin } from "../../util/host/host.ts";
import { randomBytes } from "../../util/crypto/random.ts";

/** The prefix of a password hash. */
export const PASSWORD_HASH_PREFIX = "scrypt:";

/** Cost of new hashes: N 2^15, r 8, p 1 (32 MiB, tens of ms; OWASP's scrypt floor or above). */
const DEFAULT_COST = { N: 1 << 15, r: 8, p: 1 };
/** The most memory one verification may take (scrypt needs 128 · N · r bytes). */
const MAX_MEMORY = 64 * 1024 * 1024;
const PATTERN = /^scrypt:(\d{1,8}):(\d{1,2}):(\d):([A-Za-z0-9_-]{16,64}):([A-Za-z0-9_-]{43,86})$/;

/** A parsed password hash. */
export interface PasswordHash {
  /** scrypt's CPU/memory cost, a power of two. */
  N: number;
  /** scrypt's block size. */
  r: number;
  /** scrypt's parallelism. */
  p: number;
  /** The salt. */
  salt: Uint8Array;
  /** The derived key. */
  hash: Uint8Array;
}

/** Parses `text` as a password hash; a string saying what is wrong when it is not one. */
export function parsePasswordHash(text: string): PasswordHash | string {
  const match = PATTERN.exec(text);
  if (!match) return 'must be "scrypt:N:r:p:SALT:HASH" (make one with: tunnelmux hash-password)';
  const [N, r, p] = [Number(match[1]), Number(match[2]), Number(match[3])];
  if (N < 1 << 14 || (N & (N - 1)) !== 0) return "scrypt N must be a power of two, at least 16384";
  if (r < 1 || p < 1 || p > 4) return "scrypt r must be at least 1 and p 1 to 4";
  if (128 * N * r > MAX_MEMORY) return "scrypt N·r is over the daemon's memory bound (64 MiB)";
  const hash = fromBase64Url(match[5]);
  if (hash.length < 32) return "the hash must be at least 32 bytes";
  return { N, r, p, salt: fromBase64Url(match[4]), hash };
}

// node:crypto where a hash is made or checked, not at start: on Deno it loads the Node layer.
function derive(password: string, salt: Uint8Array, length: number, cost: typeof DEFAULT_COST) {
  const { scrypt } = nodeBuiltin("node:crypto");
  return new Promise<Uint8Array>((resolve, reject) =>
    scrypt(
      password,
      salt,
      length,
      { ...cost, maxmem: MAX_MEMORY + 1024 * 1024 },
      (error, key) => error ? reject(error) : resolve(key),
    )
  );
}

/** Hashes `password` to a new `scrypt:…` string (random salt, the default cost). */
export async function hashPassword(password: string): Promise<string> {
  const salt = randomBytes(16);
  const key = await derive(password, salt, 32, DEFAULT_COST);
  const { N, r, p } = DEFAULT_COST;
  return `${PASSWORD_HASH_PREFIX}${N}:${r}:${p}:${toBase64Url(salt)}:${toBase64Url(key)}`;
}

/** As {@linkcode hashPassword}, blocking (for a command's settings, read once at start). */
export function hashPasswordSync(password: string): string {
  const salt = randomBytes(16);
  const { N, r, p } = DEFAULT_COST;
  const key = nodeBuiltin("node:crypto").scryptSync(password, salt, 32, {
    ...DEFAULT_COST,
    maxmem: MAX_MEMORY + 1024 * 1024,
  });
  return `${PASSWORD_HASH_PREFIX}${N}:${r}:${p}:${toBase64Url(salt)}:${toBase64Url(key)}`;
}

/** Whether `password` matches `hash` (a parsed hash, or its text); compared in constant time. */
export async function verifyPassword(
  password: string,
  hash: PasswordHash | string,
): Promise<boolean> {
  const parsed = typeof hash === "string" ? parsePasswordHash(hash) : hash;
  if (typeof parsed === "string") return false;
  const key = await derive(password, parsed.salt, parsed.hash.length, parsed);
  return constantTimeEqual(key, parsed.hash);
}
