/**
 * The operator's `identityProviders`: the URLs a client's own `policy.http` may make the daemon
 * fetch (a JWT rule's `jwksUrl`, an OIDC rule's `issuer`). A client is not trusted like the
 * operator, so without this list a client could make the daemon fetch any internal URL (SSRF);
 * none is allowed unless listed. The operator's own rules are trusted and not checked.
 *
 * @module
 */

import type { VisitorPolicy } from "../../tunnel/policy/visitor_policy.ts";

/**
 * The canonical form of one allowlist entry (an http(s) URL: its origin, and the path it must
 * start with), or an error saying why not.
 */
export function parseIdentityProvider(value: unknown): { ok: true; url: string } | {
  ok: false;
  error: string;
} {
  if (typeof value !== "string") return { ok: false, error: "must be a string" };
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    return { ok: false, error: "is not a URL" };
  }
  if (url.protocol !== "https:" && url.protocol !== "http:") {
    return { ok: false, error: "must be an http or https URL" };
  }
  if (url.username || url.password || url.search || url.hash) {
    return { ok: false, error: "must have no credentials, query or fragment" };
  }
  return { ok: true, url: url.origin + url.pathname };
}

/**
 * Whether `target` is within one of `allowed` (canonical entries): the same origin, and a path
 * starting with the entry's (at a `/` boundary, so `/a` does not admit `/ab`).
 */
export function isAllowedProvider(target: string, allowed: readonly string[]): boolean {
  let url: URL;
  try {
    url = new URL(target);
  } catch {
    return false;
  }
  for (const entry of allowed) {
    const prefix = new URL(entry);
    if (prefix.origin !== url.origin) continue;
    const path = prefix.pathname;
    if (
      url.pathname === path || path.endsWith("/") && url.pathname.startsWith(path) ||
      url.pathname.startsWith(path + "/")
    ) return true;
  }
  return false;
}

/**
 * Why a client's `requested` policy may not be put in force under the operator's rules
 * (`operator`) and allowlist, or undefined when it may: each URL the daemon would fetch for the
 * client (a rule the operator's own does not replace) must be in `allowed`.
 */
export function checkIdentityProviders(
  operator: VisitorPolicy,
  requested: VisitorPolicy,
  allowed: readonly string[],
): string | undefined {
  const jwt = requested.http?.jwt;
  if (jwt && !operator.http?.jwt && !isAllowedProvider(jwt.jwksUrl, allowed)) {
    return `policy.http.jwt.jwksUrl: ${jwt.jwksUrl} is not in the daemon's identityProviders`;
  }
  const oidc = requested.http?.oidc;
  if (oidc && !operator.http?.oidc && !isAllowedProvider(oidc.issuer, allowed)) {
    return `policy.http.oidc.issuer: ${oidc.issuer} is not in the daemon's identityProviders`;
  }
  return undefined;
}
