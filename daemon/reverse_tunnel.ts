/**
 * Reverse tunnels: the daemon listens on a port for a client, and every visitor that connects
 * becomes a new stream to that client (starting with a `visitor` header), piped both ways.
 *
 * @module
 */

import type { Session } from "../protocol/session.ts";
import type { Stream } from "../protocol/stream.ts";
import { encodeStreamHeader } from "../tunnel/stream_header.ts";
import type { Transport, TransportListener } from "../protocol/transport.ts";
import { listenTcp } from "../transport/mod.ts";
import { ResetReason } from "../tunnel/reset_reasons.ts";
import {
  splice,
  type SpliceCounters,
  type SpliceResult,
  streamEnd,
  transportEnd,
} from "../tunnel/splice.ts";
import type { Logger } from "../util/log.ts";

/** Live counters of a tunnel. Byte counts move while connections are open. */
export interface TunnelStats extends SpliceCounters {
  /** Visitors accepted in all. `aToB` counts visitor → client bytes, `bToA` client → visitor. */
  connections: number;
  /** Visitors connected now. */
  active: number;
  /** Visitors that ended in an error (the client could not be reached, or a side failed). */
  errors: number;
}

/** How to open a reverse tunnel. */
export interface ReverseTunnelOptions {
  /** The tunnel id, unique in the daemon. */
  id: string;
  /** The owning client's name. */
  client: string;
  /**
   * What visitors are sent through: the client's yamux session, or (on a node relaying for the
   * owner of a cluster tunnel) the relay session to the owning node.
   */
  session: Pick<Session, "open">;
  /** Address to listen on. */
  bindHost: string;
  /** Port to listen on. */
  port: number;
  /** The client's name for the tunnel, shown to operators. */
  label?: string;
  /** Logger with the session's context. */
  log: Logger;
}

/** A listening reverse tunnel. Create with {@linkcode ReverseTunnel.listen}. */
export class ReverseTunnel {
  /** Unique id. */
  readonly id: string;
  /** Owning client. */
  readonly client: string;
  /** Bound address. */
  readonly bindHost: string;
  /** Bound port (the real one when 0 was asked for). */
  readonly port: number;
  /** The client's label, if any. */
  readonly label: string | undefined;
  /** When it started listening (ms since the epoch). */
  readonly createdAt = Date.now();
  /** Live counters. */
  readonly stats: TunnelStats = { connections: 0, active: 0, errors: 0, aToB: 0, bToA: 0 };

  readonly #session: Pick<Session, "open">;
  readonly #log: Logger;
  #listener: TransportListener | undefined;
  readonly #visitors = new Set<Transport>();
  #closed = false;

  private constructor(options: ReverseTunnelOptions, port: number) {
    this.id = options.id;
    this.client = options.client;
    this.bindHost = options.bindHost;
    this.port = port;
    this.label = options.label;
    this.#session = options.session;
    this.#log = options.log.child({ tunnel: options.id });
  }

  /** Binds the port and starts accepting visitors. Rejects if the port cannot be bound. */
  static async listen(options: ReverseTunnelOptions): Promise<ReverseTunnel> {
    // A visitor may arrive before the tunnel object exists (it needs the bound port): hold it.
    const early: { tunnel?: ReverseTunnel; pending: Transport[] } = { pending: [] };
    const listener = await listenTcp({ hostname: options.bindHost, port: options.port }, (t) => {
      if (early.tunnel) early.tunnel.#visitor(t);
      else early.pending.push(t);
    });
    const tunnel = new ReverseTunnel(options, listener.port);
    tunnel.#listener = listener;
    early.tunnel = tunnel;
    for (const t of early.pending) tunnel.#visitor(t);
    return tunnel;
  }

  /** Visitors connected now. */
  get activeVisitors(): number {
    return this.#visitors.size;
  }

  /** Stops accepting visitors; those connected finish normally (a drain). Idempotent. */
  stopAccepting(): void {
    this.#closed = true;
    this.#listener?.close();
  }

  /** Stops listening and disconnects current visitors. Idempotent. */
  close(): void {
    this.stopAccepting();
    for (const visitor of this.#visitors) visitor.close();
  }

  /**
   * A visitor that another node of the cluster took on this tunnel's port and relays here as
   * `stream` (its `remote` and `local` addresses as that node saw them; `rest`: bytes read with
   * the stream's header). It goes on to the client like a visitor of our own port.
   */
  relayed(stream: Stream, remote: string, local: string, rest: Uint8Array): void {
    if (this.#closed) return stream.reset(ResetReason.UnknownTunnel);
    const toClient = this.#openToClient(remote, local);
    if (!toClient) return stream.reset(ResetReason.LimitReached);
    this.#count(
      splice(streamEnd(stream), streamEnd(toClient), { aFirst: rest, counters: this.stats }),
      remote,
    );
  }

  #visitor(visitor: Transport): void {
    if (this.#closed) return visitor.close();
    const stream = this.#openToClient(visitor.remoteAddress, visitor.localAddress);
    if (!stream) return visitor.close();
    this.#visitors.add(visitor);
    this.#count(splice(transportEnd(visitor), streamEnd(stream), { counters: this.stats }), visitor)
      .then(() => this.#visitors.delete(visitor));
  }

  /** Opens the stream to the client with its `visitor` header; undefined (counted) if it cannot. */
  #openToClient(remote: string, local: string): Stream | undefined {
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
    stream.write(encodeStreamHeader({ kind: "visitor", tunnel: this.id, remote, local }));
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
