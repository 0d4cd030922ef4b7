/**
 * Base64 and base64url (RFC 4648 §4, §5) to and from bytes, with the platform's `btoa`/`atob`:
 * `Buffer` would load Deno's Node compatibility layer on the start path, and
 * `Uint8Array.fromBase64` is not in every runtime this project supports.
 *
 * @example
 * ```ts
 * import { fromBase64Url, toBase64Url } from "./base64.ts";
 * const text = toBase64Url(new Uint8Array([251, 255]));
 * console.assert(text === "-_8" && fromBase64Url(text)[1] === 255);
 * ```
 *
 * @module
 */

/** `bytes` in base64 with padding. */
export function toBase64(bytes: Uint8Array): string {
  let binary = "";
  for (let i = 0; i < bytes.length; i += 0x8000) {
    binary += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  }
  return btoa(binary);
}

/** `bytes` in unpadded base64url. */
export function toBase64Url(bytes: Uint8Array): string {
  return toBase64(bytes).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}

/** The bytes of base64 `text` (padding optional); throws on characters outside the alphabet. */
export function fromBase64(text: string): Uint8Array {
  const padded = text.length % 4 === 0 ? text : text + "=".repeat(4 - (text.length % 4));
  const binary = atob(padded);
  const bytes = new Uint8Array(binary.length);
  for (let i = 0; i < binary.length; i++) bytes[i] = binary.charCodeAt(i);
  return bytes;
}

/** The bytes of base64url `text` (padding optional); throws on characters outside the alphabet. */
export function fromBase64Url(text: string): Uint8Array {
  if (/[+/]/.test(text)) throw new Error("not base64url: + or / in it");
  return fromBase64(text.replace(/-/g, "+").replace(/_/g, "/"));
}
