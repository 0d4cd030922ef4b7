/**
 * Reverse tunnels: a client's route for a public port. Every visitor the port's listener
 * (`port_listener.ts`) gives it becomes a new stream to that client (starting with a `visitor`
 * header), piped both ways. A port may have several routes (sessions of one client on several
 * nodes, members of a group); each is a `ReverseTunnel` with its own id and counters.
 *
 * @module
 */

import type { Session } from "../../protocol/session.ts";
import type { Stream } from "../../protocol/stream.ts";
import { encodeStreamHeader } from "../../tunnel/stream_header.ts";
import type { Transport } from "../../protocol/transport.ts";
import { ResetReason } from "../../tunnel/reset_reasons.ts";
import {
  splice,
  type SpliceCounters,
  type SpliceResult,
  streamEnd,
  transportEnd,
} from "../../tunnel/splice.ts";
import type { Logger } from "../../util/log.ts";

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
   * Who holds the public port: `client:NAME`, or `group:NAME` for a group's tunnel. Routes of one
   * owner may share a port. Default `client:` and the client's name.
   */
  owner?: string;
  /**
   * What visitors are sent through: the client's yamux session, or (on a node relaying for the
   * owner of a cluster tunnel) the relay session to the owning node.
   */
  session: Pick<Session, "open">;
  /** The public address (as its listener is bound). */
  bindHost: string;
  /** The public port. */
  port: number;
  /**
   * False for a route to a tunnel held on another node of a cluster (its `session` is the relay
   * session to that node). Default true.
   */
  local?: boolean;
  /** Whether the way to the client is up now (a relay's session); default always. */
  up?: () => boolean;
  /** The client's name for the tunnel, shown to operators. */
  label?: string;
  /**
   * For an HTTP tunnel: the host name it holds on the daemon's HTTP port (then `bindHost` is that
   * name and `port` the HTTP port, for display); its visitors are requests (see `open`).
   */
  host?: string;
  /**
   * With `host`: a TLS tunnel, whose visitors are whole connections of the HTTPS port passed on
   * undecrypted (see `visitor`), never HTTP requests.
   */
  passthrough?: boolean;
  /** Logger with the session's context. */
  log: Logger;
}

/** A client's route for a public port. */
export class ReverseTunnel {
  /** Unique id. */
  readonly id: string;
  /** Owning client. */
  readonly client: string;
  /** Who holds the port (`client:NAME` or `group:NAME`). */
  readonly owner: string;
  /** Bound address. */
  readonly bindHost: string;
  /** Bound port. */
  readonly port: number;
  /** The client's label, if any. */
  readonly label: string | undefined;
  /** The host name of an HTTP tunnel; undefined for a port's route. */
  readonly host: string | undefined;
  /** A TLS tunnel: the host's HTTPS connections are passed through, not terminated. */
  readonly passthrough: boolean;
  /** True for a session of this node; false for a relay to another node. */
  readonly local: boolean;
  /** When it was opened (ms since the epoch). */
  readonly createdAt = Date.now();
  /** Live counters. */
  readonly stats: TunnelStats = { connections: 0, active: 0, errors: 0, aToB: 0, bToA: 0 };
  /** False while the client reports its local service failing its health check. */
  reportedHealthy = true;

  readonly #session: Pick<Session, "open">;
  readonly #up: (() => boolean) | undefined;
  readonly #log: Logger;
  readonly #visitors = new Set<Transport>();
  #closed = false;

  /** A route through `options.session`; its port listener hands it visitors. */
  constructor(options: ReverseTunnelOptions) {
    this.id = options.id;
    this.client = options.client;
    this.owner = options.owner ?? `client:${options.client}`;
    this.bindHost = options.bindHost;
    this.port = options.port;
    this.label = options.label;
    this.host = options.host;
    this.passthrough = options.passthrough ?? false;
    this.local = options.local ?? true;
    this.#session = options.session;
    this.#up = options.up;
    this.#log = options.log.child({ tunnel: options.id });
  }

  /** Whether it takes visitors: its client's service is healthy and its way there is up. */
  get healthy(): boolean {
    return this.reportedHealthy && !this.#closed && (this.#up?.() ?? true);
  }

  /** Visitors connected now. */
  get activeVisitors(): number {
    return this.stats.active;
  }

  /** Visitors in flight now (for balancing). */
  get active(): number {
    return this.stats.active;
  }

  /** Takes no more visitors; those connected finish normally (a drain). Idempotent. */
  stopAccepting(): void {
    this.#closed = true;
  }

  /** Takes no more visitors and disconnects current ones. Idempotent. */
  close(): void {
    this.stopAccepting();
    for (const visitor of this.#visitors) visitor.close();
  }

  /** A visitor of the public port: it goes to the client as a new stream. */
  visitor(visitor: Transport): void {
    if (this.#closed) return visitor.close();
    const stream = this.#openToClient(visitor.remoteAddress, visitor.localAddress);
    if (!stream) return visitor.close();
    this.#visitors.add(visitor);
    this.#count(splice(transportEnd(visitor), streamEnd(stream), { counters: this.stats }), visitor)
      .then(() => this.#visitors.delete(visitor));
  }

  /**
   * A stream to the client for one visitor that the caller pipes itself (an HTTP request on the
   * daemon's HTTP port, see `http_front.ts`), or undefined when the tunnel takes no visitors or
   * the client cannot be reached (counted).
   */
  open(remote: string, local: string): Stream | undefined {
    if (!this.healthy) return undefined;
    const stream = this.#openToClient(remote, local);
    if (stream) this.stats.connections++;
    return stream;
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
