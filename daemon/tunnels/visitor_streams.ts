/**
 * Visitors sent to a client as streams: what every route to a client does with a visitor,
 * whether the route is a client's own tunnel on this node (`reverse_tunnel.ts`) or, in a
 * cluster, a relay to a tunnel held on another node (`cluster/relay_route.ts`). Each visitor
 * becomes a new stream that starts with a `visitor` header (tunnel id, the visitor's addresses)
 * and is spliced to the visitor both ways, with the route's counters kept.
 *
 * @module
 */

import type { Session } from "../../protocol/session.ts";
import type { Stream } from "../../protocol/stream.ts";
import type { Transport } from "../../protocol/transport.ts";
import { ResetReason } from "../../tunnel/reset_reasons.ts";
import { splice, type SpliceResult, streamEnd, transportEnd } from "../../tunnel/splice.ts";
import { encodeStreamHeader } from "../../tunnel/stream_header.ts";
import type { Logger } from "../../util/log.ts";
import type { TunnelStats } from "../registry/registry.ts";

/** The streams of one route's visitors, and their counters. */
export class VisitorStreams {
  /** Live counters. */
  readonly stats: TunnelStats = { connections: 0, active: 0, errors: 0, aToB: 0, bToA: 0 };
  readonly #tunnel: string;
  readonly #session: Pick<Session, "open">;
  readonly #log: Logger;
  readonly #visitors = new Set<Transport>();
  #closed = false;

  /**
   * Visitors of tunnel `tunnel` (the id the client knows it by), sent through `session`: the
   * client's yamux session, or the relay session to the node holding the tunnel.
   */
  constructor(tunnel: string, session: Pick<Session, "open">, log: Logger) {
    this.#tunnel = tunnel;
    this.#session = session;
    this.#log = log;
  }

  /** Whether visitors are no longer taken. */
  get closed(): boolean {
    return this.#closed;
  }

  /** Takes no more visitors; those connected finish normally (a drain). Idempotent. */
  stopAccepting(): void {
    this.#closed = true;
  }

  /** Takes no more visitors and disconnects the connected ones. Idempotent. */
  close(): void {
    this.stopAccepting();
    for (const visitor of this.#visitors) visitor.close();
  }

  /** A visitor connection: it goes to the client as a new stream, spliced both ways. */
  visitor(visitor: Transport): void {
    if (this.#closed) return visitor.close();
    const stream = this.#open(visitor.remoteAddress, visitor.localAddress);
    if (!stream) return visitor.close();
    this.#visitors.add(visitor);
    this.#count(splice(transportEnd(visitor), streamEnd(stream), { counters: this.stats }), visitor)
      .then(() => this.#visitors.delete(visitor));
  }

  /**
   * A stream to the client for one visitor that the caller pipes itself (an HTTP request), or
   * undefined when visitors are no longer taken or the client cannot be reached (counted).
   */
  open(remote: string, local: string): Stream | undefined {
    if (this.#closed) return undefined;
    const stream = this.#open(remote, local);
    if (stream) this.stats.connections++;
    return stream;
  }

  /**
   * A visitor that another node took and relays here as `stream` (`remote` and `local` as that
   * node saw them; `rest`: bytes read with the stream's header): it goes on to the client.
   */
  relayed(stream: Stream, remote: string, local: string, rest: Uint8Array): void {
    if (this.#closed) return stream.reset(ResetReason.UnknownTunnel);
    const toClient = this.#open(remote, local);
    if (!toClient) return stream.reset(ResetReason.LimitReached);
    this.#count(
      splice(streamEnd(stream), streamEnd(toClient), { aFirst: rest, counters: this.stats }),
      remote,
    );
  }

  /** Opens the stream to the client with its `visitor` header; undefined (counted) if it cannot. */
  #open(remote: string, local: string): Stream | undefined {
    let stream;
    try {
      stream = this.#session.open();
    } catch (error) {
      this.stats.errors++;
      this.#log.warn("visitor refused: cannot open a stream to the client", {
        visitor: remote,
        detail: (error as Error).message,
      });
      return undefined;
    }
    stream.write(encodeStreamHeader({ kind: "visitor", tunnel: this.#tunnel, remote, local }));
    return stream;
  }

  /** Keeps the counters of one visitor's splice. */
  async #count(spliced: Promise<SpliceResult>, visitor: Transport | string): Promise<void> {
    this.stats.connections++;
    this.stats.active++;
    const result = await spliced;
    this.stats.active--;
    if (result.error) {
      this.stats.errors++;
      this.#log.debug("visitor ended with an error", {
        visitor: typeof visitor === "string" ? visitor : visitor.remoteAddress,
        detail: result.error.message,
      });
    }
  }
}
