/**
 * Byte comparison whose time does not depend on where the inputs differ: for secrets and their
 * digests (tokens, group keys, HMACs), where an early exit would tell an attacker how many leading
 * bytes they guessed right. Inputs of different lengths compare unequal at once: callers compare
 * digests of a fixed length, so the length is no secret.
 *
 * @example
 * ```ts
 * import { constantTimeEqual } from "./constant_time.ts";
 * const encode = (text: string) => new TextEncoder().encode(text);
 * console.assert(constantTimeEqual(encode("same"), encode("same")));
 * console.assert(!constantTimeEqual(encode("same"), encode("sane")));
 * ```
 *
 * @module
 */

/** Whether `a` and `b` hold the same bytes, looking at every byte of equal-length inputs. */
export function constantTimeEqual(a: Uint8Array, b: Uint8Array): boolean {
  if (a.length !== b.length) return false;
  let difference = 0;
  for (let i = 0; i < a.length; i++) difference |= a[i] ^ b[i];
  return difference === 0;
}
