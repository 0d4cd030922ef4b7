/**
 * The message padding SHA-1 and SHA-256 share (FIPS 180-4 §5.1.1): the message's bytes, a 1 bit,
 * zeros, and the message's length in bits as a 64-bit big-endian number, filling whole 64-byte
 * blocks.
 *
 * @example
 * ```ts
 * import { mdPad } from "./md_pad.ts";
 * const { padded } = mdPad("abc");
 * console.assert(padded.length === 64 && padded[3] === 0x80 && padded[63] === 24);
 * ```
 *
 * @module
 */

const encoder = new TextEncoder();

/** `data` (a string as its UTF-8 bytes) padded to whole 64-byte blocks, with a view to read it. */
export function mdPad(data: Uint8Array | string): { padded: Uint8Array; view: DataView } {
  const bytes = typeof data === "string" ? encoder.encode(data) : data;
  const blocks = Math.ceil((bytes.length + 9) / 64);
  const padded = new Uint8Array(blocks * 64);
  padded.set(bytes);
  padded[bytes.length] = 0x80;
  const view = new DataView(padded.buffer);
  const bits = bytes.length * 8;
  view.setUint32(padded.length - 8, Math.floor(bits / 0x1_0000_0000));
  view.setUint32(padded.length - 4, bits >>> 0);
  return { padded, view };
}
