/**
 * SHA-1 (FIPS 180-4), synchronous, for the one place the WebSocket handshake needs it:
 * `Sec-WebSocket-Accept` is base64(SHA-1(key + GUID)) (RFC 6455 §4.2.2), a check value and not a
 * security measure. `node:crypto` would load Deno's Node compatibility layer (tens of milliseconds)
 * in the first WebSocket session's handshake, on both ends, and Web Crypto's digest is
 * asynchronous. The tests hold this against `node:crypto`.
 *
 * @example
 * ```ts
 * import { sha1 } from "./sha1.ts";
 * const hex = [...sha1("abc")].map((b) => b.toString(16).padStart(2, "0")).join("");
 * console.assert(hex === "a9993e364706816aba3e25717850c26c9cd0d89d");
 * ```
 *
 * @module
 */

import { mdPad } from "./md_pad.ts";

/** The SHA-1 digest of `data` (20 bytes); a string is hashed as its UTF-8 bytes. */
export function sha1(data: Uint8Array | string): Uint8Array {
  const { padded, view } = mdPad(data);
  const h = Int32Array.from([0x67452301, 0xefcdab89, 0x98badcfe, 0x10325476, 0xc3d2e1f0]);
  const w = new Int32Array(80);
  for (let block = 0; block < padded.length; block += 64) {
    for (let t = 0; t < 16; t++) w[t] = view.getInt32(block + t * 4);
    for (let t = 16; t < 80; t++) {
      const x = w[t - 3] ^ w[t - 8] ^ w[t - 14] ^ w[t - 16];
      w[t] = (x << 1) | (x >>> 31);
    }
    let [a, b, c, d, e] = h;
    for (let t = 0; t < 80; t++) {
      let f: number, k: number;
      if (t < 20) {
        f = (b & c) | (~b & d);
        k = 0x5a827999;
      } else if (t < 40) {
        f = b ^ c ^ d;
        k = 0x6ed9eba1;
      } else if (t < 60) {
        f = (b & c) | (b & d) | (c & d);
        k = 0x8f1bbcdc;
      } else {
        f = b ^ c ^ d;
        k = 0xca62c1d6;
      }
      const temp = (((a << 5) | (a >>> 27)) + f + e + k + w[t]) | 0;
      e = d;
      d = c;
      c = (b << 30) | (b >>> 2);
      b = a;
      a = temp;
    }
    h[0] += a;
    h[1] += b;
    h[2] += c;
    h[3] += d;
    h[4] += e;
  }
  const out = new Uint8Array(20);
  const outView = new DataView(out.buffer);
  for (let i = 0; i < 5; i++) outView.setInt32(i * 4, h[i]);
  return out;
}
