/**
 * UDP reverse tunnels: a client's tunnel whose public port is a UDP socket (docs/design/udp.md).
 * Each visitor address is a flow, admitted by the tunnel's visitor policy and limits exactly as a
 * TCP visitor connection is (a flow counts as one connection of its visitor while it lasts), with
 * a `udpVisitor` stream of its own to the client. The bandwidth limits police datagrams: over
 * them a datagram is dropped, where a TCP visitor would be held. A flow that cannot keep up drops datagrams,
 * counted; nothing waits on a stream, so no flow holds up another or the session. The port's
 * socket is a {@linkcode UdpPort}, which a group's members (and relays in a cluster) share: each
 * new flow is given to one of them and stays on it.
 *
 * @module
 */

import type { Session } from "../../protocol/session.ts";
import type { Stream } from "../../protocol/stream.ts";
import type { Transport } from "../../protocol/transport.ts";
import { ResetReason } from "../../tunnel/stream/reset_reasons.ts";
import { encodeStreamHeader } from "../../tunnel/stream/stream_header.ts";
import { splice, streamEnd } from "../../tunnel/splice.ts";
import {
  addUdpCounters,
  newUdpCounters,
  UDP_MAX_FLOWS,
  type UdpCounters,
  type UdpFlowWay,
  udpPolicer,
} from "../../tunnel/udp/udp_flow.ts";
import { formatHostPort } from "../../util/net/address.ts";
import { ReverseTunnel, type ReverseTunnelOptions } from "./reverse_tunnel.ts";
import { UdpPort, type UdpRoute } from "./udp_port.ts";

/** How to open a UDP tunnel: a reverse tunnel's options and the flows' limits. */
export interface UdpTunnelOptions extends Omit<ReverseTunnelOptions, "host" | "passthrough"> {
  /** A flow with no datagram either way for this long ends (default `UDP_FLOW_IDLE_MS`). */
  idleMs?: number;
  /** Its flows at once (default `UDP_MAX_FLOWS`); one more visitor's datagrams are dropped. */
  maxFlows?: number;
  /** The daemon's totals of closed UDP tunnels: the tunnel's counts are added there as it closes. */
  totals?: UdpCounters;
  /**
   * The port's socket, shared with the port's other routes (the caller attaches the tunnel to
   * it); default: a port of its own, bound at `bindHost:port` and closed with the tunnel.
   */
  udpPort?: UdpPort;
}

/** A client's UDP tunnel on this node. Create with {@linkcode UdpTunnel.open}. */
export class UdpTunnel extends ReverseTunnel implements UdpRoute {
  override readonly protocol = "udp" as const;
  /** Flows, datagrams and bytes each way, drops by reason (live). */
  override readonly udp: UdpCounters;
  readonly #session: Pick<Session, "open">;
  readonly #totals: UdpCounters | undefined;
  readonly #maxFlows: number;
  readonly #police: NonNullable<UdpFlowWay["police"]>;
  /** The port it opened for itself, closed with it; undefined when it shares one. */
  #ownPort: UdpPort | undefined;
  /** Its flows on the port, by stream, with their visitor addresses. */
  readonly #flows = new Map<Stream, string>();
  /** Flows relayed from other nodes of the cluster, reset when the tunnel closes. */
  readonly #relayedFlows = new Set<Stream>();
  #closed = false;

  private constructor(options: UdpTunnelOptions, counters: UdpCounters) {
    super(options);
    this.udp = counters;
    this.#session = options.session;
    this.#totals = options.totals;
    this.#maxFlows = options.maxFlows ?? UDP_MAX_FLOWS;
    // The tunnel's bandwidth and its client's, as for TCP; a datagram over it is dropped. As
    // they are at each datagram, looked up again only when a rule was set or lifted.
    const [limitIn, limitOut] = [this.liveThrottle("in"), this.liveThrottle("out")];
    this.#police = {
      in: udpPolicer(() => limitIn.current()),
      out: udpPolicer(() => limitOut.current()),
    };
    // The tunnel's counters, as every tunnel shows them: a flow is a visitor connection.
    const udp = counters;
    Object.defineProperties(this.stats, {
      connections: { get: () => udp.flows, enumerable: true },
      active: { get: () => udp.flowsOpen, enumerable: true },
      aToB: { get: () => udp.bytesIn, enumerable: true },
      bToA: { get: () => udp.bytesOut, enumerable: true },
    });
  }

  /**
   * A tunnel on `options.udpPort`, or on a port of its own bound at `bindHost:port`; rejects when
   * that cannot be bound (in use, not an address here).
   */
  static async open(options: UdpTunnelOptions): Promise<UdpTunnel> {
    const own = options.udpPort ? undefined : await UdpPort.open({
      bindHost: options.bindHost,
      port: options.port,
      idleMs: options.idleMs,
    });
    const port = options.udpPort ?? own!;
    const tunnel = new UdpTunnel({ ...options, port: port.port }, newUdpCounters());
    if (own) {
      tunnel.#ownPort = own;
      own.attach(tunnel);
    }
    return tunnel;
  }

  /** The visitor addresses with a flow on this tunnel now. */
  get flows(): string[] {
    return [...this.#flows.values()];
  }

  /** A TCP visitor has no place on a UDP port: closed at once. */
  override visitor(visitor: Transport): void {
    visitor.close();
  }

  /** No HTTP request is ever sent to a UDP port: none taken. */
  override open(_remote: string, _local: string): Stream | undefined {
    return undefined;
  }

  /**
   * A new flow of `remote` its port gave it: past its flow limit, or refused by its policy and
   * limits (as a TCP visitor would be), the datagram is dropped and counted here.
   */
  flow(remote: string): UdpFlowWay | undefined {
    if (this.#closed || this.udp.flowsOpen >= this.#maxFlows) {
      this.udp.drops[this.#closed ? "refused" : "flow_limit"]++;
      return undefined;
    }
    const left = this.#admitFlow(remote);
    if (!left) {
      this.udp.drops.refused++;
      return undefined;
    }
    let opened: Stream | undefined;
    return {
      counters: this.udp,
      police: this.#police,
      openStream: () => {
        opened = this.#openFlow(remote);
        this.#flows.set(opened, remote);
        return opened;
      },
      leave: () => {
        if (opened) this.#flows.delete(opened);
        left();
      },
    };
  }

  /**
   * A flow that another node of the cluster took on this tunnel's port and relays here as
   * `stream` (datagrams framed as the client reads them; `rest`: bytes read with its header):
   * admitted as a new flow of `remote` is, then spliced to a `udpVisitor` stream to the client,
   * bytes copied without parsing datagrams (its bytes count their 2-byte length prefixes).
   */
  override relayed(stream: Stream, remote: string, _local: string, rest: Uint8Array): void {
    if (this.#closed) return stream.reset(ResetReason.UnknownTunnel);
    const left = this.#admitFlow(remote);
    if (!left) {
      this.udp.drops.refused++;
      return stream.reset(ResetReason.LimitReached);
    }
    let toClient: Stream;
    try {
      toClient = this.#openFlow(remote);
    } catch {
      left();
      this.udp.drops.send_failed++;
      return stream.reset(ResetReason.LimitReached);
    }
    this.udp.flows++;
    this.udp.flowsOpen++;
    this.#relayedFlows.add(stream);
    const bytes = { aToB: 0, bToA: 0 };
    void splice(streamEnd(stream), streamEnd(toClient), {
      aFirst: rest,
      counters: bytes,
      throttle: this.throttle(),
    }).finally(() => {
      this.#relayedFlows.delete(stream);
      this.udp.flowsOpen--;
      this.udp.bytesIn += bytes.aToB;
      this.udp.bytesOut += bytes.bToA;
      left();
    });
  }

  /**
   * Ends its flows (a visitor's next datagram opens a new flow on a route that is left) and, if
   * the port is its own, releases it; its counts go to the daemon's totals. Idempotent.
   */
  override close(): void {
    super.close();
    if (this.#closed) return;
    this.#closed = true;
    this.#ownPort?.detach(this);
    void this.#ownPort?.close();
    for (const stream of [...this.#flows.keys()]) stream.reset(ResetReason.UnknownTunnel);
    for (const stream of this.#relayedFlows) stream.reset(ResetReason.UnknownTunnel);
    if (this.#totals) addUdpCounters(this.#totals, this.udp, false);
  }

  /** A new visitor address: the policy and limits decide, as for a TCP visitor. */
  #admitFlow(remote: string): (() => void) | undefined {
    if (!this.healthy) return undefined;
    return this.admit(remote);
  }

  /** The flow's stream to the client, with its `udpVisitor` header. */
  #openFlow(remote: string): Stream {
    const stream = this.#session.open();
    const local = formatHostPort(this.bindHost, this.port);
    stream.write(encodeStreamHeader({ kind: "udpVisitor", tunnel: this.id, remote, local }));
    return stream;
  }
}
