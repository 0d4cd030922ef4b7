/**
 * Encoding of the 12-byte frame header. Writes go straight into a caller's buffer at an offset so
 * a whole batch of frames is assembled in one allocation; nothing here allocates.
 *
 * @module
 */

import { PROTOCOL_VERSION } from "./constants.ts";

/**
 * Writes one header into `buffer` at `offset` (big-endian, as the spec requires).
 *
 * @example
 * ```ts
 * import { writeHeader } from "./header.ts";
 * import { FrameType, Flag } from "./constants.ts";
 * const buf = new Uint8Array(12);
 * writeHeader(buf, 0, FrameType.WindowUpdate, Flag.SYN, 1, 0);
 * ```
 */
export function writeHeader(
  buffer: Uint8Array,
  offset: number,
  type: number,
  flags: number,
  streamId: number,
  length: number,
): void {
  buffer[offset] = PROTOCOL_VERSION;
  buffer[offset + 1] = type;
  buffer[offset + 2] = flags >>> 8;
  buffer[offset + 3] = flags & 0xff;
  buffer[offset + 4] = streamId >>> 24;
  buffer[offset + 5] = (streamId >>> 16) & 0xff;
  buffer[offset + 6] = (streamId >>> 8) & 0xff;
  buffer[offset + 7] = streamId & 0xff;
  buffer[offset + 8] = length >>> 24;
  buffer[offset + 9] = (length >>> 16) & 0xff;
  buffer[offset + 10] = (length >>> 8) & 0xff;
  buffer[offset + 11] = length & 0xff;
}

/** Reads a big-endian unsigned 32-bit number at `offset`. */
export function readUint32(buffer: Uint8Array, offset: number): number {
  return (
    buffer[offset] * 0x1000000 +
    ((buffer[offset + 1] << 16) | (buffer[offset + 2] << 8) | buffer[offset + 3])
  );
}
