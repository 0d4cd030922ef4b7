/**
 * Fresh byte arrays that skip what can be skipped: on Bun and Node, `Buffer.allocUnsafe` (no zero
 * fill, small sizes cut from a shared slab); on Deno, the same slab scheme over plain
 * `Uint8Array`s. Deno's `Buffer` would load its Node compatibility layer (milliseconds of every
 * start), and its `allocUnsafe` zero-fills large sizes all the same, as JavaScript must. A slab
 * never hands a region out twice, so a caller owns its array outright; a slab is collected once
 * every array cut from it is.
 *
 * @example
 * ```ts
 * import { allocUnsafe } from "./alloc_unsafe.ts";
 * const a = allocUnsafe(100);
 * const b = allocUnsafe(100);
 * a.fill(1);
 * b.fill(2);
 * console.assert(a.length === 100 && a[99] === 1 && b[0] === 2);
 * ```
 *
 * @module
 */

/** Arrays up to this size come from a shared slab (as `Buffer.poolSize >>> 1` does on Node). */
export const SLAB_CUT_MAX = 4 * 1024;

const SLAB_SIZE = 2 * SLAB_CUT_MAX;

type AllocUnsafe = (size: number) => Uint8Array;

const nodeBuffer = (globalThis as { Deno?: unknown }).Deno === undefined
  ? (globalThis as { Buffer?: { allocUnsafe: AllocUnsafe } }).Buffer
  : undefined;

let slab = new Uint8Array(0);
let used = 0;

/** A slab cut of `size` bytes, or a new array when larger than {@linkcode SLAB_CUT_MAX}. */
function fromSlab(size: number): Uint8Array {
  if (size > SLAB_CUT_MAX) return new Uint8Array(size);
  if (used + size > slab.length) {
    slab = new Uint8Array(SLAB_SIZE);
    used = 0;
  }
  const cut = slab.subarray(used, used + size);
  // Eight-byte alignment keeps any later typed view over a cut aligned, as Node's pool does.
  used += (size + 7) & ~7;
  return cut;
}

/** A new array of `size` bytes whose contents are unspecified: write every byte you read. */
export const allocUnsafe: AllocUnsafe = nodeBuffer
  ? (size) => nodeBuffer.allocUnsafe(size)
  : fromSlab;
