/**
 * Byte helpers shared by tools and tests: joining chunks, a deterministic pattern (so corrupted,
 * reordered or crossed data shows up as a mismatch), and comparison.
 *
 * @example
 * ```ts
 * import { concat, pattern, sameBytes } from "./bytes.ts";
 * const data = pattern(1000, 7);
 * console.assert(sameBytes(concat([data.subarray(0, 10), data.subarray(10)]), data));
 * ```
 *
 * @module
 */

/** Joins chunks into one fresh buffer. */
export function concat(chunks: readonly Uint8Array[]): Uint8Array<ArrayBuffer> {
  let size = 0;
  for (const chunk of chunks) size += chunk.length;
  const out = new Uint8Array(size);
  let offset = 0;
  for (const chunk of chunks) {
    out.set(chunk, offset);
    offset += chunk.length;
  }
  return out;
}

/**
 * `size` deterministic pseudo-random bytes from `seed` (a linear congruential generator: fast,
 * and different seeds give unrelated sequences, so crossed streams are caught).
 */
export function pattern(size: number, seed = 1): Uint8Array {
  const out = new Uint8Array(size);
  let state = seed >>> 0;
  for (let i = 0; i < size; i++) {
    state = (Math.imul(state, 1664525) + 1013904223) >>> 0;
    out[i] = state >>> 24;
  }
  return out;
}

/** True when both hold the same bytes. */
export function sameBytes(actual: Uint8Array, expected: Uint8Array): boolean {
  if (actual.length !== expected.length) return false;
  for (let i = 0; i < actual.length; i++) if (actual[i] !== expected[i]) return false;
  return true;
}
