/**
 * Scopes of minted tokens: what a minted client may do, written in the same shapes as a config
 * client (`expose`, `forward`, `services`, `limits`) and checked by the same validator, so a
 * minted token can never be given a permission the config file could not express, and both
 * report problems the same way.
 *
 * @module
 */

import type { ClientConfig, Limits } from "../config/mod.ts";
import { validateConfig } from "../config/validate.ts";
import { isObject } from "../../util/parse/is_object.ts";

/** A minted token's permissions as given (config-client shapes); kept raw so it can be re-parsed. */
export interface TokenScopes {
  /** As a config client's `expose`. */
  expose?: unknown;
  /** As a config client's `forward`. */
  forward?: unknown;
  /** As a config client's `services`. */
  services?: unknown;
  /**
   * As a config client's `limits` (`tunnels`, `streams`, `visitors`), capped by the daemon-wide
   * limits.
   */
  limits?: unknown;
}

/** The scope keys, in the order they are reported. */
export const SCOPE_KEYS = ["expose", "forward", "services", "limits"] as const;

/** A problem with one field of a mint request; `field` is a JSON path such as `forward[0]`. */
export interface FieldIssue {
  /** JSON path in the request body. */
  field: string;
  /** What is wrong. */
  message: string;
}

/** The outcome of {@link scopedClient}: a client when there are no errors. */
export interface ScopedClient {
  /** The parsed client (its `tokenHash` is a placeholder; the store sets the real one). */
  client?: ClientConfig;
  /** Everything that makes the scopes unusable. */
  errors: FieldIssue[];
  /** Things that work but are probably unintended (e.g. binding every interface). */
  warnings: FieldIssue[];
}

// Any well-formed hash will do: only the client's permissions are wanted from the validator.
const PLACEHOLDER_HASH = "sha256:" + "0".repeat(64);
const CLIENT_PATH = "clients[0]";

/**
 * Parses `name` and `scopes` exactly as the config would parse a client with them, against the
 * daemon-wide `limits` in force (a client's limits may only lower them). The validator is run on
 * a one-client document so that it, not a copy of its rules, stays the single definition.
 */
export function scopedClient(name: unknown, scopes: TokenScopes, limits: Limits): ScopedClient {
  const client: Record<string, unknown> = { name, token: PLACEHOLDER_HASH };
  for (const key of SCOPE_KEYS) if (scopes[key] !== undefined) client[key] = scopes[key];
  const result = validateConfig({
    // Listeners off the network and no admin API: nothing here can add an issue of its own.
    listen: { tcp: "127.0.0.1:0", websocket: null, admin: null },
    adminToken: null,
    limits,
    clients: [client],
  });
  const fields = (issues: { path: string; message: string }[]): FieldIssue[] =>
    issues.map(({ path, message }) => ({ field: fieldOf(path), message }));
  const errors = fields(result.errors);
  const warnings = fields(result.warnings.filter((w) => w.path.startsWith(CLIENT_PATH)));
  return { client: errors.length === 0 ? result.config?.clients[0] : undefined, errors, warnings };
}

/** `clients[0].expose.ports[1]` → `expose.ports[1]`; anything else is kept as it is. */
function fieldOf(path: string): string {
  if (path.startsWith(CLIENT_PATH + ".")) return path.slice(CLIENT_PATH.length + 1);
  return path === CLIENT_PATH ? "" : path;
}

/** The longest lifetime a minted token may be given: ten years, in seconds. */
export const MAX_EXPIRES_IN = 10 * 365 * 24 * 3600;

const MINT_KEYS = ["name", ...SCOPE_KEYS, "expiresIn", "expiresAt"];

/** A mint request whose envelope is valid (its scopes are checked by {@link scopedClient}). */
export interface MintRequest {
  /** The client name the token authenticates as. */
  name: unknown;
  /** Its permissions. */
  scopes: TokenScopes;
  /** When it expires (ms since the epoch), or null for never. */
  expiresAt: number | null;
}

/**
 * Checks a mint request body: a JSON object with only the known keys, and at most one of
 * `expiresIn` (whole seconds, 1 to ten years) and `expiresAt` (an ISO 8601 time in the future,
 * at most ten years ahead). Unknown keys are errors, as in the config, so that a typo such as
 * `"expiresin"` cannot silently mint a token that never expires.
 */
export function parseMintRequest(
  body: unknown,
  now: number,
): { request?: MintRequest; errors: FieldIssue[] } {
  if (!isObject(body)) {
    return { errors: [{ field: "", message: "the body must be a JSON object" }] };
  }
  const errors: FieldIssue[] = [];
  for (const key of Object.keys(body)) {
    if (!MINT_KEYS.includes(key)) errors.push({ field: key, message: "unknown field" });
  }
  const scopes: TokenScopes = {};
  for (const key of SCOPE_KEYS) if (body[key] !== undefined) scopes[key] = body[key];
  let expiresAt: number | null = null;
  const { expiresIn, expiresAt: at } = body;
  const latest = now + MAX_EXPIRES_IN * 1000;
  if (expiresIn !== undefined && at !== undefined) {
    errors.push({ field: "expiresAt", message: "give expiresIn or expiresAt, not both" });
  } else if (expiresIn !== undefined) {
    if (
      typeof expiresIn !== "number" || !Number.isInteger(expiresIn) || expiresIn < 1 ||
      expiresIn > MAX_EXPIRES_IN
    ) {
      errors.push({
        field: "expiresIn",
        message: `must be a whole number of seconds from 1 to ${MAX_EXPIRES_IN}`,
      });
    } else expiresAt = now + expiresIn * 1000;
  } else if (at !== undefined) {
    // Date.parse also takes forms like "March 7"; only ISO 8601 date-times with a zone are meant.
    const iso = /^\d{4}-\d\d-\d\dT\d\d:\d\d(:\d\d(\.\d+)?)?(Z|[+-]\d\d:\d\d)$/;
    const time = typeof at === "string" && iso.test(at) ? Date.parse(at) : NaN;
    if (Number.isNaN(time)) {
      errors.push({ field: "expiresAt", message: "must be an ISO 8601 time with a zone" });
    } else if (time <= now) {
      errors.push({ field: "expiresAt", message: "is not in the future" });
    } else if (time > latest) {
      errors.push({ field: "expiresAt", message: "is more than ten years ahead" });
    } else expiresAt = time;
  }
  return errors.length > 0
    ? { errors }
    : { request: { name: body.name, scopes, expiresAt }, errors };
}
