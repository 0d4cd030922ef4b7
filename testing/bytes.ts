/**
 * Test support: bytes to send and checks of what arrived. The generators are util/bytes/bytes.ts's
 * (tools use them too); {@linkcode assertSameBytes} fails naming the first difference instead of
 * printing megabytes.
 *
 * @module
 */

import { Buffer } from "node:buffer";

export { concat, pattern, sameBytes } from "../util/bytes/bytes.ts";

/** Throws if `actual` differs from `expected`, naming the length or the first differing byte. */
export function assertSameBytes(actual: Uint8Array, expected: Uint8Array, what = "bytes"): void {
  if (actual.length !== expected.length) {
    throw new Error(`${what}: got ${actual.length} bytes, expected ${expected.length}`);
  }
  if (
    Buffer.from(actual.buffer, actual.byteOffset, actual.length).equals(
      Buffer.from(expected.buffer, expected.byteOffset, expected.length),
    )
  ) return;
  for (let i = 0; i < actual.length; i++) {
    if (actual[i] !== expected[i]) throw new Error(`${what}: byte ${i} differs`);
  }
}
