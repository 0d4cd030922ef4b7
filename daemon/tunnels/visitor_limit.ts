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

/** Why a visitor was refused: the counter it is counted under. */
export type VisitorRefusal = "tunnel_visitor_limit" | "client_visitor_limit" | PolicyRefusal;

/** One client's visitors on this node, across its tunnels, against its cap. */
export class ClientVisitors {
  #active = 0;
  readonly #cap: () => number;

  /** An account whose cap `cap()` gives, read at each {@linkcode take}. */
  constructor(cap: () => number) {
    this.#cap = cap;
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
  readonly #fallback: () => number;

  /** Accounts whose caps are set by {@linkcode setCaps}, `fallback()` for a client not set. */
  constructor(fallback: () => number) {
    this.#fallback = fallback;
  }

  /** Puts each client's cap in force (a start, a reload, a mint or a revocation). */
  setCaps(clients: readonly { name: string; limits: { visitors: number } }[]): void {
    this.#caps.clear();
    for (const client of clients) this.#caps.set(client.name, client.limits.visitors);
  }

  /** The account of `client`. */
  of(client: string): ClientVisitors {
    let account = this.#accounts.get(client);
    if (!account) {
      account = new ClientVisitors(() => this.#caps.get(client) ?? this.#fallback());
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
