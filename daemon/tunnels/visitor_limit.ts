/**
 * How many visitors a client's tunnels take at once on this node: each tunnel at most
 * `limits.visitorsPerTunnel`, and all of one client's tunnels together at most its
 * `limits.visitors` (capped by `limits.visitorsPerClient`). A visitor past either is refused at
 * once (closed, or a relayed stream reset) and counted; it never waits. The caps are read per
 * visitor, so a reload applies to the next one. HTTP requests on the shared HTTP port are bounded
 * there (`limits.httpConnections`), not here.
 *
 * @example
 * ```ts
 * import { VisitorAccounts } from "./visitor_limit.ts";
 * const accounts = new VisitorAccounts(() => 2);
 * const alice = accounts.of("alice");
 * console.assert(alice.take() && alice.take() && !alice.take());
 * alice.give();
 * console.assert(alice.take());
 * ```
 *
 * @module
 */

import type { PolicyRefusal } from "../../tunnel/policy/visitor_gate.ts";
import { type Clock, TokenBucket } from "../../util/timing/token_bucket.ts";

/** Why a visitor was refused: the counter it is counted under. */
export type VisitorRefusal = "tunnel_visitor_limit" | "client_visitor_limit" | PolicyRefusal;

/** One client's visitors on this node, across its tunnels, against its cap. */
export class ClientVisitors {
  #active = 0;
  readonly #cap: () => number;
  readonly #now: Clock | undefined;
  #in: TokenBucket | undefined;
  #out: TokenBucket | undefined;
  #bandwidthGeneration = 0;

  /** An account whose cap `cap()` gives, read at each {@linkcode take}; `now` is for tests. */
  constructor(cap: () => number, now?: Clock) {
    this.#cap = cap;
    this.#now = now;
  }

  /**
   * Puts the client's bandwidth in force, bytes per second each way through all its tunnels on
   * this node (absent: none); tokens carry over a change.
   */
  setBandwidth(bandwidth: { in?: number; out?: number } | undefined): void {
    const bucket = (old: TokenBucket | undefined, rate: number | undefined) => {
      if (rate === undefined) return undefined;
      if (old) return (old.set(rate, rate), old);
      return new TokenBucket(rate, rate, this.#now);
    };
    const [formerIn, formerOut] = [this.#in, this.#out];
    this.#in = bucket(this.#in, bandwidth?.in);
    this.#out = bucket(this.#out, bandwidth?.out);
    // A rate changed keeps its bucket (what a throttle holds); one set or lifted does not.
    if (this.#in !== formerIn || this.#out !== formerOut) this.#bandwidthGeneration++;
  }

  /**
   * Changes whenever the client's bandwidth is set or lifted (a {@linkcode throttle} looked up
   * before may be stale), and only then: a long transfer compares it instead of looking up per
   * chunk.
   */
  get bandwidthGeneration(): number {
    return this.#bandwidthGeneration;
  }

  /** What the client's bytes `in` (visitor → service) or `out` are held by; undefined: nothing. */
  throttle(direction: "in" | "out"): { spend(n: number): number } | undefined {
    const bucket = direction === "in" ? this.#in : this.#out;
    return bucket ? { spend: (n) => bucket.spend(n) } : undefined;
  }

  /** Visitors connected now. */
  get active(): number {
    return this.#active;
  }

  /** Counts one more visitor, unless the cap is reached (then false, and nothing counted). */
  take(): boolean {
    if (this.#active >= this.#cap()) return false;
    this.#active++;
    return true;
  }

  /** A visitor {@linkcode take} counted has gone. */
  give(): void {
    if (this.#active > 0) this.#active--;
  }
}

/** The visitor accounts of this node's clients, by name: one per client, made on first use. */
export class VisitorAccounts {
  readonly #accounts = new Map<string, ClientVisitors>();
  readonly #caps = new Map<string, number>();
  readonly #bandwidth = new Map<string, { in?: number; out?: number }>();
  readonly #fallback: () => number;
  readonly #now: Clock | undefined;

  /**
   * Accounts whose caps are set by {@linkcode setCaps}, `fallback()` for a client not set; `now`
   * is for tests.
   */
  constructor(fallback: () => number, now?: Clock) {
    this.#fallback = fallback;
    this.#now = now;
  }

  /** Puts each client's cap and bandwidth in force (a start, a reload, a mint or a revocation). */
  setCaps(
    clients: readonly {
      name: string;
      limits: { visitors: number; bandwidth?: { in?: number; out?: number } };
    }[],
  ): void {
    this.#caps.clear();
    this.#bandwidth.clear();
    for (const client of clients) {
      this.#caps.set(client.name, client.limits.visitors);
      if (client.limits.bandwidth) this.#bandwidth.set(client.name, client.limits.bandwidth);
    }
    for (const [name, account] of this.#accounts) account.setBandwidth(this.#bandwidth.get(name));
  }

  /** The account of `client`. */
  of(client: string): ClientVisitors {
    let account = this.#accounts.get(client);
    if (!account) {
      account = new ClientVisitors(() => this.#caps.get(client) ?? this.#fallback(), this.#now);
      account.setBandwidth(this.#bandwidth.get(client));
      this.#accounts.set(client, account);
    }
    return account;
  }
}

/** What a tunnel checks each visitor against. */
export interface VisitorLimit {
  /** The tunnel's cap, read per visitor. */
  perTunnel(): number;
  /** Its client's account on this node. */
  client: ClientVisitors;
  /** Counts a refusal (a policy's with the tunnel and the visitor, for the event feed). */
  refused(reason: VisitorRefusal, detail?: { tunnel: string; visitor: string }): void;
}
