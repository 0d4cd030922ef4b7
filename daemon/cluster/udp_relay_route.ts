/**
 * A route to a UDP tunnel held on another node of the cluster (docs/design/udp.md): this node
 * binds the tunnel's UDP port too (one {@linkcode UdpPort} per port, shared with this node's own
 * routes and its relays to other routes of the port), and each flow the port gives this route
 * is one stream over the relay session to the holding node, with the `udpVisitor` header a
 * client would get; that node passes it on to its tunnel's client (`UdpTunnel.relayed`). Its
 * flows have the port's idle timeout and a flow limit of its own; drops are counted here.
 *
 * @module
 */

import type { PortClaim } from "../registry/registry.ts";
import type { Stream } from "../../protocol/stream.ts";
import { ResetReason } from "../../tunnel/stream/reset_reasons.ts";
import { encodeStreamHeader } from "../../tunnel/stream/stream_header.ts";
import {
  newUdpCounters,
  UDP_MAX_FLOWS,
  type UdpCounters,
  type UdpFlowWay,
} from "../../tunnel/udp/udp_flow.ts";
import { VisitorGate } from "../../tunnel/policy/visitor_gate.ts";
import { formatHostPort } from "../../util/net/address.ts";
import type { UdpRoute } from "../tunnels/udp_port.ts";
import type { StreamOpener } from "./peers.ts";

/** How to make a {@linkcode UdpRelayRoute}. */
export interface UdpRelayRouteOptions {
  /** The UDP claim it relays to: the tunnel, its visitor policy, and the node holding it. */
  claim: PortClaim;
  /** Opens streams on the relay session to `claim.node`. */
  opener: StreamOpener;
  /** Whether the way to the tunnel is up now (the relay session, the route's health record). */
  up: () => boolean;
  /** The address the port is bound on here (the flows' `local` address). */
  bindHost: string;
  /** Flows at once (default `UDP_MAX_FLOWS`); one more visitor's datagrams are dropped, counted. */
  maxFlows?: number;
}

/** This node's way to a UDP tunnel held on another node: a route on the port's socket here. */
export class UdpRelayRoute implements UdpRoute {
  /** The tunnel's id on its node. */
  readonly id: string;
  /** A relay is one hop more than a route of this node. */
  readonly local = false;
  /** Flows, datagrams and bytes each way, drops by reason (live). */
  readonly udp: UdpCounters = newUdpCounters();
  readonly #options: UdpRelayRouteOptions;
  readonly #gate: VisitorGate;
  readonly #local: string;
  /** Its flows' streams, reset when it closes. */
  readonly #streams = new Set<Stream>();
  #accepting = true;

  /** A route to `options.claim`; the caller attaches it to the port's {@linkcode UdpPort}. */
  constructor(options: UdpRelayRouteOptions) {
    this.#options = options;
    this.id = options.claim.tunnel;
    this.#gate = new VisitorGate(options.claim.policy ?? {});
    this.#local = formatHostPort(options.bindHost, options.claim.port);
  }

  /** Taking new flows: not stopped, and the way to the tunnel up. */
  get healthy(): boolean {
    return this.#accepting && this.#options.up();
  }

  /** Flows open now. */
  get active(): number {
    return this.udp.flowsOpen;
  }

  /**
   * A new flow of `remote`: the tunnel's address and rate rules apply here, so a refused visitor
   * costs no relay stream (the holding node asks its own gate again, and counts the flow there).
   */
  flow(remote: string): UdpFlowWay | undefined {
    if (this.udp.flowsOpen >= (this.#options.maxFlows ?? UDP_MAX_FLOWS)) {
      this.udp.drops.flow_limit++;
      return undefined;
    }
    const entry = this.healthy ? this.#gate.enter(remote) : undefined;
    if (!entry?.ok) {
      this.udp.drops.refused++;
      return undefined;
    }
    let opened: Stream | undefined;
    return {
      counters: this.udp,
      openStream: () => {
        const stream = this.#options.opener.open();
        stream.write(encodeStreamHeader({
          kind: "udpVisitor",
          tunnel: this.id,
          remote,
          local: this.#local,
        }));
        this.#streams.add(opened = stream);
        return stream;
      },
      leave: () => {
        if (opened) this.#streams.delete(opened);
        entry.leave();
      },
    };
  }

  /** The tunnel's rules changed on its node: the next new flows here meet them. */
  update(claim: PortClaim): void {
    this.#gate.update(claim.policy ?? {});
  }

  /** Takes no new flows; open ones go on until they end. Idempotent. */
  stopAccepting(): void {
    this.#accepting = false;
  }

  /** Takes no new flows and ends its open ones (their visitors' next datagrams go elsewhere). */
  close(): void {
    this.#accepting = false;
    for (const stream of [...this.#streams]) stream.reset(ResetReason.UnknownTunnel);
  }
}
