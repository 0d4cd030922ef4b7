/**
 * Enforces a tunnel's {@linkcode VisitorPolicy} at each visitor's entry: the address rules, new
 * connections per second per visitor address and for the tunnel (token buckets), connections at
 * once per visitor address, and the tunnel's bandwidth each way (token buckets the flow is held
 * by). The per-address table is bounded: past `maxAddresses` it forgets the least recently seen
 * address that has no connection open, so a flood of addresses cannot grow it.
 *
 * @example
 * ```ts
 * import { VisitorGate } from "./visitor_gate.ts";
 * const gate = new VisitorGate({ deny: ["127.0.0.3/32"], connectionsPerVisitor: 1 });
 * const first = gate.enter("127.0.0.2:5000");
 * console.assert(first.ok && !gate.enter("127.0.0.2:5001").ok);
 * console.assert(!gate.enter("127.0.0.3:5000").ok);
 * if (first.ok) first.leave();
 * ```
 *
 * @module
 */

import {
  formatIp,
  type IpAddress,
  parseIp,
  splitHostPort,
  unbracketHost,
  unmapIPv4,
} from "../../util/net/address.ts";
import { type Clock, monotonicClock, TokenBucket } from "../../util/timing/token_bucket.ts";
import { AddressRules, type VisitorPolicy } from "./visitor_policy.ts";

/** Why a visitor was refused: the counter it is counted under. */
export type PolicyRefusal =
  | "policy_address"
  | "policy_rate"
  | "policy_tunnel_rate"
  | "policy_visitor_connections"
  | "policy_not_allowed";

/** Every {@linkcode PolicyRefusal}, for counters that list them all. */
export const POLICY_REFUSALS: readonly PolicyRefusal[] = [
  "policy_address",
  "policy_rate",
  "policy_tunnel_rate",
  "policy_visitor_connections",
  // Every visitor of a tunnel whose client's rules the operator no longer allows (a reload).
  "policy_not_allowed",
];

/** Admitted (with what to call when the visitor goes), or refused and why. */
export type Entry = { ok: true; leave(): void } | { ok: false; reason: PolicyRefusal };

/** What a limited transfer spends its bytes against: `spend(n)` says how long to hold, in ms. */
export interface Throttle {
  /** Spends `n` bytes just moved; returns the milliseconds to hold before moving more. */
  spend(n: number): number;
}

/** The default bound of the per-address table. */
export const MAX_ADDRESSES = 10_000;

interface AddressEntry {
  active: number;
  bucket: TokenBucket | undefined;
}

/** The visitor's IP from a transport's `host:port` (or a bare host), if it is one. */
export function visitorIp(remote: string): IpAddress | undefined {
  const v4 = plainIPv4(remote);
  if (v4) return v4;
  const bare = parseIp(unbracketHost(remote));
  if (bare) return bare;
  const split = splitHostPort(remote);
  return split ? parseIp(split.host) : undefined;
}

/**
 * A canonical `a.b.c.d` or `a.b.c.d:port` read a character at a time (what nearly every visitor's
 * address is): the general parse splits and matches patterns, a microsecond a visitor. Anything
 * else (IPv6, a leading zero, an octet past 255) is left to it: undefined.
 */
function plainIPv4(remote: string): IpAddress | undefined {
  const bytes = new Uint8Array(4);
  let part = 0;
  let value = 0;
  let digits = 0;
  for (let i = 0; i < remote.length; i++) {
    const c = remote.charCodeAt(i);
    if (c >= 48 && c <= 57) {
      if (digits > 0 && value === 0) return undefined; // a leading zero
      value = value * 10 + c - 48;
      if (++digits > 3 || value > 255) return undefined;
    } else if (c === 46 && digits > 0 && part < 3) {
      bytes[part++] = value;
      value = 0;
      digits = 0;
    } else if (c === 58) break; // the port: not the address's
    else return undefined;
  }
  if (part !== 3 || digits === 0) return undefined;
  bytes[3] = value;
  return { family: 4, bytes };
}

/** A visitor's key in the per-address table: an IPv4 (or mapped) address as its number. */
function addressKey(ip: IpAddress | undefined, remote: string): string | number {
  if (!ip) return remote;
  const plain = unmapIPv4(ip);
  if (plain.family !== 4) return formatIp(plain);
  const b = plain.bytes;
  return ((b[0] << 24) | (b[1] << 16) | (b[2] << 8) | b[3]) >>> 0;
}

const ADMIT_ALL: Entry = { ok: true, leave: () => {} };

/** One tunnel's policy in force, with its tables and buckets. */
export class VisitorGate {
  #policy: VisitorPolicy = {};
  #rules: AddressRules | undefined;
  #tunnelRate: TokenBucket | undefined;
  #in: TokenBucket | undefined;
  #out: TokenBucket | undefined;
  #bandwidthGeneration = 0;
  /** By address: an IPv4 one as its 32-bit number (no text made per visitor), others as text. */
  readonly #addresses = new Map<string | number, AddressEntry>();
  readonly #now: Clock;
  readonly #maxAddresses: number;

  /** A gate for `policy` (parsed); `now` and `maxAddresses` are for tests. */
  constructor(
    policy: VisitorPolicy,
    options: { now?: Clock; maxAddresses?: number } = {},
  ) {
    this.#now = options.now ?? monotonicClock;
    this.#maxAddresses = options.maxAddresses ?? MAX_ADDRESSES;
    this.update(policy);
  }

  /** The policy in force. */
  get policy(): VisitorPolicy {
    return this.#policy;
  }

  /** Addresses remembered now (bounded by `maxAddresses` plus those with connections open). */
  get addresses(): number {
    return this.#addresses.size;
  }

  /**
   * Puts `policy` in force (a reload): connections open stay, counts and tokens carry over.
   * A rule removed costs nothing from then on.
   */
  update(policy: VisitorPolicy): void {
    this.#policy = policy;
    this.#rules = policy.allow || policy.deny ? new AddressRules(policy) : undefined;
    this.#tunnelRate = this.#bucket(this.#tunnelRate, policy.tunnelConnectionsPerSecond);
    const [formerIn, formerOut] = [this.#in, this.#out];
    this.#in = this.#bucket(this.#in, policy.bandwidth?.in);
    this.#out = this.#bucket(this.#out, policy.bandwidth?.out);
    // A rate changed keeps its bucket (what a throttle holds); one set or lifted does not.
    if (this.#in !== formerIn || this.#out !== formerOut) this.#bandwidthGeneration++;
    if (policy.connectionsPerSecond === undefined && policy.connectionsPerVisitor === undefined) {
      for (const [key, entry] of this.#addresses) {
        if (entry.active === 0) this.#addresses.delete(key);
      }
    }
    for (const entry of this.#addresses.values()) {
      entry.bucket = this.#bucket(entry.bucket, policy.connectionsPerSecond);
    }
  }

  /** Whether any per-visitor rule is set (else {@linkcode enter} admits everyone at no cost). */
  get idle(): boolean {
    const p = this.#policy;
    return !this.#rules && !this.#tunnelRate && p.connectionsPerSecond === undefined &&
      p.connectionsPerVisitor === undefined;
  }

  /**
   * A visitor from `remote` (`host:port`) asks to come in. The checks run cheapest and least
   * revealing first: address, the visitor's own rate, the tunnel's rate, then its connections.
   * A visitor whose address cannot be read is refused when there is an allow list.
   */
  enter(remote: string): Entry {
    if (this.idle) return ADMIT_ALL;
    const ip = visitorIp(remote);
    if (this.#rules && (ip ? !this.#rules.admits(ip) : this.#policy.allow !== undefined)) {
      return { ok: false, reason: "policy_address" };
    }
    const p = this.#policy;
    let entry: AddressEntry | undefined;
    // One reading of the clock for both rates (a clock read costs more than the rest of a take).
    const now = p.connectionsPerSecond !== undefined || this.#tunnelRate ? this.#now() : 0;
    if (p.connectionsPerSecond !== undefined || p.connectionsPerVisitor !== undefined) {
      entry = this.#entry(addressKey(ip, remote));
      if (entry.bucket && !entry.bucket.take(1, now)) return { ok: false, reason: "policy_rate" };
    }
    if (this.#tunnelRate && !this.#tunnelRate.take(1, now)) {
      return { ok: false, reason: "policy_tunnel_rate" };
    }
    if (entry && p.connectionsPerVisitor !== undefined && entry.active >= p.connectionsPerVisitor) {
      return { ok: false, reason: "policy_visitor_connections" };
    }
    if (!entry) return ADMIT_ALL;
    const admitted = entry;
    admitted.active++;
    let left = false;
    return {
      ok: true,
      leave: () => {
        if (left) return;
        left = true;
        admitted.active--;
      },
    };
  }

  /**
   * Changes whenever a bandwidth limit is set or lifted (a {@linkcode throttle} looked up before
   * may be stale), and only then: a long transfer compares it instead of looking up per chunk.
   */
  get bandwidthGeneration(): number {
    return this.#bandwidthGeneration;
  }

  /** What bytes from the visitor (`in`) or to it (`out`) are held by; undefined when unlimited. */
  throttle(direction: "in" | "out"): Throttle | undefined {
    // Looked up per transfer, not kept: a reload that lifts the limit frees the next transfers.
    const bucket = direction === "in" ? this.#in : this.#out;
    return bucket ? { spend: (n) => bucket.spend(n) } : undefined;
  }

  #bucket(old: TokenBucket | undefined, rate: number | undefined): TokenBucket | undefined {
    if (rate === undefined) return undefined;
    // A second's worth of burst: a rate of N lets N in at once, then N a second.
    if (old) return (old.set(rate, rate), old);
    return new TokenBucket(rate, rate, this.#now);
  }

  #entry(key: string | number): AddressEntry {
    let entry = this.#addresses.get(key);
    if (entry) {
      // Most recently seen last, so the oldest is the first to forget.
      this.#addresses.delete(key);
      this.#addresses.set(key, entry);
      return entry;
    }
    if (this.#addresses.size >= this.#maxAddresses) this.#forget();
    entry = { active: 0, bucket: this.#bucket(undefined, this.#policy.connectionsPerSecond) };
    this.#addresses.set(key, entry);
    return entry;
  }

  /** Forgets the least recently seen address without open connections (full buckets first). */
  #forget(): void {
    let idle: string | number | undefined;
    for (const [key, entry] of this.#addresses) {
      if (entry.active > 0) continue;
      if (!entry.bucket || entry.bucket.full) return void this.#addresses.delete(key);
      idle ??= key;
    }
    if (idle !== undefined) this.#addresses.delete(idle);
  }
}
