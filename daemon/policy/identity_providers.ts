/**
 * Which URLs a client's own HTTP rules may make the daemon fetch. A JWT rule names a JWKS URL and
 * an OIDC rule an issuer, and the daemon fetches both itself: a client free to name any URL could
 * make it request addresses only it can reach (its admin API on loopback, a cloud metadata service,
 * the internal network). So a client's URL must lie within one the operator listed in
 * `http.identityProviders`: the same scheme, host and port, and under the listed path. The
 * operator's own rules (`visitors.http`) are trusted as they are.
 *
 * @example
 * ```ts
 * import { identityProviderProblem, outsideIdentityProviders } from "./identity_providers.ts";
 * console.assert(identityProviderProblem("https://login.example.com/realms/a") === undefined);
 * const allowed = ["https://login.example.com/realms/a"];
 * console.assert(outsideIdentityProviders({
 *   jwt: { jwksUrl: "https://login.example.com/realms/a/certs", issuer: "x", audience: "y" },
 * }, undefined, allowed) === undefined);
 * ```
 *
 * @module
 */

import type { HttpPolicy } from "../../tunnel/policy/http_policy.ts";

/** Why `entry` cannot be an `http.identityProviders` entry, or undefined when it can. */
export function identityProviderProblem(entry: string): string | undefined {
  let url: URL;
  try {
    url = new URL(entry);
  } catch {
    return "must be a URL";
  }
  if (url.protocol !== "https:" && url.protocol !== "http:") return "must be an https URL";
  if (url.username || url.password) return "must not hold credentials";
  if (url.search || url.hash) return "must have no query or fragment";
  return undefined;
}

/** Whether `target` lies within `entry`: same origin, and the entry's path or below it. */
function within(target: URL, entry: URL): boolean {
  if (target.origin !== entry.origin) return false;
  const base = entry.pathname.endsWith("/") ? entry.pathname : `${entry.pathname}/`;
  return target.pathname === entry.pathname || target.pathname.startsWith(base);
}

/** Whether `url` lies within one of `allowed` (`http.identityProviders`). */
export function isAllowedIdentityProvider(url: string, allowed: readonly string[]): boolean {
  let target: URL;
  try {
    target = new URL(url);
  } catch {
    return false;
  }
  return allowed.some((entry) => within(target, new URL(entry)));
}

/**
 * The refusal for a client's HTTP rules (`requested`) that would make the daemon fetch a URL
 * outside `allowed`, naming the field; undefined when they do not. A rule the operator's
 * (`operator`, the client's `visitors.http`) supplies instead is not the client's and not checked.
 */
export function outsideIdentityProviders(
  requested: HttpPolicy | undefined,
  operator: HttpPolicy | undefined,
  allowed: readonly string[],
): string | undefined {
  const refuse = (field: string, url: string) =>
    `policy.http.${field}: ${url} is not within the daemon's http.identityProviders` +
    (allowed.length === 0 ? " (none are listed)" : "");
  if (requested?.jwt && !operator?.jwt) {
    if (!isAllowedIdentityProvider(requested.jwt.jwksUrl, allowed)) {
      return refuse("jwt.jwksUrl", requested.jwt.jwksUrl);
    }
  }
  if (requested?.oidc && !operator?.oidc) {
    if (!isAllowedIdentityProvider(requested.oidc.issuer, allowed)) {
      return refuse("oidc.issuer", requested.oidc.issuer);
    }
  }
  return undefined;
}
