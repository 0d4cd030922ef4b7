/**
 * The admin API's gatekeepers, run before any endpoint: the `Host` allowlist (DNS rebinding) and
 * the bearer token. Both answer in the API's JSON error shape.
 *
 * @module
 */

import type { MiddlewareHandler } from "hono";
import { TokenVerifier } from "../tokens/verifier.ts";
import { errorResponse } from "./api/errors.ts";
import { formatHostPort } from "../../util/net/address.ts";

/** Formats `hostname:port` as it appears in a `Host` header (IPv6 in brackets), lower case. */
function hostHeader(hostname: string, port: number): string {
  return formatHostPort(hostname, port).toLowerCase();
}

/**
 * The `Host` values the admin listener answers to: the bound address, `localhost`, `127.0.0.1`
 * and `[::1]`, each with the bound port, plus `extra` (matched as given, and with the port).
 */
export function allowedHosts(hostname: string, port: number, extra: readonly string[] = []) {
  const hosts = new Set<string>();
  for (const name of [hostname, "localhost", "127.0.0.1", "::1"]) {
    hosts.add(hostHeader(name, port));
  }
  for (const name of extra) {
    hosts.add(name.toLowerCase());
    if (!/:\d+$/.test(name)) hosts.add(hostHeader(name, port));
  }
  return hosts;
}

/**
 * Refuses requests whose `Host` is not in `hosts` with 421. A web page on an attacker's domain
 * that rebinds its name to 127.0.0.1 still sends its own name as `Host`, so it never gets in,
 * token or not.
 */
export function hostAllowlist(hosts: ReadonlySet<string>): MiddlewareHandler {
  return async (c, next) => {
    const host = (c.req.header("host") ?? "").toLowerCase();
    if (!hosts.has(host)) {
      return errorResponse(c, 421, "misdirected", "this Host is not served here");
    }
    await next();
  };
}

/** Paths served without the token: probes from orchestrators that hold no credentials. */
const PUBLIC_PATHS = new Set(["/healthz", "/readyz"]);

/**
 * Requires `Authorization: Bearer <token>` matching `tokenHash()` (read per request, so a reload
 * that changes the admin token applies at once). The comparison is the constant-time
 * {@linkcode TokenVerifier}; with no hash configured every token is refused.
 */
export function bearerAuth(tokenHash: () => string | null): MiddlewareHandler {
  let verifier = new TokenVerifier([]);
  let current: string | null = null;
  return async (c, next) => {
    if ((c.req.method === "GET" || c.req.method === "HEAD") && PUBLIC_PATHS.has(c.req.path)) {
      return await next();
    }
    const hash = tokenHash();
    if (hash !== current) {
      verifier = new TokenVerifier(hash === null ? [] : [{ name: "admin", hash }]);
      current = hash;
    }
    const match = /^Bearer\s+(\S+)$/i.exec(c.req.header("authorization") ?? "");
    if (!match || verifier.verify(match[1]) === undefined) {
      return errorResponse(c, 401, "unauthorized", "a valid admin bearer token is required", {
        "WWW-Authenticate": 'Bearer realm="tunnelmux admin"',
      });
    }
    await next();
  };
}
