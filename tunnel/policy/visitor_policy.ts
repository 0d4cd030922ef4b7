/**
 * A tunnel's visitor policy: who may reach the service behind it (visitor IP allow and deny
 * lists) and how much (new connections per second per visitor address and for the whole tunnel,
 * connections at once per visitor address, bytes per second each way). The same JSON object is
 * in the client's flags and config, on the wire in `expose`, in the daemon's registry and the
 * cluster's claims, and in the admin API; docs/policy.md describes it.
 *
 * The operator sets one per client (defaults and ceilings); a client can only narrow it
 * ({@linkcode narrowVisitorPolicy}). Parsing is strict: unknown keys, bad networks and numbers
 * that are not positive integers are errors naming their JSON path.
 *
 * @example
 * ```ts
 * import { narrowVisitorPolicy, parseVisitorPolicy } from "./visitor_policy.ts";
 * const client = parseVisitorPolicy({ allow: ["10.1.0.0/16"], connectionsPerSecond: 5 }, "policy");
 * const operator = parseVisitorPolicy({ allow: ["10.0.0.0/8"], connectionsPerSecond: 20 }, "v");
 * if (client.ok && operator.ok) {
 *   const narrowed = narrowVisitorPolicy(operator.policy, client.policy);
 *   console.assert(narrowed.ok && narrowed.policy.allow?.[0] === "10.1.0.0/16");
 * }
 * ```
 *
 * @module
 */

import { type IpAddress, unmapIPv4 } from "../../util/net/address.ts";
import {
  type Cidr,
  cidrContains,
  formatCidr,
  intersectCidrs,
  parseCidr,
} from "../../util/net/cidr.ts";
import { suggest } from "../../util/parse/suggest.ts";
import { type HttpPolicy, narrowHttpPolicy, parseHttpPolicy } from "./http_policy.ts";

/** Bytes per second each way; `in` is visitor → service, `out` service → visitor. */
export interface Bandwidth {
  /** Visitor → service, bytes per second. */
  in?: number;
  /** Service → visitor, bytes per second. */
  out?: number;
}

/** A tunnel's visitor rules; every field optional, absent = no rule. */
export interface VisitorPolicy {
  /** Visitor networks allowed (canonical CIDR text); absent = every address. */
  allow?: string[];
  /** Visitor networks refused; deny wins over allow. */
  deny?: string[];
  /** New connections per second per visitor address (a token bucket, burst the same). */
  connectionsPerSecond?: number;
  /** New connections per second to the tunnel, all visitors together. */
  tunnelConnectionsPerSecond?: number;
  /** Connections at once per visitor address. */
  connectionsPerVisitor?: number;
  /** Bytes per second through the tunnel, each way. */
  bandwidth?: Bandwidth;
  /** HTTP tunnels only: the HTTP rules. */
  http?: HttpPolicy;
}

/** Result of parsing or narrowing: the policy, or the problem with its JSON path. */
export type VisitorPolicyResult = { ok: true; policy: VisitorPolicy } | {
  ok: false;
  error: string;
};

/** Most networks in one list: every new visitor is matched against them. */
export const MAX_NETWORKS = 1024;
/** Largest connection rate or count a rule takes. */
export const MAX_RATE = 1_000_000;
/** Largest bandwidth a rule takes, bytes per second (1 TB/s: no limit in practice). */
export const MAX_BANDWIDTH = 1_000_000_000_000;

const KEYS = [
  "allow",
  "deny",
  "connectionsPerSecond",
  "tunnelConnectionsPerSecond",
  "connectionsPerVisitor",
  "bandwidth",
  "http",
] as const;
const NUMBER_KEYS = [
  "connectionsPerSecond",
  "tunnelConnectionsPerSecond",
  "connectionsPerVisitor",
] as const;
const BANDWIDTH_KEYS = ["in", "out"] as const;

const isRecord = (v: unknown): v is Record<string, unknown> =>
  typeof v === "object" && v !== null && !Array.isArray(v);
const show = (value: unknown): string => {
  const text = JSON.stringify(value) ?? String(value);
  return text.length > 60 ? text.slice(0, 57) + "..." : text;
};

class Bad extends Error {}
const fail = (path: string, message: string): never => {
  throw new Bad(`${path}: ${message}`);
};

function keysOf(value: unknown, path: string, known: readonly string[]): Record<string, unknown> {
  if (!isRecord(value)) fail(path, `${show(value)} must be an object`);
  const record = value as Record<string, unknown>;
  for (const key of Object.keys(record)) {
    if (!known.includes(key)) fail(`${path}.${key}`, `unknown key${suggest(key, known)}`);
  }
  return record;
}

function positive(value: unknown, path: string, max: number): number {
  if (typeof value !== "number" || !Number.isInteger(value) || value < 1 || value > max) {
    fail(path, `${show(value)} must be an integer from 1 to ${max}`);
  }
  return value as number;
}

function networks(value: unknown, path: string): string[] {
  if (!Array.isArray(value)) return fail(path, `${show(value)} must be an array of networks`);
  if (value.length > MAX_NETWORKS) fail(path, `at most ${MAX_NETWORKS} networks`);
  const out: string[] = [];
  value.forEach((item, i) => {
    if (typeof item !== "string") fail(`${path}[${i}]`, `${show(item)} must be a string`);
    const text = item as string;
    // A bare address is the one address, as operators usually write it.
    const parsed = parseCidr(
      text.includes("/") ? text : `${text}/${text.includes(":") ? 128 : 32}`,
    );
    if (!parsed.ok) fail(`${path}[${i}]`, `${show(text)} is not a network: ${parsed.error}`);
    else if (!out.includes(formatCidr(parsed.cidr))) out.push(formatCidr(parsed.cidr));
  });
  return out;
}

/**
 * Checks an untrusted value found at JSON path `path` (e.g. `policy`, `clients[0].visitors`) and
 * returns it as a {@linkcode VisitorPolicy} in canonical form, or the first problem.
 */
export function parseVisitorPolicy(value: unknown, path: string): VisitorPolicyResult {
  try {
    const record = keysOf(value, path, KEYS);
    const policy: VisitorPolicy = {};
    if (record.allow !== undefined) {
      const allow = networks(record.allow, `${path}.allow`);
      // An empty list would mean "everyone", the opposite of what a list of none reads as.
      if (allow.length === 0) {
        fail(`${path}.allow`, "must name at least one network (omit it to allow all)");
      }
      policy.allow = allow;
    }
    if (record.deny !== undefined) {
      const deny = networks(record.deny, `${path}.deny`);
      if (deny.length > 0) policy.deny = deny;
    }
    for (const key of NUMBER_KEYS) {
      if (record[key] !== undefined) {
        policy[key] = positive(record[key], `${path}.${key}`, MAX_RATE);
      }
    }
    if (record.bandwidth !== undefined) {
      const b = keysOf(record.bandwidth, `${path}.bandwidth`, BANDWIDTH_KEYS);
      const bandwidth: Bandwidth = {};
      for (const key of BANDWIDTH_KEYS) {
        if (b[key] !== undefined) {
          bandwidth[key] = positive(b[key], `${path}.bandwidth.${key}`, MAX_BANDWIDTH);
        }
      }
      if (bandwidth.in !== undefined || bandwidth.out !== undefined) policy.bandwidth = bandwidth;
    }
    if (record.http !== undefined) {
      const http = parseHttpPolicy(record.http, `${path}.http`);
      if (!http.ok) return http;
      policy.http = http.policy;
    }
    return { ok: true, policy };
  } catch (error) {
    if (error instanceof Bad) return { ok: false, error: error.message };
    throw error;
  }
}

const cidrs = (list: readonly string[]): Cidr[] =>
  list.map((text) => {
    const parsed = parseCidr(text);
    if (!parsed.ok) throw new Error(`unparsed network ${text}`);
    return parsed.cidr;
  });

const smaller = (a: number | undefined, b: number | undefined): number | undefined =>
  a === undefined ? b : b === undefined ? a : Math.min(a, b);

/**
 * The operator's policy narrowed by the client's (both parsed): allow lists intersect, deny lists
 * join, each number is the smaller, the operator's HTTP rules stay. An error when both allow
 * lists are set and share no network, since nobody could then visit.
 */
export function narrowVisitorPolicy(
  operator: VisitorPolicy,
  client: VisitorPolicy,
): VisitorPolicyResult {
  const out: VisitorPolicy = {};
  if (operator.allow && client.allow) {
    const both = intersectCidrs(cidrs(operator.allow), cidrs(client.allow)).map(formatCidr);
    if (both.length === 0) {
      return {
        ok: false,
        error: "policy.allow: no network in it is within the operator's allowed networks",
      };
    }
    out.allow = both;
  } else if (operator.allow || client.allow) {
    out.allow = [...(operator.allow ?? client.allow!)];
  }
  const deny = [...new Set([...(operator.deny ?? []), ...(client.deny ?? [])])];
  if (deny.length > 0) out.deny = deny;
  for (const key of NUMBER_KEYS) {
    const value = smaller(operator[key], client[key]);
    if (value !== undefined) out[key] = value;
  }
  const bandwidthIn = smaller(operator.bandwidth?.in, client.bandwidth?.in);
  const bandwidthOut = smaller(operator.bandwidth?.out, client.bandwidth?.out);
  if (bandwidthIn !== undefined || bandwidthOut !== undefined) {
    out.bandwidth = {};
    if (bandwidthIn !== undefined) out.bandwidth.in = bandwidthIn;
    if (bandwidthOut !== undefined) out.bandwidth.out = bandwidthOut;
  }
  const http = narrowHttpPolicy(operator.http, client.http);
  if (http !== undefined) out.http = http;
  return { ok: true, policy: out };
}

/** True when the policy has no rule at all (then nothing need be checked per visitor). */
export function isEmptyPolicy(policy: VisitorPolicy | undefined): boolean {
  return !policy || Object.keys(policy).length === 0;
}

/**
 * One network of a rule list: an IPv4 one also as its first address and mask, 32-bit numbers, so
 * an IPv4 visitor is matched with one AND (every visitor of a tunnel with a list meets them).
 */
interface Net {
  cidr: Cidr;
  v4?: { base: number; mask: number };
}

/** The 32-bit number of IPv4 address bytes. */
const ipv4Number = (b: Uint8Array): number =>
  ((b[0] << 24) | (b[1] << 16) | (b[2] << 8) | b[3]) >>> 0;

function compile(list: Cidr[]): Net[] {
  return list.map((cidr) => {
    if (cidr.ip.family !== 4) return { cidr };
    const mask = cidr.prefix === 0 ? 0 : (0xffffffff << (32 - cidr.prefix)) >>> 0;
    return { cidr, v4: { base: (ipv4Number(cidr.ip.bytes) & mask) >>> 0, mask } };
  });
}

/** Whether `net` holds `ip`, whose 32-bit number `v4` is given when it is (or maps) an IPv4. */
function holds(net: Net, ip: IpAddress, v4: number | undefined): boolean {
  if (!net.v4) return cidrContains(net.cidr, ip);
  return v4 !== undefined && ((v4 & net.v4.mask) >>> 0) === net.v4.base;
}

/** A policy's address rules, compiled once so each visitor is matched against numbers or bytes. */
export class AddressRules {
  readonly #allow: Net[] | undefined;
  readonly #deny: Net[];

  /** The rules of `policy` (parsed). */
  constructor(policy: Pick<VisitorPolicy, "allow" | "deny">) {
    this.#allow = policy.allow ? compile(cidrs(policy.allow)) : undefined;
    this.#deny = compile(cidrs(policy.deny ?? []));
  }

  /** Whether a visitor from `ip` may come in: not denied, and allowed (when there is a list). */
  admits(ip: IpAddress): boolean {
    const plain = unmapIPv4(ip);
    const v4 = plain.family === 4 ? ipv4Number(plain.bytes) : undefined;
    for (const net of this.#deny) if (holds(net, ip, v4)) return false;
    if (!this.#allow) return true;
    for (const net of this.#allow) if (holds(net, ip, v4)) return true;
    return false;
  }
}
