/**
 * An OpenID Connect login in front of an HTTP tunnel's app (`policy.http.oidc`, docs/policy.md):
 * the authorization code flow with PKCE, run by the daemon's HTTP front on the tunnel's own host.
 * A visitor without a session is sent to the provider (a browser's GET: 302; anything else: 401),
 * comes back to `/.tunnelmux/oidc/callback`, and gets a session cookie if its identity passes the
 * allow lists; `/.tunnelmux/oidc/logout` ends the session. Both cookies (the flow's state and the
 * session) are JWTs encrypted with the daemon's session key (`dir`, A256GCM: authenticated, so
 * encrypted and signed in one), bound to the host and the provider, so a cookie of one tunnel
 * means nothing to another; the app never sees them.
 *
 * @module
 */

import type { OidcRule } from "../../tunnel/policy/http_policy.ts";
import { currentSessionKey } from "./session_key.ts";
import { boundedFetch } from "./bounded_fetch.ts";

/** Paths on every OIDC-guarded tunnel's host that the daemon answers itself. */
export const OIDC_PATHS = {
  callback: "/.tunnelmux/oidc/callback",
  logout: "/.tunnelmux/oidc/logout",
} as const;
const SESSION_COOKIE = "__tunnelmux_session";
const STATE_COOKIE = "__tunnelmux_oidc";
/** How long a login lasts (then the visitor goes through the provider again). */
const SESSION_SECONDS = 8 * 3600;
/** How long a visitor has at the provider. */
const STATE_SECONDS = 10 * 60;

/** A request as the login sees it. */
export interface LoginRequest {
  /** The request's method. */
  method: string;
  /** The request target (origin-form). */
  target: string;
  /** The `Host` the visitor used (with its port). */
  hostValue: string;
  /** The host name alone (what cookies are bound to). */
  host: string;
  /** Whether the visitor came over TLS (then the cookies are `Secure`). */
  proto: "http" | "https";
  /** The request's header fields. */
  fields: readonly [string, string][];
}

/**
 * What the front does with a request: let it through as `identity`, or answer it with `status`,
 * `fields` and `message` (a redirect to log in, the callback's redirect back, a refusal).
 */
export type LoginVerdict =
  | { ok: true; identity: Identity }
  | {
    ok: false;
    status: number;
    fields: [string, string][];
    message: string;
    reason: "oidc_login" | "oidc_denied" | "oidc_callback" | "oidc_logout" | "oidc_error";
  };

/** Who logged in. */
export interface Identity {
  /** The provider's subject. */
  sub: string;
  /** The email, when the provider gave one and did not say it is unverified. */
  email?: string;
}

type Client = typeof import("openid-client");
/** A provider's answers (discovery, tokens, userinfo, keys) are a few KiB. */
const MAX_PROVIDER_BYTES = 256 * 1024;
/** Every request to the provider: bounded in time and size, no redirect followed. */
const providerFetch: import("openid-client").CustomFetch = (url, init) =>
  boundedFetch(url, init as RequestInit, { maxBytes: MAX_PROVIDER_BYTES, timeoutMs: 5_000 });
/** openid-client and jose, loaded at the first login (off the daemon's start path). */
let library: Promise<Client> | undefined;
let jose: Promise<typeof import("jose")> | undefined;

/** One tunnel's login at its provider. */
export class OidcLogin {
  readonly #rule: OidcRule;
  #config: Promise<import("openid-client").Configuration> | undefined;

  /** A login for `rule` (checked by `parseHttpPolicy`). */
  constructor(rule: OidcRule) {
    this.#rule = rule;
  }

  /** The provider's configuration, discovered once (again after a failure). */
  #discover(client: Client) {
    if (!this.#config) {
      const { issuer, clientId, clientSecret } = this.#rule;
      const url = new URL(issuer);
      // Plain http only for a provider on a loopback address (the parser allows no other).
      const execute = url.protocol === "http:" ? [client.allowInsecureRequests] : [];
      this.#config = client.discovery(
        url,
        clientId,
        clientSecret,
        clientSecret ? client.ClientSecretPost(clientSecret) : client.None(),
        { execute, timeout: 5, [client.customFetch]: providerFetch },
      ).then((config) => {
        config.timeout = 5;
        config[client.customFetch] = providerFetch;
        return config;
      });
      this.#config.catch(() => (this.#config = undefined));
    }
    return this.#config;
  }

  /** The verdict on `request`: a session lets it through; else the login's own answers. */
  async check(request: LoginRequest): Promise<LoginVerdict> {
    const key = currentSessionKey();
    if (!key) return refusal(503, "login unavailable", "oidc_error");
    const path = request.target.split("?")[0];
    const cookies = cookieValues(request.fields);
    const secure = request.proto === "https" ? "; Secure" : "";
    if (path === OIDC_PATHS.logout) {
      return {
        ok: false,
        status: 200,
        message: "logged out",
        reason: "oidc_logout",
        fields: [[
          "set-cookie",
          `${SESSION_COOKIE}=; Path=/; Max-Age=0; HttpOnly; SameSite=Lax${secure}`,
        ]],
      };
    }
    if (path === OIDC_PATHS.callback) return await this.#callback(request, cookies, key, secure);
    const { jwtDecrypt } = await (jose ??= import("jose"));
    const session = cookies.get(SESSION_COOKIE);
    if (session) {
      try {
        const { payload } = await jwtDecrypt(session, key, {
          audience: request.host,
          issuer: this.#rule.issuer,
        });
        if (payload.cid === this.#rule.clientId && typeof payload.sub === "string") {
          const email = typeof payload.email === "string" ? payload.email : undefined;
          return { ok: true, identity: { sub: payload.sub, email } };
        }
      } catch { /* expired, another key, another host: log in again */ }
    }
    // Only a browser's navigation is sent to log in; an API call is told it is not.
    if (request.method !== "GET" && request.method !== "HEAD") {
      return refusal(401, "unauthorized", "oidc_login");
    }
    return await this.#login(request, key, secure);
  }

  async #login(request: LoginRequest, key: Uint8Array, secure: string): Promise<LoginVerdict> {
    const client = await (library ??= import("openid-client"));
    const config = await this.#discover(client);
    const verifier = client.randomPKCECodeVerifier();
    const state = client.randomState();
    const nonce = client.randomNonce();
    const url = client.buildAuthorizationUrl(config, {
      redirect_uri: redirectUri(request),
      scope: (this.#rule.scopes ?? ["openid", "email"]).join(" "),
      code_challenge: await client.calculatePKCECodeChallenge(verifier),
      code_challenge_method: "S256",
      state,
      nonce,
    });
    const { EncryptJWT } = await (jose ??= import("jose"));
    const cookie = await new EncryptJWT({ v: verifier, s: state, n: nonce, r: request.target })
      .setProtectedHeader({ alg: "dir", enc: "A256GCM" })
      .setAudience(request.host)
      .setIssuer(this.#rule.issuer)
      .setExpirationTime(`${STATE_SECONDS}s`)
      .encrypt(key);
    return {
      ok: false,
      status: 302,
      message: "log in first",
      reason: "oidc_login",
      fields: [
        ["location", url.href],
        [
          "set-cookie",
          `${STATE_COOKIE}=${cookie}; Path=${OIDC_PATHS.callback}; Max-Age=${STATE_SECONDS}; HttpOnly; SameSite=Lax${secure}`,
        ],
        ["cache-control", "no-store"],
      ],
    };
  }

  async #callback(
    request: LoginRequest,
    cookies: Map<string, string>,
    key: Uint8Array,
    secure: string,
  ): Promise<LoginVerdict> {
    const clear =
      `${STATE_COOKIE}=; Path=${OIDC_PATHS.callback}; Max-Age=0; HttpOnly; SameSite=Lax${secure}`;
    const { EncryptJWT, jwtDecrypt } = await (jose ??= import("jose"));
    const stateCookie = cookies.get(STATE_COOKIE);
    if (!stateCookie) return refusal(400, "login expired: start again", "oidc_callback");
    let flow: { v: string; s: string; n: string; r: string };
    try {
      const { payload } = await jwtDecrypt(stateCookie, key, {
        audience: request.host,
        issuer: this.#rule.issuer,
      });
      flow = payload as unknown as typeof flow;
    } catch {
      return refusal(400, "login expired: start again", "oidc_callback", [["set-cookie", clear]]);
    }
    let claims: Record<string, unknown>;
    try {
      const client = await (library ??= import("openid-client"));
      const config = await this.#discover(client);
      const current = new URL(request.target, `${request.proto}://${request.hostValue}`);
      const tokens = await client.authorizationCodeGrant(config, current, {
        pkceCodeVerifier: flow.v,
        expectedState: flow.s,
        expectedNonce: flow.n,
        idTokenExpected: true,
      });
      claims = { ...tokens.claims() };
      // The userinfo endpoint has what the ID token may leave out (email, groups).
      if (tokens.access_token && typeof claims.sub === "string") {
        const info = await client.fetchUserInfo(config, tokens.access_token, claims.sub)
          .catch(() => ({}));
        claims = { ...info, ...claims };
      }
    } catch {
      return refusal(401, "login failed", "oidc_callback", [["set-cookie", clear]]);
    }
    if (!this.#allowed(claims)) {
      return refusal(403, "forbidden", "oidc_denied", [["set-cookie", clear]]);
    }
    // An email the provider says it has not verified is not told to the app as the user's.
    const email = typeof claims.email === "string" && claims.email_verified !== false
      ? claims.email
      : undefined;
    const session = await new EncryptJWT({ cid: this.#rule.clientId, ...(email ? { email } : {}) })
      .setProtectedHeader({ alg: "dir", enc: "A256GCM" })
      .setSubject(String(claims.sub))
      .setAudience(request.host)
      .setIssuer(this.#rule.issuer)
      .setExpirationTime(`${SESSION_SECONDS}s`)
      .encrypt(key);
    const back = returnPath(flow.r);
    return {
      ok: false,
      status: 302,
      message: "logged in",
      reason: "oidc_callback",
      fields: [
        ["location", back],
        [
          "set-cookie",
          `${SESSION_COOKIE}=${session}; Path=/; Max-Age=${SESSION_SECONDS}; HttpOnly; SameSite=Lax${secure}`,
        ],
        ["set-cookie", clear],
        ["cache-control", "no-store"],
      ],
    };
  }

  /** Whether the identity passes the allow lists (none given: anyone the provider knows). */
  #allowed(claims: Record<string, unknown>): boolean {
    const { allowEmails, allowDomains, allowGroups } = this.#rule;
    if (!allowEmails && !allowDomains && !allowGroups) return true;
    const email = typeof claims.email === "string" && claims.email_verified !== false
      ? claims.email.toLowerCase()
      : undefined;
    if (email && allowEmails?.includes(email)) return true;
    if (email && allowDomains?.includes(email.slice(email.lastIndexOf("@") + 1))) return true;
    const groups = claims[this.#rule.groupsClaim ?? "groups"];
    const list = Array.isArray(groups) ? groups : typeof groups === "string" ? [groups] : [];
    return allowGroups !== undefined && list.some((g) => allowGroups.includes(String(g)));
  }
}

function refusal(
  status: number,
  message: string,
  reason: Extract<LoginVerdict, { ok: false }>["reason"],
  fields: [string, string][] = [],
): LoginVerdict {
  return { ok: false, status, message, reason, fields: [...fields, ["cache-control", "no-store"]] };
}

/**
 * Where a visitor goes after logging in: the path it asked for, on this host only. Anything a
 * browser could read as another host (`//evil`, `/\evil`, which browsers take as `//evil`) or
 * that is not a path goes to `/`.
 */
export function returnPath(target: unknown): string {
  return typeof target === "string" && /^\/(?![/\\])[^\\]*$/.test(target) ? target : "/";
}

/** Where the provider sends the visitor back: the callback on the host it used. */
function redirectUri(request: LoginRequest): string {
  return `${request.proto}://${request.hostValue}${OIDC_PATHS.callback}`;
}

/** The request's cookies by name (the first of a name wins). */
function cookieValues(fields: readonly [string, string][]): Map<string, string> {
  const out = new Map<string, string>();
  for (const [name, value] of fields) {
    if (name.toLowerCase() !== "cookie") continue;
    for (const part of value.split(";")) {
      const eq = part.indexOf("=");
      if (eq <= 0) continue;
      const key = part.slice(0, eq).trim();
      if (!out.has(key)) out.set(key, part.slice(eq + 1).trim());
    }
  }
  return out;
}

/** `fields` with the login's cookies taken out of `Cookie` (the app never sees them). */
export function withoutLoginCookies(fields: [string, string][]): [string, string][] {
  const out: [string, string][] = [];
  for (const [name, value] of fields) {
    if (name.toLowerCase() !== "cookie") {
      out.push([name, value]);
      continue;
    }
    const kept = value.split(";").map((p) => p.trim()).filter((p) =>
      p !== "" && !p.startsWith(`${SESSION_COOKIE}=`) && !p.startsWith(`${STATE_COOKIE}=`)
    );
    if (kept.length > 0) out.push([name, kept.join("; ")]);
  }
  return out;
}
