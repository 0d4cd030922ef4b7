/**
 * The key OIDC login's session cookies are encrypted with, and where it comes from: kept apart from
 * the login (`oidc_login.ts`), so that the HTTP fronts can say where the key comes from at start
 * without loading the login's code, which loads with the first tunnel that has OIDC rules.
 *
 * @module
 */

import { fromBase64Url, toBase64Url } from "../../util/bytes/base64.ts";
import { nodeBuiltin } from "../../util/host/host.ts";
import { randomBytes } from "../../util/crypto/random.ts";

let sessionKey: Uint8Array | undefined;
let sessionKeySource: (() => Uint8Array) | undefined;

/**
 * Says where the key session cookies are encrypted with (32 bytes) comes from, read at the first
 * login (so a daemon without OIDC tunnels never makes one); every node of a cluster needs the
 * same key, or a visitor's session holds on one node only.
 */
export function setSessionKeySource(source: () => Uint8Array): void {
  sessionKeySource = source;
  sessionKey = undefined;
}

/** The session key, loaded on first use; undefined when none can be had (logins then fail). */
export function currentSessionKey(): Uint8Array | undefined {
  if (!sessionKey && sessionKeySource) sessionKey = sessionKeySource();
  return sessionKey;
}

/**
 * The daemon's session key: `TUNNELMUX_HTTP_SESSION_KEY` (32 bytes, base64url) when set (a
 * cluster's nodes share it so), else `http-session.key` in the data directory, made on first use.
 */
export function loadSessionKey(dataDir: string, env: string | undefined): Uint8Array {
  if (env) {
    const key = fromBase64Url(env);
    if (key.length !== 32) {
      throw new Error("TUNNELMUX_HTTP_SESSION_KEY must be 32 bytes, base64url");
    }
    return key;
  }
  const { mkdirSync, readFileSync, writeFileSync } = nodeBuiltin("node:fs");
  const path = `${dataDir.replace(/[\\/]$/, "")}/http-session.key`;
  try {
    const key = fromBase64Url(readFileSync(path, "utf8").trim());
    if (key.length === 32) return key;
    throw new Error(`${path}: not a 32-byte base64url key`);
  } catch (error) {
    if ((error as { code?: string }).code !== "ENOENT") throw error;
  }
  const key = randomBytes(32);
  mkdirSync(dataDir, { recursive: true });
  writeFileSync(path, `${toBase64Url(key)}\n`, { mode: 0o600, flag: "wx" });
  return key;
}
