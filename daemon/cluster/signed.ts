/**
 * Messages between nodes over NATS (admin queries, their replies, events) carry an HMAC under the
 * cluster key and a time, so that a NATS user without the key can neither ask a node to act (kick
 * a session, close a tunnel) nor feed it false answers or events, and an old message cannot be
 * replayed later than {@linkcode MAX_AGE_MS}.
 *
 * Given several keys (a cluster rolling over to a new key), a message carries a MAC under each:
 * `mac` under the first (what a node of an earlier version checks), `macs` under the others; it
 * opens if any of them checks under any key the reader holds.
 *
 * @example
 * ```ts
 * import { openSigned, seal } from "./signed.ts";
 * const key = "a-shared-cluster-key-of-24+chars";
 * const text = seal(key, "tunnelmux.admin.sessions", { hello: 1 });
 * console.assert(openSigned(key, "tunnelmux.admin.sessions", text)?.hello === 1);
 * console.assert(openSigned(key, "another.subject", text) === undefined);
 * ```
 *
 * @module
 */

import { createHmac } from "node:crypto";
import { anyProofMatches } from "./peer_auth.ts";

/** A signed message older than this (or this far in the future) is refused. */
export const MAX_AGE_MS = 30_000;

/** More MACs than this on one message are not looked at. */
const MAX_MACS = 8;

function mac(key: string, subject: string, at: number, body: string): string {
  return createHmac("sha256", key).update(`${subject}\n${at}\n${body}`).digest("hex");
}

/** `data` as signed JSON text for `subject`, under `keys` (one, or the first and the others). */
export function seal(keys: string | readonly string[], subject: string, data: unknown): string {
  const [first, ...others] = [keys].flat();
  const at = Date.now();
  const body = JSON.stringify(data ?? null);
  const macs = others.map((key) => mac(key, subject, at, body));
  return JSON.stringify({
    at,
    body,
    mac: mac(first, subject, at, body),
    ...(macs.length > 0 ? { macs } : {}),
  });
}

/**
 * The data of a signed message for `subject`, or undefined if no MAC on it checks under any of
 * `keys`, or it is too old.
 */
// deno-lint-ignore no-explicit-any
export function openSigned(keys: string | readonly string[], subject: string, text: string): any {
  try {
    const { at, body, mac: received, macs } = JSON.parse(text);
    if (typeof at !== "number" || typeof body !== "string") return undefined;
    if (Math.abs(Date.now() - at) > MAX_AGE_MS) return undefined;
    const all = [received, ...(Array.isArray(macs) ? macs.slice(0, MAX_MACS) : [])];
    const expected = [keys].flat().map((key) => mac(key, subject, at, body));
    if (!anyProofMatches(all, expected)) return undefined;
    return JSON.parse(body);
  } catch {
    return undefined;
  }
}
