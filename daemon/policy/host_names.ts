/**
 * Host names for HTTP(S) tunnels (see docs/design/http-tunnels.md): what a client may
 * ask for and how a request's `Host` (or a ClientHello's SNI) is matched against the names held.
 *
 * A client asks for a NAME: a single label (`myapp`), which means that label under the daemon's
 * base domain (`myapp.tunnels.example.com`), or a full host name (`app.example.org`). Its
 * allowlist (`expose.hosts` in the config) holds patterns: `*` (any single label under the base
 * domain), a single label (`myapp`: that label under the base domain), `*.dev.example.org` (any
 * single label under that name), or an exact host name. Names
 * are lower-case ASCII (IDNs in their `xn--` form), at most 253 characters, labels of 1–63 letters,
 * digits and inner hyphens.
 *
 * @module
 */

import { splitHostPort } from "../../util/net/address.ts";
/** Why a name was refused. */
export type HostNameRefusal = "bad_name" | "no_domain" | "not_allowed";

/** The outcome of {@linkcode claimableHost}. */
export type HostNameResult =
  | { ok: true; host: string }
  | { ok: false; code: HostNameRefusal; message: string };

const LABEL = /^(?!-)[a-z0-9-]{1,63}(?<!-)$/;

/**
 * Whether `name` is a valid lower-case host name: labels joined by dots, no trailing dot, and a
 * last label that is not all digits (so no IPv4 address passes for one, RFC 3696 §2).
 */
export function isHostName(name: string): boolean {
  if (name.length === 0 || name.length > 253) return false;
  const labels = name.split(".");
  return labels.every((label) => LABEL.test(label)) && !/^[0-9]+$/.test(labels.at(-1)!);
}

/** Whether the allowlist `patterns` lets a client hold `host` (already full and valid). */
export function hostAllowed(
  host: string,
  patterns: readonly string[],
  domain: string | null,
): boolean {
  for (const raw of patterns) {
    const pattern = raw.toLowerCase();
    if (pattern === host) return true;
    if (pattern !== "*" && !pattern.includes(".")) {
      if (domain !== null && host === `${pattern}.${domain}`) return true;
      continue;
    }
    const parent = pattern === "*" ? domain : pattern.startsWith("*.") ? pattern.slice(2) : null;
    if (parent === null) continue;
    const dot = host.indexOf(".");
    if (dot > 0 && host.slice(dot + 1) === parent) return true;
  }
  return false;
}

/**
 * The full host name a client asking for `name` would hold, if its allowlist lets it: a single
 * label is taken under `domain` (refused when the daemon has none), a dotted name as it is.
 *
 * @example
 * ```ts
 * import { claimableHost } from "./host_names.ts";
 * const result = claimableHost("MyApp", ["*"], "tunnels.example.com");
 * console.assert(result.ok && result.host === "myapp.tunnels.example.com");
 * ```
 */
export function claimableHost(
  name: string,
  patterns: readonly string[],
  domain: string | null,
): HostNameResult {
  const lower = name.toLowerCase();
  if (!isHostName(lower)) {
    return { ok: false, code: "bad_name", message: `${JSON.stringify(name)} is not a host name` };
  }
  let host = lower;
  if (!lower.includes(".")) {
    if (domain === null) {
      return {
        ok: false,
        code: "no_domain",
        message: `"${lower}" is a single label and the daemon has no base domain`,
      };
    }
    host = `${lower}.${domain}`;
    if (!isHostName(host)) {
      return { ok: false, code: "bad_name", message: `${host} is too long for a host name` };
    }
  }
  if (!hostAllowed(host, patterns, domain)) {
    return { ok: false, code: "not_allowed", message: `this client may not hold ${host}` };
  }
  return { ok: true, host };
}

/**
 * The host a request is for, from its `Host` field value (or a ClientHello's server name): the
 * port and a trailing dot removed, lower-cased; undefined when it is not a host name (an IP
 * literal, a bracketed IPv6 address, a value with a path or user info), which no tunnel holds.
 */
export function requestHost(value: string): string | undefined {
  let host = value.trim().toLowerCase();
  const parts = splitHostPort(host);
  if (parts) {
    if (parts.bracketed || !/^[0-9]{1,5}$/.test(parts.port)) return undefined;
    host = parts.host;
  } else if (host.includes(":")) return undefined;
  if (host.endsWith(".")) host = host.slice(0, -1);
  return isHostName(host) ? host : undefined;
}
