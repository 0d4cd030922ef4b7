/**
 * The HTTP part of a tunnel's visitor policy (`policy.http`, docs/policy.md): who may reach an
 * HTTP tunnel (basic auth, a bearer JWT, an OIDC login) and what the daemon's HTTP front changes
 * on the way (request and response header rules, the `Host` the app sees, the path prefix it
 * serves under one host name). The same JSON in the client's flags and SDK, on the wire, in the
 * registry and the admin API; {@linkcode parseHttpPolicy} checks it strictly (an unknown key is
 * an error, each error names the field by its JSON path) and {@linkcode narrowHttpPolicy} joins
 * the operator's rules with a client's, so a client can only add to them.
 *
 * @example
 * ```ts
 * import { parseHttpPolicy } from "./http_policy.ts";
 * const parsed = parseHttpPolicy({ hostRewrite: "localhost:3000" }, "policy.http");
 * console.assert(parsed.ok);
 * ```
 *
 * @module
 */

import { isObject } from "../../util/parse/is_object.ts";
import { parsePasswordHash } from "./password_hash.ts";

/** One user of basic auth: the name and its `scrypt:` hash (never the password). */
export interface BasicAuthUser {
  /** The user name (no colon). */
  user: string;
  /** The password's `scrypt:N:r:p:SALT:HASH` form. */
  passwordHash: string;
}

/** A bearer JWT every request must carry, checked against a JWKS. */
export interface JwtRule {
  /** Where the issuer's signing keys are (https, or http on a loopback address). */
  jwksUrl: string;
  /** The `iss` the token must have. */
  issuer: string;
  /** The `aud` the token must have (one of these). */
  audience: string | string[];
}

/** A login at an OpenID Connect provider before any request reaches the app. */
export interface OidcRule {
  /** The provider's issuer URL (its discovery document under `/.well-known/openid-configuration`). */
  issuer: string;
  /** The client id registered at the provider. */
  clientId: string;
  /** Its secret, if the provider gave one (a public client has none: PKCE alone). */
  clientSecret?: string;
  /** Scopes asked for (default `openid email`). */
  scopes?: string[];
  /** Emails let in (exact, case-insensitive). */
  allowEmails?: string[];
  /** Email domains let in (`example.com`). */
  allowDomains?: string[];
  /** Groups let in (any one of them, from `groupsClaim`). */
  allowGroups?: string[];
  /** The claim holding the user's groups (default `groups`). */
  groupsClaim?: string;
}

/** Header rules for one direction: fields removed, then set (replacing), then added. */
export interface HeaderRules {
  /** Fields appended (after the message's own). */
  add?: Record<string, string>;
  /** Fields set, replacing any the message had. */
  set?: Record<string, string>;
  /** Fields removed. */
  remove?: string[];
}

/** `policy.http`: the HTTP rules of a tunnel. */
export interface HttpPolicy {
  /** Users allowed in by basic auth (any one of them). */
  basicAuth?: BasicAuthUser[];
  /** A bearer JWT required. */
  jwt?: JwtRule;
  /** An OIDC login required. */
  oidc?: OidcRule;
  /** Changes to each request before it goes to the app. */
  requestHeaders?: HeaderRules;
  /** Changes to each response before it goes to the visitor. */
  responseHeaders?: HeaderRules;
  /** The `Host` the app sees instead of the visitor's. */
  hostRewrite?: string;
  /** The path under which this tunnel serves its host name (several tunnels per name). */
  pathPrefix?: string;
}

/** The outcome of {@linkcode parseHttpPolicy}. */
export type HttpPolicyResult =
  | { ok: true; policy: HttpPolicy }
  | { ok: false; error: string };

/** Field names the front writes or frames by itself: no header rule may touch them. */
const RESERVED_FIELDS = new Set([
  "connection",
  "keep-alive",
  "content-length",
  "transfer-encoding",
  "te",
  "trailer",
  "upgrade",
  "host",
  "proxy-connection",
  "x-forwarded-for",
  "x-forwarded-proto",
  "x-forwarded-host",
  "forwarded",
  // What an OIDC login tells the app: the daemon's word alone.
  "x-tunnelmux-user",
  "x-tunnelmux-email",
]);
const TOKEN = /^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,128}$/;
/** A field value: visible ASCII, spaces and tabs inside, nothing that could end the line. */
const FIELD_VALUE = /^[\x21-\x7e]([\x20-\x7e\t]{0,1022}[\x21-\x7e])?$|^$/;
const MAX_USERS = 100;
const MAX_RULES = 50;
const MAX_LIST = 100;

class PolicyError extends Error {}

function fail(path: string, message: string): never {
  throw new PolicyError(`${path}: ${message}`);
}

function object(value: unknown, path: string, keys: readonly string[]): Record<string, unknown> {
  if (!isObject(value)) fail(path, "must be an object");
  for (const key of Object.keys(value)) {
    if (!keys.includes(key)) fail(`${path}.${key}`, `unknown key (known: ${keys.join(", ")})`);
  }
  return value;
}

function text(value: unknown, path: string, max = 256): string {
  if (typeof value !== "string" || value.length === 0) fail(path, "must be a non-empty string");
  if (value.length > max) fail(path, `must be at most ${max} characters`);
  // deno-lint-ignore no-control-regex
  if (/[\x00-\x1f\x7f]/.test(value)) fail(path, "must not hold control characters");
  return value;
}

function list(value: unknown, path: string, max = MAX_LIST): string[] {
  if (!Array.isArray(value)) fail(path, "must be an array of strings");
  if (value.length > max) fail(path, `must have at most ${max} entries`);
  return value.map((item, i) => text(item, `${path}[${i}]`));
}

/** An https URL, or http on a loopback address (a local provider, tests). */
function url(value: unknown, path: string): string {
  const raw = text(value, path, 2048);
  let parsed: URL;
  try {
    parsed = new URL(raw);
  } catch {
    fail(path, "must be a URL");
  }
  const loopback = /^(127\.\d+\.\d+\.\d+|\[::1\]|localhost)$/.test(parsed.hostname);
  if (parsed.protocol !== "https:" && !(parsed.protocol === "http:" && loopback)) {
    fail(path, "must be an https URL (http only on a loopback address)");
  }
  if (parsed.username || parsed.password) fail(path, "must not hold credentials");
  return raw;
}

function fieldName(value: string, path: string): string {
  if (!TOKEN.test(value)) fail(path, "is not a header field name");
  if (RESERVED_FIELDS.has(value.toLowerCase())) {
    fail(path, `${value} is written by the daemon itself (use hostRewrite for Host)`);
  }
  return value.toLowerCase();
}

function fieldMap(value: unknown, path: string): Record<string, string> {
  if (!isObject(value)) fail(path, "must be an object of field names to values");
  const entries = Object.entries(value);
  if (entries.length > MAX_RULES) fail(path, `must have at most ${MAX_RULES} fields`);
  const out: Record<string, string> = {};
  for (const [name, fieldValue] of entries) {
    const lower = fieldName(name, `${path}.${name}`);
    if (typeof fieldValue !== "string" || !FIELD_VALUE.test(fieldValue)) {
      fail(`${path}.${name}`, "must be a header value (printable ASCII, at most 1024 characters)");
    }
    out[lower] = fieldValue;
  }
  return out;
}

function headerRules(value: unknown, path: string): HeaderRules {
  const o = object(value, path, ["add", "set", "remove"]);
  const rules: HeaderRules = {};
  if (o.add !== undefined) rules.add = fieldMap(o.add, `${path}.add`);
  if (o.set !== undefined) rules.set = fieldMap(o.set, `${path}.set`);
  if (o.remove !== undefined) {
    rules.remove = list(o.remove, `${path}.remove`, MAX_RULES)
      .map((name, i) => fieldName(name, `${path}.remove[${i}]`));
  }
  return rules;
}

function basicAuth(value: unknown, path: string): BasicAuthUser[] {
  if (!Array.isArray(value) || value.length === 0) fail(path, "must be a non-empty array");
  if (value.length > MAX_USERS) fail(path, `must have at most ${MAX_USERS} users`);
  const seen = new Set<string>();
  return value.map((entry, i) => {
    const at = `${path}[${i}]`;
    const o = object(entry, at, ["user", "passwordHash"]);
    const user = text(o.user, `${at}.user`, 128);
    if (user.includes(":")) fail(`${at}.user`, "must not hold a colon");
    if (seen.has(user)) fail(`${at}.user`, `${user} is listed twice`);
    seen.add(user);
    if (o.password !== undefined) fail(`${at}.password`, "send passwordHash, never a password");
    const passwordHash = text(o.passwordHash, `${at}.passwordHash`, 200);
    const parsed = parsePasswordHash(passwordHash);
    if (typeof parsed === "string") fail(`${at}.passwordHash`, parsed);
    return { user, passwordHash };
  });
}

function jwt(value: unknown, path: string): JwtRule {
  const o = object(value, path, ["jwksUrl", "issuer", "audience"]);
  const audience = Array.isArray(o.audience)
    ? list(o.audience, `${path}.audience`, 20)
    : text(o.audience, `${path}.audience`);
  if (Array.isArray(audience) && audience.length === 0) {
    fail(`${path}.audience`, "must name at least one audience");
  }
  return {
    jwksUrl: url(o.jwksUrl, `${path}.jwksUrl`),
    issuer: text(o.issuer, `${path}.issuer`, 2048),
    audience,
  };
}

function oidc(value: unknown, path: string): OidcRule {
  const o = object(value, path, [
    "issuer",
    "clientId",
    "clientSecret",
    "scopes",
    "allowEmails",
    "allowDomains",
    "allowGroups",
    "groupsClaim",
  ]);
  const rule: OidcRule = {
    issuer: url(o.issuer, `${path}.issuer`),
    clientId: text(o.clientId, `${path}.clientId`),
  };
  if (o.clientSecret !== undefined) {
    rule.clientSecret = text(o.clientSecret, `${path}.clientSecret`, 1024);
  }
  if (o.scopes !== undefined) rule.scopes = list(o.scopes, `${path}.scopes`, 20);
  if (o.allowEmails !== undefined) {
    rule.allowEmails = list(o.allowEmails, `${path}.allowEmails`).map((e) => e.toLowerCase());
  }
  if (o.allowDomains !== undefined) {
    rule.allowDomains = list(o.allowDomains, `${path}.allowDomains`).map((d) => d.toLowerCase());
  }
  if (o.allowGroups !== undefined) rule.allowGroups = list(o.allowGroups, `${path}.allowGroups`);
  if (o.groupsClaim !== undefined) rule.groupsClaim = text(o.groupsClaim, `${path}.groupsClaim`);
  return rule;
}

const KEYS = [
  "basicAuth",
  "jwt",
  "oidc",
  "requestHeaders",
  "responseHeaders",
  "hostRewrite",
  "pathPrefix",
] as const;

/**
 * Checks an untrusted `policy.http` value: the policy, or the first error, named by its JSON
 * path under `path` (`policy.http.basicAuth[0].passwordHash: …`).
 */
export function parseHttpPolicy(value: unknown, path: string): HttpPolicyResult {
  try {
    const o = object(value, path, KEYS);
    const policy: HttpPolicy = {};
    if (o.basicAuth !== undefined) policy.basicAuth = basicAuth(o.basicAuth, `${path}.basicAuth`);
    if (o.jwt !== undefined) policy.jwt = jwt(o.jwt, `${path}.jwt`);
    // Both read the Authorization field: no request could carry both.
    if (policy.basicAuth && policy.jwt) {
      fail(`${path}.jwt`, "cannot be required together with basicAuth (both use Authorization)");
    }
    if (o.oidc !== undefined) policy.oidc = oidc(o.oidc, `${path}.oidc`);
    if (o.requestHeaders !== undefined) {
      policy.requestHeaders = headerRules(o.requestHeaders, `${path}.requestHeaders`);
    }
    if (o.responseHeaders !== undefined) {
      policy.responseHeaders = headerRules(o.responseHeaders, `${path}.responseHeaders`);
    }
    if (o.hostRewrite !== undefined) {
      const host = text(o.hostRewrite, `${path}.hostRewrite`);
      if (!/^[A-Za-z0-9.-]+(:\d{1,5})?$|^\[[0-9A-Fa-f:.]+\](:\d{1,5})?$/.test(host)) {
        fail(`${path}.hostRewrite`, "must be a host or host:port");
      }
      policy.hostRewrite = host;
    }
    if (o.pathPrefix !== undefined) {
      const prefix = text(o.pathPrefix, `${path}.pathPrefix`);
      if (!/^\/[A-Za-z0-9._~!$&'()*+,;=:@%/-]*$/.test(prefix) || prefix.includes("//")) {
        fail(`${path}.pathPrefix`, 'must be a path starting with "/"');
      }
      // "/api/" and "/api" name the same prefix.
      policy.pathPrefix = prefix.length > 1 ? prefix.replace(/\/$/, "") : prefix;
    }
    return { ok: true, policy };
  } catch (error) {
    if (error instanceof PolicyError) return { ok: false, error: error.message };
    throw error;
  }
}

function joinRules(
  a: HeaderRules | undefined,
  b: HeaderRules | undefined,
): HeaderRules | undefined {
  if (!a) return b;
  if (!b) return a;
  const remove = [...new Set([...(a.remove ?? []), ...(b.remove ?? [])])];
  return {
    // The operator's (`a`) value wins where both set or add one field.
    add: { ...b.add, ...a.add },
    set: { ...b.set, ...a.set },
    remove,
  };
}

/**
 * The rules in force for a tunnel: the operator's (`operator`, the client's `visitors.http`)
 * narrowed by the client's own. Auth the operator requires stays required, with the operator's
 * provider, keys and allow lists (a client's JWT or OIDC rule counts only where the operator has
 * none); a client's basic-auth list can only pick among the operator's users (by name); a
 * client's auth where the operator has none is required too. Header rules join (the operator's value wins for a field both name); the
 * operator's `hostRewrite` and `pathPrefix` win, a client's prefix kept when it lies under it.
 */
export function narrowHttpPolicy(
  operator: HttpPolicy | undefined,
  client: HttpPolicy | undefined,
): HttpPolicy | undefined {
  if (!operator) return client;
  if (!client) return operator;
  const out: HttpPolicy = {};
  if (operator.basicAuth) {
    const names = client.basicAuth?.map((u) => u.user);
    out.basicAuth = names
      ? operator.basicAuth.filter((u) => names.includes(u.user))
      : operator.basicAuth;
  } else if (client.basicAuth) out.basicAuth = client.basicAuth;
  const jwt = operator.jwt ?? client.jwt;
  if (jwt) out.jwt = jwt;
  const oidc = operator.oidc ?? client.oidc;
  if (oidc) out.oidc = oidc;
  const requestHeaders = joinRules(operator.requestHeaders, client.requestHeaders);
  if (requestHeaders) out.requestHeaders = requestHeaders;
  const responseHeaders = joinRules(operator.responseHeaders, client.responseHeaders);
  if (responseHeaders) out.responseHeaders = responseHeaders;
  const hostRewrite = operator.hostRewrite ?? client.hostRewrite;
  if (hostRewrite) out.hostRewrite = hostRewrite;
  const prefix = operator.pathPrefix === undefined ||
      (client.pathPrefix !== undefined && underPrefix(client.pathPrefix, operator.pathPrefix))
    ? client.pathPrefix
    : operator.pathPrefix;
  if (prefix !== undefined) out.pathPrefix = prefix;
  return out;
}

/** Whether `path` is `prefix` or lies under it (`/api` serves `/api`, `/api/x`, not `/apix`). */
export function underPrefix(path: string, prefix: string): boolean {
  if (prefix === "/") return true;
  return path === prefix || path.startsWith(`${prefix}/`) || path.startsWith(`${prefix}?`);
}

/**
 * `policy` as an operator's view may show it (the admin API, logs): users without their hashes,
 * the OIDC client secret only said to be set; everything else as it is.
 */
export function httpPolicyView(policy: HttpPolicy): Record<string, unknown> {
  const view: Record<string, unknown> = { ...policy };
  if (policy.basicAuth) view.basicAuth = policy.basicAuth.map(({ user }) => ({ user }));
  if (policy.oidc?.clientSecret !== undefined) {
    view.oidc = { ...policy.oidc, clientSecret: "(set)" };
  }
  return view;
}
