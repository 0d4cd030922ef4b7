/**
 * A tunnel's `policy.http` as the HTTP front applies it (docs/policy.md): who may reach the app
 * (basic auth, a bearer JWT) and what changes on the way (header rules both ways, the `Host` the
 * app sees). One gate per tunnel, made when the tunnel is exposed, holding what verification
 * caches: credentials that passed scrypt (bounded, expiring, so a keep-alive client does not pay
 * the hash per request) and the issuer's keys (one JWKS per URL, fetched with a time and size
 * bound and kept a while).
 *
 * A refused visitor learns only that it is refused (401 and the scheme to use), never which rule
 * or user it failed.
 *
 * @module
 */

import { fromBase64, toBase64 } from "../../util/bytes/base64.ts";
import { sha256 } from "../../util/crypto/sha256.ts";
import { boundedFetch } from "./bounded_fetch.ts";
import type { JWTVerifyGetKey } from "jose";
import type { HeaderRules, HttpPolicy } from "../../tunnel/policy/http_policy.ts";
import {
  type LoginRequest,
  type LoginVerdict,
  OidcLogin,
  withoutLoginCookies,
} from "./oidc_login.ts";
import {
  parsePasswordHash,
  type PasswordHash,
  verifyPassword,
} from "../../tunnel/policy/password_hash.ts";

/**
 * A request's verdict: let through (with the fields saying who, for the app), or answered by the
 * daemon with `status`, `fields` and the short text `message` (a refusal, or the login's own
 * pages and redirects).
 */
export type GateVerdict =
  | { ok: true; identity?: [string, string][] }
  | {
    ok: false;
    /** 401, or the login's 302, 403, 200 (logout). */
    status: number;
    /** Fields of the answer (`WWW-Authenticate`, `Location`, `Set-Cookie`). */
    fields: [string, string][];
    /** The answer's body. */
    message: string;
    /** Why, for the daemon's counters (never sent to the visitor). */
    reason: string;
  };

/** A request as the gate sees it. */
export type GateRequest = LoginRequest;

/** Fields the daemon writes for the app about an OIDC login; a visitor's own are dropped. */
const IDENTITY_FIELDS = ["x-tunnelmux-user", "x-tunnelmux-email"];

/** The realm basic auth names; the same for every tunnel, so it says nothing about one. */
const REALM = "tunnelmux";
/** Verified credentials kept per tunnel, and how long. */
const MAX_VERIFIED = 256;
const VERIFIED_MS = 5 * 60_000;
/** JWKS documents larger than this are refused (a key set is a few KiB). */
const MAX_JWKS_BYTES = 256 * 1024;
/** Key sets kept at once, by URL, across tunnels. */
const MAX_KEY_SETS = 64;
/** Signature algorithms a token may use: public-key ones only (a JWKS holds public keys). */
const ALGORITHMS = [
  "RS256",
  "RS384",
  "RS512",
  "PS256",
  "PS384",
  "PS512",
  "ES256",
  "ES384",
  "ES512",
  "EdDSA",
  "Ed25519",
];

const keySets = new Map<string, JWTVerifyGetKey>();

/**
 * Password checks (scrypt: tens of ms and 32 MiB each) running at once, daemon-wide, and their
 * bound: past it a credential not verified before is refused without being hashed, so wrong
 * passwords sent fast cannot make the daemon spend unbounded CPU and memory.
 */
let hashing = 0;
const MAX_HASHING = 2;

/** jose, loaded with the first token (off the daemon's start path). */
let jose: Promise<typeof import("jose")> | undefined;

/** The key set at `url`: one per URL, the oldest forgotten past {@linkcode MAX_KEY_SETS}. */
async function keySet(url: string): Promise<JWTVerifyGetKey> {
  let found = keySets.get(url);
  if (found) return found;
  const { createRemoteJWKSet, customFetch } = await (jose ??= import("jose"));
  found = keySets.get(url);
  if (found) return found;
  found = createRemoteJWKSet(new URL(url), {
    timeoutDuration: 5_000,
    cooldownDuration: 30_000,
    cacheMaxAge: 10 * 60_000,
    [customFetch]: (url: string, init: RequestInit) =>
      boundedFetch(url, init, { maxBytes: MAX_JWKS_BYTES, timeoutMs: 5_000 }),
  });
  if (keySets.size >= MAX_KEY_SETS) keySets.delete(keySets.keys().next().value!);
  keySets.set(url, found);
  return found;
}

/** The rules of one tunnel's `policy.http`, applied by the HTTP front to each request. */
export class HttpGate {
  /** The policy this gate applies. */
  readonly policy: HttpPolicy;
  /** Requests refused, by reason (the daemon's counters read these). */
  readonly refused = new Map<string, number>();
  /** Passwords checked with scrypt (a credential verified before is not checked again). */
  hashed = 0;
  readonly #users = new Map<string, PasswordHash>();
  /** sha256 of an accepted `Authorization` value → when it stops being taken without scrypt. */
  readonly #verified = new Map<string, number>();
  /** Credentials being hashed now, by the same key: others with them wait for that hash. */
  readonly #hashing = new Map<string, Promise<boolean>>();
  readonly #login: OidcLogin | undefined;

  /** A gate for `policy` (already checked by `parseHttpPolicy`). */
  constructor(policy: HttpPolicy) {
    this.policy = policy;
    for (const { user, passwordHash } of policy.basicAuth ?? []) {
      const parsed = parsePasswordHash(passwordHash);
      if (typeof parsed !== "string") this.#users.set(user, parsed);
    }
    this.#login = policy.oidc && new OidcLogin(policy.oidc);
  }

  /** Whether requests must be checked at all (some auth is required). */
  get guards(): boolean {
    return this.policy.basicAuth !== undefined || this.policy.jwt !== undefined ||
      this.#login !== undefined;
  }

  /**
   * The verdict on a request with `fields`: at once when it needs no work (no auth, credentials
   * verified before), else a promise (scrypt, a JWKS fetch).
   */
  check(request: GateRequest): GateVerdict | Promise<GateVerdict> {
    const authorization = request.fields.filter(([name]) => name.toLowerCase() === "authorization");
    const value = authorization.length === 1 ? authorization[0][1] : undefined;
    const first = this.policy.basicAuth
      ? this.#basic(value)
      : this.policy.jwt
      ? this.#jwt(value)
      : { ok: true } as const;
    if (!this.#login) return first;
    // Both required: the header's auth first, then the login.
    const then = (verdict: GateVerdict) => verdict.ok ? this.#oidc(request) : verdict;
    return first instanceof Promise ? first.then(then) : then(first);
  }

  async #oidc(request: GateRequest): Promise<GateVerdict> {
    let verdict: LoginVerdict;
    try {
      verdict = await this.#login!.check(request);
    } catch {
      // The provider cannot be reached: nobody in, and nothing said about why.
      verdict = {
        ok: false,
        status: 503,
        fields: [],
        message: "login unavailable",
        reason: "oidc_error",
      };
    }
    if (!verdict.ok) {
      if (verdict.status >= 400) {
        this.refused.set(verdict.reason, (this.refused.get(verdict.reason) ?? 0) + 1);
      }
      return verdict;
    }
    const identity: [string, string][] = [["x-tunnelmux-user", verdict.identity.sub]];
    if (verdict.identity.email) identity.push(["x-tunnelmux-email", verdict.identity.email]);
    return { ok: true, identity };
  }

  #refuse(reason: string, challenge: string): GateVerdict {
    this.refused.set(reason, (this.refused.get(reason) ?? 0) + 1);
    return {
      ok: false,
      status: 401,
      fields: [["www-authenticate", challenge]],
      message: "unauthorized",
      reason,
    };
  }

  #basic(value: string | undefined): GateVerdict | Promise<GateVerdict> {
    const challenge = `Basic realm="${REALM}", charset="UTF-8"`;
    const match = value && /^basic +([A-Za-z0-9+/]+={0,2}) *$/i.exec(value);
    if (!match) return this.#refuse("basic_missing", challenge);
    const key = toBase64(sha256(match[1]));
    const until = this.#verified.get(key);
    if (until !== undefined) {
      if (until > performance.now()) return { ok: true };
      this.#verified.delete(key);
    }
    const decoded = new TextDecoder().decode(fromBase64(match[1]));
    const colon = decoded.indexOf(":");
    const hash = colon > 0 ? this.#users.get(decoded.slice(0, colon)) : undefined;
    if (!hash) return this.#refuse("basic_wrong", challenge);
    // A browser's parallel first requests carry the same credential: one hash for them all.
    let pending = this.#hashing.get(key);
    if (!pending) {
      if (hashing >= MAX_HASHING) return this.#refuse("basic_busy", challenge);
      this.hashed++;
      hashing++;
      pending = verifyPassword(decoded.slice(colon + 1), hash).catch(() => false).finally(() => {
        hashing--;
        this.#hashing.delete(key);
      });
      this.#hashing.set(key, pending);
    }
    return pending.then((ok) => {
      if (!ok) return this.#refuse("basic_wrong", challenge);
      if (this.#verified.size >= MAX_VERIFIED) {
        this.#verified.delete(this.#verified.keys().next().value!);
      }
      this.#verified.set(key, performance.now() + VERIFIED_MS);
      return { ok: true } as const;
    });
  }

  async #jwt(value: string | undefined): Promise<GateVerdict> {
    const rule = this.policy.jwt!;
    const match = value &&
      /^bearer +([A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+) *$/i.exec(value);
    if (!match) return this.#refuse("jwt_missing", `Bearer realm="${REALM}"`);
    try {
      const { jwtVerify } = await (jose ??= import("jose"));
      await jwtVerify(match[1], await keySet(rule.jwksUrl), {
        issuer: rule.issuer,
        audience: rule.audience,
        algorithms: ALGORITHMS,
        requiredClaims: ["exp"],
      });
      return { ok: true };
    } catch {
      return this.#refuse("jwt_invalid", `Bearer realm="${REALM}", error="invalid_token"`);
    }
  }

  /**
   * The request's fields as the app gets them: basic-auth credentials removed (they are the
   * daemon's, not the app's), the header rules applied, `Host` rewritten.
   */
  requestFields(fields: [string, string][], verdict?: GateVerdict): [string, string][] {
    let out = fields;
    if (this.policy.basicAuth) out = out.filter(([name]) => name.toLowerCase() !== "authorization");
    if (this.#login) {
      out = withoutLoginCookies(out).filter(([name]) =>
        !IDENTITY_FIELDS.includes(name.toLowerCase())
      );
      if (verdict?.ok && verdict.identity) out.push(...verdict.identity);
    }
    if (this.policy.requestHeaders) out = applyRules(out, this.policy.requestHeaders);
    const host = this.policy.hostRewrite;
    if (host !== undefined) {
      out = out.map(([name, value]) => [name, name.toLowerCase() === "host" ? host : value]);
    }
    return out;
  }

  /** The response's fields as the visitor gets them (the response header rules applied). */
  responseFields(fields: [string, string][]): [string, string][] {
    return this.policy.responseHeaders ? applyRules(fields, this.policy.responseHeaders) : fields;
  }

  /** Whether responses are rewritten (so the front re-serializes their heads). */
  get rewritesResponses(): boolean {
    return this.policy.responseHeaders !== undefined;
  }
}

/** `fields` with `rules` applied: removed, then set (replacing), then added. */
export function applyRules(fields: [string, string][], rules: HeaderRules): [string, string][] {
  const drop = new Set([...(rules.remove ?? []), ...Object.keys(rules.set ?? {})]);
  const out = drop.size === 0
    ? [...fields]
    : fields.filter(([name]) => !drop.has(name.toLowerCase()));
  for (const [name, value] of Object.entries(rules.set ?? {})) out.push([name, value]);
  for (const [name, value] of Object.entries(rules.add ?? {})) out.push([name, value]);
  return out;
}
