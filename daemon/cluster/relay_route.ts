/**
 * A route to a tunnel held on another node of the cluster: visitors of a port this node listens
 * on for that tunnel, requests and TLS connections for a host name that node holds. Each visitor
 * becomes a stream on the relay session to the holding node, with the same `visitor` header a
 * client would get (`tunnels/visitor_streams.ts`); that node passes it on to its tunnel's client
 * (`ReverseTunnel.relayed`). The one kind of relay the cluster makes, for ports and names alike.
 *
 * @module
 */

import type { Stream } from "../../protocol/stream.ts";
import type { Transport } from "../../protocol/transport.ts";
import type { Logger } from "../../util/log.ts";
import type { RouteClaim, TunnelStats } from "../registry/registry.ts";
import { VisitorStreams } from "../tunnels/visitor_streams.ts";
import type { StreamOpener } from "./peers.ts";

/** How to make a {@linkcode RelayRoute}. */
export interface RelayRouteOptions {
  /** The claim it relays to: the tunnel, its client and owner, and the node holding it. */
  claim: RouteClaim;
  /** Opens streams on the relay session to `claim.node`. */
  opener: StreamOpener;
  /**
   * Whether the way to the tunnel is up now: the relay session to its node (a dead node's routes
   * take no visitors even before its presence expires), and the route's own health record.
   */
  up: () => boolean;
  /** The address visitors arrive on here: the bound address, or for a name, the name. */
  bindHost: string;
  /** The port visitors arrive on here (0 for a name, reached on the shared HTTP(S) ports). */
  port: number;
  /** For a host name's route: whether the tunnel is a TLS one (connections passed through). */
  passthrough?: boolean;
  /** Logger. */
  log: Logger;
}

/** A route of this node to a tunnel held on another node. */
export class RelayRoute {
  /** The tunnel's id in its node. */
  readonly id: string;
  /** The tunnel's client. */
  readonly client: string;
  /** Who holds the tunnel's port or name. */
  readonly owner: string | undefined;
  /** The node holding the tunnel. */
  readonly node: string;
  /** The address visitors arrive on here. */
  readonly bindHost: string;
  /** The port visitors arrive on here (0 for a name). */
  readonly port: number;
  /** A TLS tunnel's name: connections are passed through, never HTTP requests. */
  readonly passthrough: boolean;
  /** Always false: a relay is a hop to another node, chosen after this node's own routes. */
  readonly local = false;
  readonly #up: () => boolean;
  readonly #visitors: VisitorStreams;

  /** A route over `options.opener` to the tunnel `options.claim` names. */
  constructor(options: RelayRouteOptions) {
    const { claim } = options;
    this.id = claim.tunnel;
    this.client = claim.client;
    this.owner = claim.owner;
    this.node = claim.node;
    this.bindHost = options.bindHost;
    this.port = options.port;
    this.passthrough = options.passthrough ?? false;
    this.#up = options.up;
    this.#visitors = new VisitorStreams(
      claim.tunnel,
      options.opener,
      options.log.child({ relayTo: claim.node, tunnel: claim.tunnel }),
    );
  }

  /** Live counters: `aToB` visitor → owning node, `bToA` back. */
  get stats(): Readonly<TunnelStats> {
    return this.#visitors.stats;
  }

  /** Whether it takes visitors: open, and the way to the holding node up. */
  get healthy(): boolean {
    return !this.#visitors.closed && this.#up();
  }

  /** Visitors in flight now (for balancing, and to know when a closed relay has drained). */
  get active(): number {
    return this.#visitors.stats.active;
  }

  /** Takes no more visitors; those connected go on until they end (or the relay session does). */
  stopAccepting(): void {
    this.#visitors.stopAccepting();
  }

  /** Takes no more visitors and disconnects the connected ones. */
  close(): void {
    this.#visitors.close();
  }

  /** A visitor connection: a new stream to the holding node. */
  visitor(visitor: Transport): void {
    this.#visitors.visitor(visitor);
  }

  /** A stream to the holding node for one HTTP request, or undefined when the way is down. */
  open(remote: string, local: string): Stream | undefined {
    if (!this.healthy) return undefined;
    return this.#visitors.open(remote, local);
  }
}
