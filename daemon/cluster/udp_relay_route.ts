/**
 * A route to a UDP tunnel held on another node of the cluster (docs/design/udp.md): this node
 * binds the tunnel's UDP port too, and each visitor address that sends here becomes a flow whose
 * stream goes over the relay session to the holding node, with the `udpVisitor` header a client
 * would get; that node passes it on to its tunnel's client (`UdpTunnel.relayed`). The flows are a
 * {@linkcode UdpFlowTable}'s, as on the holding node: idle timeout, flow limit, drops counted.
 *
 * @module
 */

import type { PortClaim } from "../registry/registry.ts";
import { encodeStreamHeader } from "../../tunnel/stream_header.ts";
import { newUdpCounters, type UdpCounters, UdpFlowTable } from "../../tunnel/udp_flow.ts";
import { VisitorGate } from "../../tunnel/policy/visitor_gate.ts";
import { formatHostPort } from "../../util/address.ts";
import type { StreamOpener } from "./peers.ts";

/** How to open a {@linkcode UdpRelayRoute}. */
export interface UdpRelayRouteOptions {
  /** The UDP claim it relays to: the tunnel, its visitor policy, and the node holding it. */
  claim: PortClaim;
  /** Opens streams on the relay session to `claim.node`. */
  opener: StreamOpener;
  /** Whether the way to the tunnel is up now (the relay session, the route's health record). */
  up: () => boolean;
  /** The address to bind the port on. */
  bindHost: string;
  /** A flow with no datagram either way for this long ends (default: the table's). */
  idleMs?: number;
  /** Flows at once (default: the table's); one more visitor's datagrams are dropped, counted. */
  maxFlows?: number;
}

/** This node's UDP port for a tunnel held on another node. Create with {@linkcode open}. */
export class UdpRelayRoute {
  /** Flows, datagrams and bytes each way, drops by reason (live). */
  readonly udp: UdpCounters;
  readonly #table: UdpFlowTable;
  readonly #gate: VisitorGate;
  #accepting = true;

  private constructor(table: UdpFlowTable, gate: VisitorGate, counters: UdpCounters) {
    this.#table = table;
    this.#gate = gate;
    this.udp = counters;
  }

  /** Binds UDP `options.bindHost:claim.port`; rejects when it cannot be bound. */
  static async open(options: UdpRelayRouteOptions): Promise<UdpRelayRoute> {
    const { claim } = options;
    const counters = newUdpCounters();
    const gate = new VisitorGate(claim.policy ?? {});
    const ref: { route?: UdpRelayRoute } = {};
    const local = formatHostPort(options.bindHost, claim.port);
    const table = await UdpFlowTable.open({
      hostname: options.bindHost,
      port: claim.port,
      idleMs: options.idleMs,
      maxFlows: options.maxFlows,
      counters,
      // The tunnel's address and rate rules here, so a refused visitor costs no relay stream;
      // the holding node asks its own gate again (and counts the flow as a connection there).
      admit: (remote) => {
        const route = ref.route;
        if (!route || !route.#accepting || !options.up()) return undefined;
        const entry = route.#gate.enter(remote);
        return entry.ok ? entry.leave : undefined;
      },
      openStream: (remote) => {
        const stream = options.opener.open();
        stream.write(
          encodeStreamHeader({ kind: "udpVisitor", tunnel: claim.tunnel, remote, local }),
        );
        return stream;
      },
    });
    const route = new UdpRelayRoute(table, gate, counters);
    ref.route = route;
    return route;
  }

  /** Flows open now. */
  get active(): number {
    return this.udp.flowsOpen;
  }

  /** The tunnel's rules changed on its node: the next new flows here meet them. */
  update(claim: PortClaim): void {
    this.#gate.update(claim.policy ?? {});
  }

  /** Takes no new flows; open ones go on until they end. Idempotent. */
  stopAccepting(): void {
    this.#accepting = false;
  }

  /** Ends every flow and releases the port. Idempotent. */
  close(): void {
    this.#accepting = false;
    this.#table.close();
  }
}
