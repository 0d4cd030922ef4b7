/**
 * Reverse tunnels: the daemon listens on a port for a client, and every visitor that connects
 * becomes a new stream to that client (starting with a `visitor` header), piped both ways.
 *
 * @module
 */

import type { Session } from "../protocol/session.ts";
import { encodeStreamHeader } from "../tunnel/stream_header.ts";
import type { Transport, TransportListener } from "../protocol/transport.ts";
import { listenTcp } from "../transport/mod.ts";
import { splice, type SpliceCounters, streamEnd, transportEnd } from "../tunnel/splice.ts";
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
  /** The session visitors are sent through. */
  session: Session;
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

  readonly #session: Session;
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

  #visitor(visitor: Transport): void {
    if (this.#closed) return visitor.close();
    let stream;
    try {
      stream = this.#session.open();
    } catch (error) {
      this.stats.errors++;
      this.#log.warn("visitor refused: cannot open a stream to the client", {
        visitor: visitor.remoteAddress,
        detail: (error as Error).message,
      });
      return visitor.close();
    }
    stream.write(encodeStreamHeader({
      kind: "visitor",
      tunnel: this.id,
      remote: visitor.remoteAddress,
      local: visitor.localAddress,
    }));
    this.stats.connections++;
    this.stats.active++;
    this.#visitors.add(visitor);
    splice(transportEnd(visitor), streamEnd(stream), { counters: this.stats }).then((result) => {
      this.stats.active--;
      this.#visitors.delete(visitor);
      if (result.error) {
        this.stats.errors++;
        this.#log.debug("visitor ended with an error", {
          visitor: visitor.remoteAddress,
          detail: result.error.message,
        });
      }
    });
  }
}
