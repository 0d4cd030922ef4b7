/**
 * A tiny seedable pseudo-random generator (mulberry32), so test data, payload sizes and chunk
 * splits replay exactly from a seed. Not for anything secret.
 *
 * @module
 */

/**
 * Returns a generator of numbers in [0, 1) determined by `seed`.
 *
 * @example
 * ```ts
 * import { prng } from "./prng.ts";
 * const a = prng(7), b = prng(7);
 * console.assert(a() === b());
 * ```
 */
export function prng(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
