/**
 * Node-to-node relay sessions: one yamux session between each pair of live nodes, over our own
 * engine and TCP transport, authenticated with the cluster key (`peer_auth.ts`). Visitors that
 * arrive on a node which does not hold their tunnel, and users of a service offered on another
 * node, travel as streams of this session, with the same stream headers a client session uses
 * (`visitor`, `service`) and the same backpressure as any stream. NATS never carries their bytes.
 *
 * Of each pair, the node whose name sorts first dials (while the other is alive, with backoff);
 * the other accepts. Until both proofs are checked, nothing but the handshake stream is read.
 *
 * @module
 */

import {
  DEFAULT_SESSION_CONFIG,
  type SessionConfig,
  streamWindowConfig,
} from "../../protocol/config.ts";
import { Session } from "../../protocol/session.ts";
import type { Stream } from "../../protocol/stream.ts";
import type { Transport, TransportListener } from "../../protocol/transport.ts";
import { connectTcp, connectTls, listenTcp, listenTls } from "../../transport/mod.ts";
import { bindNamed } from "../../util/net/bind_named.ts";
import { ControlChannel } from "../../tunnel/control/control_channel.ts";
import { onStreamHeader, readStreamHeader } from "../../tunnel/stream/read_stream_header.ts";
import { TUNNEL_ACK_DELAY_MS } from "../../tunnel/ack_delay.ts";
import { ResetReason } from "../../tunnel/stream/reset_reasons.ts";
import { encodeStreamHeader, type StreamHeader } from "../../tunnel/stream/stream_header.ts";
import { formatHostPort, type HostPort, parseHostPort } from "../../util/net/address.ts";
import type { Logger } from "../../util/log.ts";
import { anyProofMatches, newNonce, peerProofs } from "./peer_auth.ts";

/** What opens relay streams to one node: a yamux session's `open`, or an error. */
export interface StreamOpener {
  /** Opens a stream to the node; throws when there is no authenticated session to it now. */
  open(): Stream;
}

/** Counters of one peer link. */
export interface PeerStats {
  /** Relay streams this node opened to the peer. */
  streamsOut: number;
  /** Relay streams the peer opened to this node. */
  streamsIn: number;
  /** Authenticated sessions made with the peer in all. */
  sessions: number;
  /** Handshakes that failed (wrong key, wrong node, deadline). */
  authFailures: number;
}

/** One peer as {@linkcode PeerLinks.list} shows it. */
export interface PeerView extends PeerStats {
  /** The peer's node name. */
  node: string;
  /** Whether an authenticated session is up. */
  connected: boolean;
  /** Last keepalive round trip, ms (0 before one). */
  rtt: number;
}

/** The yamux tuning of a relay session between two nodes. */
export function relaySessionConfig(
  options: Pick<PeerLinksOptions, "keepAliveMs" | "streamWindow">,
): Partial<SessionConfig> {
  return {
    keepAliveInterval: options.keepAliveMs,
    keepAliveTimeout: options.keepAliveMs * 2,
    // A relayed visitor's stream is answered by the far node's client a hop later: its ACK
    // rides on that answer, as on a client's session, rather than costing each node a write,
    // a read and a wakeup of their own per visitor.
    ackDelay: TUNNEL_ACK_DELAY_MS,
    // Opens wait for their ACK that much longer, and one session carries every client's
    // relayed visitors between two nodes: no stream waits for a SYN slot below the cap.
    maxUnackedOpens: DEFAULT_SESSION_CONFIG.maxStreams,
    ...streamWindowConfig(options.streamWindow ?? DEFAULT_SESSION_CONFIG.maxStreamWindow),
  };
}

/** How to build {@linkcode PeerLinks}. */
export interface PeerLinksOptions {
  /** This node's name. */
  node: string;
  /** The cluster keys: `cluster.key`, then `cluster.previousKeys` (proofs under each). */
  keys: readonly string[];
  /** Where to accept peer sessions. */
  listen: HostPort;
  /** Deadline of the handshake, ms. */
  handshakeTimeoutMs: number;
  /** Keepalive of peer sessions, ms (interval; the timeout is twice it). */
  keepAliveMs: number;
  /** The largest receive window of a relayed stream (`limits.streamWindow`); the engine's default if unset. */
  streamWindow?: number;
  /** Where links are logged. */
  log: Logger;
  /** TLS for relay sessions (PEM contents): listen with `cert`/`key`, trust `ca` when dialing. */
  tls?: { cert: string; key: string; ca: string };
  /** A relayed stream from `node`, its header read. */
  onStream: (stream: Stream, header: StreamHeader, rest: Uint8Array, node: string) => void;
}

interface Link {
  session: Session | undefined;
  advertise: string | undefined;
  wanted: boolean;
  dialing: boolean;
  retry: ReturnType<typeof setTimeout> | undefined;
  backoffMs: number;
  stats: PeerStats;
}

const MAX_BACKOFF_MS = 5_000;

/** More proofs than this in one handshake message are not looked at. */
const MAX_PROOFS = 8;

/** A handshake message's proofs: the first under `proof` (as a single-key node sends), then more. */
function proofFields(proofs: string[]): { proof: string; proofs?: string[] } {
  return { proof: proofs[0], ...(proofs.length > 1 ? { proofs: proofs.slice(1) } : {}) };
}

/** The proofs a handshake message carries. */
function receivedProofs(message: Record<string, unknown>): unknown[] {
  const more = Array.isArray(message.proofs) ? message.proofs.slice(0, MAX_PROOFS) : [];
  return [message.proof, ...more];
}

/**
 * The address other nodes dial to reach this node: `advertise` (`cluster.advertise`, HOST:PORT),
 * its port 0 replaced by `boundPort`, the port the relay listener got.
 */
export function advertisedAddress(advertise: string, boundPort: number): string {
  const { hostname, port } = parseHostPort(advertise);
  return port === 0 ? formatHostPort(hostname, boundPort) : advertise;
}

/** The relay sessions of this node with every other. */
export class PeerLinks {
  readonly #options: PeerLinksOptions;
  readonly #links = new Map<string, Link>();
  readonly #pending = new Set<Session>();
  #listener: TransportListener | undefined;
  #closed = false;

  /** Peer links for `options.node`; nothing listens until {@linkcode start}. */
  constructor(options: PeerLinksOptions) {
    this.#options = options;
  }

  /** Binds the relay listener; an error names it and `cluster.listen` (`--cluster-listen`). */
  async start(): Promise<void> {
    const { listen, tls } = this.#options;
    this.#listener = await bindNamed(
      "the cluster's relay sessions",
      formatHostPort(listen.hostname, listen.port),
      "cluster.listen (--cluster-listen)",
      () =>
        tls
          ? listenTls({ ...listen, cert: tls.cert, key: tls.key }, (t) => this.#accept(t))
          : listenTcp(listen, (t) => this.#accept(t)),
    );
  }

  /** Where the relay listener is bound, as `host:port` ("" before {@linkcode start}). */
  get address(): string {
    return this.#listener ? formatHostPort(this.#listener.hostname, this.#listener.port) : "";
  }

  /** The port the relay listener is bound to (0 before {@linkcode start}). */
  get port(): number {
    return this.#listener?.port ?? 0;
  }

  /** A node is alive at `advertise`: keep a session with it (dialing, if this side dials). */
  want(node: string, advertise: string): void {
    if (node === this.#options.node || this.#closed) return;
    const link = this.#link(node);
    link.wanted = true;
    link.advertise = advertise;
    if (this.#options.node < node) this.#dial(node, link);
  }

  /**
   * Presence says a node is gone: stop dialing it. A session that is still up stays: its own
   * keepalive tells whether the node is really gone, and relayed visitors in flight on it go on
   * (presence can flap when NATS itself was away).
   */
  unwant(node: string): void {
    const link = this.#links.get(node);
    if (!link) return;
    link.wanted = false;
    clearTimeout(link.retry);
  }

  /** Closes the session with `node` and stops dialing it. */
  forget(node: string): void {
    const link = this.#links.get(node);
    if (!link) return;
    this.unwant(node);
    link.session?.destroy();
    link.session = undefined;
  }

  /** Opens relay streams to `node` through whatever session is up at the time. */
  opener(node: string): StreamOpener {
    return {
      open: () => {
        const link = this.#links.get(node);
        if (!link?.session) throw new Error(`no relay session to node ${node}`);
        const stream = link.session.open();
        link.stats.streamsOut++;
        return stream;
      },
    };
  }

  /** Whether an authenticated session with `node` is up. */
  connected(node: string): boolean {
    return this.#links.get(node)?.session !== undefined;
  }

  /** Every peer known, with its counters. */
  list(): PeerView[] {
    return [...this.#links.entries()].map(([node, link]) => ({
      node,
      connected: link.session !== undefined,
      rtt: link.session?.rtt ?? 0,
      ...link.stats,
    })).sort((a, b) => a.node.localeCompare(b.node));
  }

  /** Closes the listener and every session. */
  close(): void {
    this.#closed = true;
    this.#listener?.close();
    for (const session of this.#pending) session.destroy();
    for (const node of this.#links.keys()) this.forget(node);
  }

  #link(node: string): Link {
    let link = this.#links.get(node);
    if (!link) {
      link = {
        session: undefined,
        advertise: undefined,
        wanted: false,
        dialing: false,
        retry: undefined,
        backoffMs: 100,
        stats: { streamsOut: 0, streamsIn: 0, sessions: 0, authFailures: 0 },
      };
      this.#links.set(node, link);
    }
    return link;
  }

  #newSession(transport: Transport, client: boolean, onStream: (s: Stream) => void): Session {
    const session = new Session(transport, {
      client,
      config: relaySessionConfig(this.#options),
      onStream,
    });
    this.#pending.add(session);
    session.closed.then(() => this.#pending.delete(session));
    return session;
  }

  async #dial(node: string, link: Link): Promise<void> {
    if (link.dialing || link.session || !link.wanted || this.#closed || !link.advertise) return;
    link.dialing = true;
    clearTimeout(link.retry);
    const { log } = this.#options;
    let session: Session | undefined;
    try {
      const target = parseHostPort(link.advertise);
      const { tls } = this.#options;
      const transport = tls
        ? await connectTls({ hostname: target.hostname, port: target.port, caCerts: [tls.ca] })
        : await connectTcp({ hostname: target.hostname, port: target.port });
      let peer = "";
      session = this.#newSession(transport, true, (stream) => this.#incoming(stream, () => peer));
      await this.#dialerHandshake(session, node);
      peer = node;
      this.#up(node, link, session);
    } catch (error) {
      session?.destroy();
      if ((error as Error).name === "PeerAuthError") link.stats.authFailures++;
      log.warn("cannot relay to node", { peer: node, detail: (error as Error).message });
      if (link.wanted && !this.#closed) {
        link.retry = setTimeout(() => this.#dial(node, link), link.backoffMs);
        link.backoffMs = Math.min(MAX_BACKOFF_MS, link.backoffMs * 2);
      }
    } finally {
      link.dialing = false;
    }
  }

  #up(node: string, link: Link, session: Session): void {
    link.session?.destroy();
    link.session = session;
    link.backoffMs = 100;
    link.stats.sessions++;
    this.#options.log.info("relay session up", { peer: node });
    session.closed.then(() => {
      if (link.session !== session) return;
      link.session = undefined;
      this.#options.log.info("relay session down", { peer: node });
      if (this.#options.node < node && link.wanted && !this.#closed) {
        link.retry = setTimeout(() => this.#dial(node, link), link.backoffMs);
      }
    });
  }

  /** Dialer side: hello, check the acceptor's proof, send ours, wait for ok. */
  #dialerHandshake(session: Session, node: string): Promise<void> {
    const { keys, handshakeTimeoutMs } = this.#options;
    const self = this.#options.node;
    const stream = session.open();
    stream.write(encodeStreamHeader({ kind: "control" }));
    const channel = new ControlChannel(stream);
    const dialerNonce = newNonce();
    return new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => fail("the relay handshake timed out"), handshakeTimeoutMs);
      const fail = (message: string, auth = false) => {
        clearTimeout(timer);
        // Settled first: destroying the session closes the handshake's channel, whose onClose
        // would otherwise settle it as "the peer closed", hiding a peer without the key.
        reject(Object.assign(new Error(message), auth ? { name: "PeerAuthError" } : {}));
        session.destroy();
      };
      channel.onClose = () => fail("the peer closed the relay handshake");
      channel.onMessage = (value) => {
        const message = value as Record<string, unknown>;
        if (message?.type === "peer-challenge") {
          if (message.node !== node) {
            return fail(`${String(message.node)} answered where ${node} was expected`, true);
          }
          const facts = {
            dialer: self,
            acceptor: node,
            dialerNonce,
            acceptorNonce: String(message.nonce),
          };
          if (!anyProofMatches(receivedProofs(message), peerProofs(keys, "acceptor", facts))) {
            return fail(`node ${node} does not hold the cluster key`, true);
          }
          channel.send({ type: "peer-proof", ...proofFields(peerProofs(keys, "dialer", facts)) });
        } else if (message?.type === "peer-ok") {
          clearTimeout(timer);
          // The handshake stream stays open for the session's life; its end ends the session.
          channel.onClose = () => session.destroy();
          resolve();
        } else fail(`unexpected relay handshake message`, true);
      };
      channel.start();
      channel.send({ type: "peer-hello", node: self, nonce: dialerNonce });
    });
  }

  /** Acceptor side: the first stream is the handshake; nothing else is read before it passes. */
  #accept(transport: Transport): void {
    if (this.#closed) return transport.close();
    const { keys, handshakeTimeoutMs, log } = this.#options;
    let peer = "";
    let sawFirst = false;
    const session = this.#newSession(transport, false, (stream) => {
      if (peer) return this.#incoming(stream, () => peer);
      if (sawFirst) return stream.reset(ResetReason.NotAuthenticated);
      sawFirst = true;
      readStreamHeader(stream, handshakeTimeoutMs).then(({ header, rest }) => {
        if (header.kind !== "control") return session.destroy();
        const channel = new ControlChannel(stream, rest);
        const acceptorNonce = newNonce();
        let facts: Parameters<typeof peerProofs>[2] | undefined;
        channel.onClose = () => session.destroy();
        channel.onMessage = (value) => {
          const message = value as Record<string, unknown>;
          if (message?.type === "peer-hello" && !facts && typeof message.node === "string") {
            facts = {
              dialer: message.node,
              acceptor: this.#options.node,
              dialerNonce: String(message.nonce),
              acceptorNonce,
            };
            channel.send({
              type: "peer-challenge",
              node: this.#options.node,
              nonce: acceptorNonce,
              ...proofFields(peerProofs(keys, "acceptor", facts)),
            });
          } else if (message?.type === "peer-proof" && facts && !peer) {
            const link = this.#link(facts.dialer);
            if (!anyProofMatches(receivedProofs(message), peerProofs(keys, "dialer", facts))) {
              link.stats.authFailures++;
              log.warn("relay session refused: the peer does not hold the cluster key", {
                peer: facts.dialer,
                remote: transport.remoteAddress,
              });
              return session.destroy();
            }
            clearTimeout(timer);
            peer = facts.dialer;
            channel.send({ type: "peer-ok" });
            this.#up(peer, link, session);
          } else session.destroy();
        };
        channel.start();
      }, () => session.destroy());
    });
    const timer = setTimeout(() => {
      if (!peer) session.destroy();
    }, handshakeTimeoutMs);
    session.closed.then(() => clearTimeout(timer));
  }

  /** A relay stream from an authenticated peer: read its header and hand it on. */
  #incoming(stream: Stream, peer: () => string): void {
    const node = peer();
    if (!node) return stream.reset(ResetReason.NotAuthenticated);
    this.#link(node).stats.streamsIn++;
    // Handed on in the turn its header arrives: the stream this node opens for it (to its
    // client) leaves in the same write as what else that read brought, not in one of its own.
    onStreamHeader(stream, this.#options.handshakeTimeoutMs, (error, read) => {
      if (error) return stream.reset(ResetReason.BadHeader);
      try {
        this.#options.onStream(stream, read!.header, read!.rest, node);
      } catch (failure) {
        this.#options.log.warn("relayed stream refused", {
          peer: node,
          detail: (failure as Error).message,
        });
        stream.reset(ResetReason.None);
      }
    });
  }
}
