/**
 * UDP ASSOCIATE on the SOCKS front (RFC 1928, sections 4 and 7): a UDP relay socket per
 * association, on the address the client reached the front at. Each datagram's header names its
 * target; each target of an association is one UDP flow through the daemon (a `udpForward`
 * stream, docs/design/udp.md), checked against the client's forward allowlist there when it opens,
 * names resolved there. Replies come back behind a header naming the target as the client did.
 *
 * Only the association's client may use it: datagrams must come from the control connection's IP
 * and, once known, one port (the port given in the request, or that of the first datagram).
 * Fragments (FRAG other than 0) are not served. Every datagram not carried is dropped and counted:
 * from a foreign address, malformed, a fragment, to a refused target, over the targets' bound, or
 * behind a flow that cannot keep up. Nothing waits on a stream.
 *
 * @module
 */

import type { Stream } from "../../protocol/stream.ts";
import { openUdp, type UdpSocket } from "../../transport/udp.ts";
import { ResetReason } from "../../tunnel/stream/reset_reasons.ts";
import { DatagramDecoder, DatagramSender, UdpFramingError } from "../../tunnel/udp/udp_framing.ts";
import { formatIp, parseIp, unmapIPv4 } from "../../util/net/address.ts";
import { ClientError, describeStreamError } from "../errors.ts";
import { encodeSocksUdp, parseSocksUdp, type SocksTarget } from "./socks_parser.ts";

/** Why a datagram of an association was not carried. */
export type SocksUdpDrop =
  | "foreign"
  | "malformed"
  | "fragmented"
  | "refused"
  | "target_limit"
  | "queue_full"
  | "too_large"
  | "send_failed";

/** What the UDP associations of one SOCKS front did. */
export interface SocksUdpStats {
  /** Associations made so far. */
  associations: number;
  /** Associations open now. */
  active: number;
  /** Targets the daemon refused (not allowed, not resolved, not reachable). */
  refusedTargets: number;
  /** Datagrams from clients put on a flow toward their target. */
  datagramsIn: number;
  /** Datagrams from targets sent back to clients. */
  datagramsOut: number;
  /** Payload bytes of `datagramsIn`. */
  bytesIn: number;
  /** Payload bytes of `datagramsOut`. */
  bytesOut: number;
  /** Datagrams dropped, by reason. */
  dropped: Record<SocksUdpDrop, number>;
}

/** Fresh zero counters. */
export function newSocksUdpStats(): SocksUdpStats {
  return {
    associations: 0,
    active: 0,
    refusedTargets: 0,
    datagramsIn: 0,
    datagramsOut: 0,
    bytesIn: 0,
    bytesOut: 0,
    dropped: {
      foreign: 0,
      malformed: 0,
      fragmented: 0,
      refused: 0,
      target_limit: 0,
      queue_full: 0,
      too_large: 0,
      send_failed: 0,
    },
  };
}

/** How long an association lives with no datagram either way, by default. */
export const SOCKS_UDP_IDLE_MS = 60_000;

/** Targets one association may have at once, by default. */
export const SOCKS_UDP_MAX_TARGETS = 32;

/** Resets that say the daemon will not carry this target: its later datagrams are dropped. */
const REFUSALS = new Set<number>([
  ResetReason.NotAllowed,
  ResetReason.LoopbackDenied,
  ResetReason.MetadataDenied,
  ResetReason.AddressDenied,
  ResetReason.ResolveFailed,
  ResetReason.DialFailed,
  ResetReason.NetworkUnreachable,
  ResetReason.BadHeader,
]);

/** An address's canonical text (IPv4-mapped IPv6 as IPv4), or the text itself when not an IP. */
export function canonicalIp(host: string): string {
  const bare = host.startsWith("[") && host.endsWith("]") ? host.slice(1, -1) : host;
  const ip = parseIp(bare);
  return ip ? formatIp(unmapIPv4(ip)) : bare;
}

/** Options of {@linkcode openSocksUdp}. */
export interface SocksUdpOptions {
  /** The address to bind the relay socket to: where the client reached the front. */
  bindHost: string;
  /** The control connection's peer IP: the only one whose datagrams are taken. */
  clientIp: string;
  /** The port the client said it sends from, 0 when it did not say. */
  clientPort: number;
  /** Opens a target's flow stream (throws when no session can take one). */
  openUdp: (target: string) => Stream;
  /** Closes the association after this long with no datagram either way. */
  idleMs: number;
  /** Targets at once; a datagram to one more is dropped. */
  maxTargets: number;
  /** Counters of the front. */
  stats: SocksUdpStats;
  /** A target refused, a flow failed. */
  onError: (error: ClientError) => void;
  /** The association went idle: the owner closes the control connection. */
  onIdle: () => void;
}

interface Flow {
  target: SocksTarget;
  stream: Stream;
  sender: DatagramSender;
  refused: boolean;
}

/** One association's relay socket and its targets' flows. */
export class SocksUdpAssociation {
  readonly #socket: UdpSocket;
  readonly #options: SocksUdpOptions;
  readonly #flows = new Map<string, Flow>();
  /** The client's sending address as the socket reports it, once known. */
  #clientHost: string | undefined;
  #clientPort: number;
  #lastActive = Date.now();
  #timer: ReturnType<typeof setTimeout> | undefined;
  #closed = false;

  private constructor(socket: UdpSocket, options: SocksUdpOptions) {
    this.#socket = socket;
    this.#options = options;
    this.#clientPort = options.clientPort;
  }

  /** Binds the relay socket; rejects when it cannot be bound (or UDP is not available here). */
  static async open(options: SocksUdpOptions): Promise<SocksUdpAssociation> {
    const ref: { association?: SocksUdpAssociation } = {};
    const socket = await openUdp({
      hostname: options.bindHost,
      port: 0,
      // Nothing can arrive before the reply gives the port away, save a guess: dropped as foreign.
      onMessage: (bytes, remote) => {
        if (ref.association) ref.association.#received(bytes, remote);
        else options.stats.dropped.foreign++;
      },
    });
    const association = new SocksUdpAssociation(socket, options);
    ref.association = association;
    options.stats.associations++;
    options.stats.active++;
    association.#armIdle();
    return association;
  }

  /** The relay socket's address and port: what the reply to UDP ASSOCIATE names. */
  get local(): { hostname: string; port: number } {
    return this.#socket.local;
  }

  /** Targets with a flow (or a refusal) now, as `host:port`. */
  get targets(): string[] {
    return [...this.#flows.keys()];
  }

  /** Ends every flow and closes the socket; idempotent. */
  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    clearTimeout(this.#timer);
    for (const flow of this.#flows.values()) {
      flow.stream.onClose = null;
      flow.stream.end();
    }
    this.#flows.clear();
    this.#socket.close();
    this.#options.stats.active--;
  }

  #received(bytes: Uint8Array, remote: { hostname: string; port: number }): void {
    if (this.#closed) return;
    const { stats } = this.#options;
    if (
      canonicalIp(remote.hostname) !== this.#options.clientIp ||
      (this.#clientPort !== 0 && remote.port !== this.#clientPort)
    ) {
      stats.dropped.foreign++;
      return;
    }
    // The first datagram fixes the client's port when the request did not name it.
    this.#clientPort = remote.port;
    this.#clientHost = remote.hostname;
    const datagram = parseSocksUdp(bytes);
    if (typeof datagram === "string") {
      stats.dropped.malformed++;
      return;
    }
    if (datagram.frag !== 0) {
      stats.dropped.fragmented++;
      return;
    }
    this.#lastActive = Date.now();
    const key = datagram.target.address;
    let flow = this.#flows.get(key);
    if (!flow) {
      if (this.#flows.size >= this.#options.maxTargets) {
        stats.dropped.target_limit++;
        return;
      }
      flow = this.#open(datagram.target);
      if (!flow) return;
    }
    if (flow.refused) {
      stats.dropped.refused++;
      return;
    }
    const outcome = flow.sender.send(datagram.data);
    if (outcome === "sent" || outcome === "queued") {
      stats.datagramsIn++;
      stats.bytesIn += datagram.data.length;
    } else stats.dropped[outcome]++;
  }

  /** A flow to `target`, or undefined (counted) when no stream can be opened now. */
  #open(target: SocksTarget): Flow | undefined {
    const { stats, onError } = this.#options;
    let stream: Stream;
    try {
      stream = this.#options.openUdp(target.address);
    } catch {
      stats.dropped.send_failed++;
      return undefined;
    }
    const sender = new DatagramSender(stream);
    const flow: Flow = { target, stream, sender, refused: false };
    this.#flows.set(target.address, flow);
    stream.onDrain = () => sender.drained();
    const decoder = new DatagramDecoder();
    stream.onData = (chunk) => {
      let datagrams: Uint8Array[];
      try {
        datagrams = decoder.push(chunk);
      } catch (error) {
        if (!(error instanceof UdpFramingError)) throw error;
        stats.dropped.too_large++;
        stream.reset(ResetReason.BadHeader);
        return;
      }
      for (const datagram of datagrams) this.#reply(target, datagram);
    };
    stream.onEnd = () => stream.end();
    stream.onClose = (error) => {
      if (this.#flows.get(target.address) !== flow) return;
      const code = (error as { resetCode?: number } | undefined)?.resetCode;
      if (code !== undefined && REFUSALS.has(code)) {
        // Kept, as a refusal: the target's next datagrams are dropped here, not sent to be refused.
        flow.refused = true;
        stats.refusedTargets++;
        onError(
          new ClientError(
            "forward_failed",
            `socks UDP ${target.address}: ${describeStreamError(error!)}`,
          ),
        );
        return;
      }
      // Idle at the daemon, or the session went: the target's next datagram opens a new flow.
      this.#flows.delete(target.address);
    };
    return flow;
  }

  /** A target's datagram back to the client, behind a header naming the target. */
  #reply(target: SocksTarget, data: Uint8Array): void {
    if (this.#closed || this.#clientHost === undefined) return;
    const { stats } = this.#options;
    this.#lastActive = Date.now();
    if (this.#socket.send(encodeSocksUdp(target, data), this.#clientHost, this.#clientPort)) {
      stats.datagramsOut++;
      stats.bytesOut += data.length;
    } else stats.dropped.send_failed++;
  }

  /** Calls `onIdle` once nothing went either way for `idleMs`; checks at most twice per period. */
  #armIdle(): void {
    const idleMs = this.#options.idleMs;
    const check = () => {
      if (this.#closed) return;
      const quiet = Date.now() - this.#lastActive;
      if (quiet >= idleMs) return this.#options.onIdle();
      this.#timer = setTimeout(check, idleMs - quiet);
    };
    this.#timer = setTimeout(check, idleMs);
  }
}
