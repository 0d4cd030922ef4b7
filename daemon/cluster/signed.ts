/**
 * Messages between nodes over NATS (admin queries, their replies, events) carry an HMAC under the
 * cluster key and a time, so that a NATS user without the key can neither ask a node to act (kick
 * a session, close a tunnel) nor feed it false answers or events, and an old message cannot be
 * replayed later than {@linkcode MAX_AGE_MS}.
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
import { proofMatches } from "./peer_auth.ts";

/** A signed message older than this (or this far in the future) is refused. */
export const MAX_AGE_MS = 30_000;

function mac(key: string, subject: string, at: number, body: string): string {
  return createHmac("sha256", key).update(`${subject}\n${at}\n${body}`).digest("hex");
}

/** `data` as signed JSON text for `subject`. */
export function seal(key: string, subject: string, data: unknown): string {
  const at = Date.now();
  const body = JSON.stringify(data ?? null);
  return JSON.stringify({ at, body, mac: mac(key, subject, at, body) });
}

/** The data of a signed message for `subject`, or undefined if it is not genuine or too old. */
// deno-lint-ignore no-explicit-any
export function openSigned(key: string, subject: string, text: string): any {
  try {
    const { at, body, mac: received } = JSON.parse(text);
    if (typeof at !== "number" || typeof body !== "string") return undefined;
    if (Math.abs(Date.now() - at) > MAX_AGE_MS) return undefined;
    if (!proofMatches(received, mac(key, subject, at, body))) return undefined;
    return JSON.parse(body);
  } catch {
    return undefined;
  }
}
