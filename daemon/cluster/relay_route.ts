/**
 * A route to a tunnel held on another node of the cluster: visitors of a port this node listens
 * on for that tunnel, requests and TLS connections for a host name that node holds. Each visitor
 * becomes a stream on the relay session to the holding node, with the same `visitor` header a
 * client would get (`tunnels/stream_route.ts`); that node passes it on to its tunnel's client
 * (`ReverseTunnel.relayed`). The one kind of relay the cluster makes, for ports and names alike.
 *
 * @module
 */

import type { Logger } from "../../util/log.ts";
import type { RouteClaim } from "../registry/registry.ts";
import { StreamRoute } from "../tunnels/stream_route.ts";
import { HttpGate } from "../http/http_gate.ts";
import type { HttpPolicy } from "../../tunnel/policy/http_policy.ts";
import { type Entry, VisitorGate } from "../../tunnel/policy/visitor_gate.ts";
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
  /** For an HTTP tunnel's name: its `policy.http`, applied by this node's HTTP front. */
  httpPolicy?: HttpPolicy;
  /**
   * Whether this node may fetch `url` for a JWT or OIDC rule of `httpPolicy` (its own operator's
   * `identityProviders` or rules); asked per request, so a reload here applies at once. Absent:
   * any URL the record names.
   */
  mayFetch?: (url: string) => boolean;
  /** Logger. */
  log: Logger;
}

/** A route of this node to a tunnel held on another node. */
export class RelayRoute extends StreamRoute {
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
  readonly #up: () => boolean;
  readonly #mayFetch: ((url: string) => boolean) | undefined;
  #gate: HttpGate | undefined;
  #httpText: string;
  readonly #visitors: VisitorGate;

  /** A route over `options.opener` to the tunnel `options.claim` names. */
  constructor(options: RelayRouteOptions) {
    const { claim } = options;
    const log = options.log.child({ relayTo: claim.node, tunnel: claim.tunnel });
    super(claim.tunnel, options.opener, false, log);
    this.client = claim.client;
    this.owner = claim.owner;
    this.node = claim.node;
    this.bindHost = options.bindHost;
    this.port = options.port;
    this.passthrough = options.passthrough ?? false;
    this.#gate = options.httpPolicy && new HttpGate(options.httpPolicy);
    this.#httpText = JSON.stringify(options.httpPolicy ?? null);
    this.#visitors = new VisitorGate(claim.policy ?? {});
    this.#up = options.up;
    this.#mayFetch = options.mayFetch;
  }

  /** The HTTP front's gate for the tunnel's `policy.http`, if it has one (read per request). */
  get gate(): HttpGate | undefined {
    return this.#gate;
  }

  /**
   * The tunnel's rules changed on its node (its record, as watched): the next requests here meet
   * them. The gate is made again only when `policy.http` changed (it keeps verified credentials).
   */
  update(claim: RouteClaim, httpPolicy: HttpPolicy | undefined): void {
    const text = JSON.stringify(httpPolicy ?? null);
    if (text !== this.#httpText) {
      this.#gate = httpPolicy && new HttpGate(httpPolicy);
      this.#httpText = text;
    }
    this.#visitors.update(claim.policy ?? {});
  }

  /**
   * Checks an HTTP request's visitor against the tunnel's address rules here, so a refused one
   * gets the same 403 (or 429) page as on the tunnel's own node; the holding node checks again.
   */
  enter(remote: string): Entry {
    // A provider this node's operator does not allow: refused before the gate could fetch from it.
    const url = this.#gate?.policy.jwt?.jwksUrl ?? this.#gate?.policy.oidc?.issuer;
    if (url !== undefined && this.#mayFetch && !this.#mayFetch(url)) {
      return { ok: false, reason: "policy_not_allowed" };
    }
    return this.#visitors.enter(remote);
  }

  /** Whether it takes visitors: open, and the way to the holding node up. */
  override get healthy(): boolean {
    return super.healthy && this.#up();
  }
}
