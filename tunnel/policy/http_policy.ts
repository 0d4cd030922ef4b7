/**
 * A tunnel's HTTP visitor rules (`policy.http`). Placeholder: it only checks that the value is an
 * object and keeps it as it is; the full rules replace this module.
 *
 * @module
 */

/** The HTTP rules of a tunnel's visitor policy, kept as the client sent them. */
export type HttpPolicy = Record<string, unknown>;

/** Result of {@linkcode parseHttpPolicy}: the rules, or the first problem with its JSON path. */
export type HttpPolicyResult = { ok: true; policy: HttpPolicy } | { ok: false; error: string };

/** Checks that `value` (found at JSON path `path`) is an object, and keeps it. */
export function parseHttpPolicy(value: unknown, path: string): HttpPolicyResult {
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    return { ok: false, error: `${path}: must be an object` };
  }
  return { ok: true, policy: value as HttpPolicy };
}

/** The operator's HTTP rules narrowed by the client's: here, the operator's when it has any. */
export function narrowHttpPolicy(
  operator: HttpPolicy | undefined,
  client: HttpPolicy | undefined,
): HttpPolicy | undefined {
  return operator ?? client;
}
