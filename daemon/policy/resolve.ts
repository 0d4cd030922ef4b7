/**
 * Turns a client's forward request into the one IP address the daemon will dial. The policy is
 * checked on resolved addresses, and the caller dials the returned address itself (never the
 * name), so DNS rebinding between the check and the connect cannot change where it goes.
 *
 * @module
 */

import { formatIp, type IpAddress, parseIp, unmapIPv4 } from "../../util/net/address.ts";
import {
  checkResolvedTarget,
  type ClientPolicy,
  type Denial,
  type ForwardRule,
  matchForward,
} from "./policy.ts";

/** One address from a lookup, as `node:dns` returns it. */
export interface LookupAddress {
  /** The address text. */
  address: string;
  /** 4 or 6. */
  family: number;
}

/** The shape of `node:dns/promises` `lookup` with `all: true`; injectable for tests. */
export type LookupFn = (host: string, options: { all: true }) => Promise<LookupAddress[]>;

/** Options of {@link resolveTarget}. */
export interface ResolveOptions {
  /** Name lookup; `node:dns` `lookup` by default (the system resolver, honouring /etc/hosts). */
  lookup?: LookupFn;
  /** Give up on a lookup after this long (`node:dns` lookups have no timeout of their own). */
  timeoutMs?: number;
}

/** An allowed forward: dial exactly `ip` (canonical text), port `port`. */
export interface ResolvedTarget {
  /** Always true. */
  readonly ok: true;
  /** The address to dial; IPv4-mapped IPv6 answers are given as plain IPv4. */
  readonly ip: string;
  /** 4 or 6. */
  readonly family: 4 | 6;
  /** The port to dial. */
  readonly port: number;
  /** The rule that allowed it, for the audit log. */
  readonly rule: ForwardRule;
}

// node:dns is loaded on the first lookup, not at start (it costs Deno's start time).
const systemLookup: LookupFn = async (host, options) =>
  (await import("node:dns/promises")).lookup(host, options);

const fail = (message: string): Denial => ({ ok: false, code: "resolve_failed", message });

/**
 * Decides where a forward to `host:port` for `client` goes. IP literals (in every spelling
 * `parseHost` decodes) are not resolved. Names are looked up, every answer is checked against
 * every matching rule, and the first allowed answer is returned; if none is allowed, the denial
 * of the first answer is (so a name pointing at 127.0.0.1 reports `loopback_denied`).
 */
export async function resolveTarget(
  host: string,
  port: number,
  client: ClientPolicy,
  options: ResolveOptions = {},
): Promise<ResolvedTarget | Denial> {
  const match = matchForward(client, host, port);
  if (!match.ok) return match;
  if (match.target.kind === "ip") return pick([match.target.ip], match.rules, port);
  const name = match.target.name;
  let answers: LookupAddress[];
  try {
    answers = await withTimeout(
      (options.lookup ?? systemLookup)(name, { all: true }),
      options.timeoutMs,
      name,
    );
  } catch (error) {
    const code = (error as { code?: unknown })?.code;
    return fail(`could not resolve ${name}${typeof code === "string" ? ` (${code})` : ""}`);
  }
  // An unparsable answer (a zone id, garbage from a hooked resolver) is skipped, never dialled.
  const ips = (Array.isArray(answers) ? answers : [])
    .map((a) => (typeof a?.address === "string" ? parseIp(a.address) : undefined))
    .filter((ip): ip is IpAddress => ip !== undefined);
  if (ips.length === 0) return fail(`${name} has no usable addresses`);
  return pick(ips, match.rules, port);
}

function pick(
  ips: IpAddress[],
  rules: readonly ForwardRule[],
  port: number,
): ResolvedTarget | Denial {
  let first: Denial | undefined;
  for (const ip of ips) {
    for (const rule of rules) {
      const decision = checkResolvedTarget(rule, ip);
      if (decision.ok) {
        const dial = unmapIPv4(ip);
        return { ok: true, ip: formatIp(dial), family: dial.family, port, rule };
      }
      first ??= decision;
    }
  }
  return first ?? fail("no matching rule");
}

function withTimeout<T>(promise: Promise<T>, ms: number | undefined, name: string): Promise<T> {
  if (ms === undefined || ms <= 0) return promise;
  let timer: ReturnType<typeof setTimeout> | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () => reject(Object.assign(new Error(`lookup of ${name} timed out`), { code: "ETIMEOUT" })),
      ms,
    );
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}
