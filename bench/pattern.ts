/**
 * Benchmark payloads: a seeded pseudo-random block of 1 MiB + 13 bytes (an odd length, so stream
 * offsets never line up with chunk boundaries), sent as read-only views and verified as they come
 * back. Nothing is allocated per byte, so a 256 MiB stream costs no 256 MiB buffer.
 *
 * @module
 */

import { Buffer } from "node:buffer";
import { prng } from "../util/crypto/prng.ts";

/** Length of the pattern block. */
export const BLOCK_LENGTH = 1024 * 1024 + 13;

let block: Uint8Array | undefined;

/** The shared pattern block. Never written after creation, so views of it may be sent as-is. */
export function patternBlock(): Uint8Array {
  if (!block) {
    const random = prng(1);
    block = new Uint8Array(BLOCK_LENGTH);
    for (let i = 0; i < BLOCK_LENGTH; i++) block[i] = Math.floor(random() * 256);
  }
  return block;
}

/**
 * The next piece of the stream that starts at block offset `base`, from stream position `at`: at
 * most `max` bytes, shorter where the block wraps.
 */
export function segment(base: number, at: number, max: number): Uint8Array {
  const data = patternBlock();
  const start = (base + at) % BLOCK_LENGTH;
  return data.subarray(start, Math.min(start + max, BLOCK_LENGTH));
}

/**
 * Checks `chunk` against the stream that starts at block offset `base`, at stream position `at`.
 * Uses `Buffer.equals` (a native memcmp) so verification stays cheap next to the transfer.
 */
export function verify(base: number, at: number, chunk: Uint8Array): boolean {
  let done = 0;
  while (done < chunk.length) {
    const expected = segment(base, at + done, chunk.length - done);
    const got = chunk.subarray(done, done + expected.length);
    const a = Buffer.from(got.buffer, got.byteOffset, got.length);
    const b = Buffer.from(expected.buffer, expected.byteOffset, expected.length);
    if (!a.equals(b)) return false;
    done += expected.length;
  }
  return true;
}
