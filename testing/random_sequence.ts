/**
 * A stand-in for `Math.random` that gives the values a test chose, in turn, so that code drawing
 * random delays can be tested at the delays the test expects.
 *
 * @example
 * ```ts
 * import { randomSequence } from "./random_sequence.ts";
 * const random = randomSequence(0.25, 0.75);
 * console.assert(random() === 0.25 && random() === 0.75);
 * ```
 *
 * @module
 */

import assert from "node:assert/strict";

/** A random source giving `values` in turn; asking for more than were given fails the test. */
export function randomSequence(...values: number[]): () => number {
  let i = 0;
  return () => {
    assert.ok(i < values.length, "no more random values than the test gives");
    return values[i++];
  };
}
