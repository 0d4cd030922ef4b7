/**
 * A route that sends each visitor to its client as a new stream: what every route does with a
 * visitor, whether it is a client's own tunnel on this node (`reverse_tunnel.ts`) or, in a
 * cluster, a relay to a tunnel held on another node (`cluster/relay_route.ts`), both of which
 * extend it. Each visitor's stream starts with a `visitor` header (tunnel id, the visitor's
 * addresses) and is spliced to the visitor both ways, with the route's counters kept.
 *
 * @module
 */

import type { Session } from "../../protocol/session.ts";
import type { Stream } from "../../protocol/stream.ts";
import type { Transport } from "../../protocol/transport.ts";
import { ResetReason } from "../../tunnel/stream/reset_reasons.ts";
import {
  type SpliceResult,
  spliceThen,
  type SpliceThrottle,
  streamEnd,
  transportEnd,
} from "../../tunnel/splice.ts";
import { encodeStreamHeader } from "../../tunnel/stream/stream_header.ts";
import type { Logger } from "../../util/log.ts";
import type { TunnelStats } from "../registry/registry.ts";

const NOTHING = () => {};

/** A route whose visitors go to its client as streams, with their counters. */
export class StreamRoute {
  /** The tunnel's id in the node that holds it (what the client knows it by). */
  readonly id: string;
  /** True for a route of this node; false for a relay to another node (one more hop). */
  readonly local: boolean;
  /** Live counters. Byte counts move while visitors are connected. */
  readonly stats: TunnelStats = { connections: 0, active: 0, errors: 0, aToB: 0, bToA: 0 };
  readonly #session: Pick<Session, "open">;
  readonly #log: Logger;
  readonly #visitors = new Set<Transport>();
  #closed = false;

  /**
   * A route to tunnel `id`, sending visitors through `session`: the client's yamux session, or
   * the relay session to the node holding the tunnel (then `local` is false).
   */
  constructor(id: string, session: Pick<Session, "open">, local: boolean, log: Logger) {
    this.id = id;
    this.local = local;
    this.#session = session;
    this.#log = log;
  }

  /** Whether it takes visitors now: not stopped (routes add their own conditions). */
  get healthy(): boolean {
    return !this.#closed;
  }

  /** Visitors in flight now (for balancing, and to know when a stopped route has drained). */
  get active(): number {
    return this.stats.active;
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

  /**
   * A visitor connection: it goes to the client as a new stream, spliced both ways; refused
   * (closed at once) when the route is stopped or {@linkcode admit} says no.
   */
  visitor(visitor: Transport): void {
    if (this.#closed) return visitor.close();
    const admitted = this.admit(visitor.remoteAddress);
    if (!admitted) return visitor.close();
    this.#visitors.add(visitor);
    // The stream opens once the visitor's first bytes are in, where the transport can tell (or a
    // turn later, for a protocol whose server speaks first): SYN, header and those bytes then
    // leave in one frame and one write, not two.
    if (visitor.whenFirstRead) visitor.whenFirstRead(() => this.#pipe(visitor, admitted));
    else this.#pipe(visitor, admitted);
  }

  #pipe(visitor: Transport, left: () => void): void {
    const stream = this.#closed
      ? undefined
      : this.#open(visitor.remoteAddress, visitor.localAddress);
    if (!stream) {
      this.#visitors.delete(visitor);
      left();
      return visitor.close();
    }
    const throttle = this.throttle();
    this.#began();
    spliceThen(
      transportEnd(visitor),
      streamEnd(stream),
      { counters: this.stats, throttle },
      (result) => {
        this.#visitors.delete(visitor);
        this.#ended(result, visitor, left);
      },
    );
  }

  /**
   * A stream to the client for one visitor that the caller pipes itself (an HTTP request), or
   * undefined when the route is not healthy or the client cannot be reached (counted).
   */
  open(remote: string, local: string): Stream | undefined {
    if (!this.healthy) return undefined;
    const stream = this.#open(remote, local);
    if (stream) this.stats.connections++;
    return stream;
  }

  /**
   * Counts the bytes of one request {@linkcode open} was for, once it is over: the HTTP front
   * pipes those itself, so no splice counts them.
   */
  exchanged(bytesIn: number, bytesOut: number): void {
    this.stats.aToB += bytesIn;
    this.stats.bToA += bytesOut;
  }

  /**
   * A visitor that another node took and relays here as `stream` (`remote` and `local` as that
   * node saw them; `rest`: bytes read with the stream's header): it goes on to the client. For a
   * client's own tunnel only (a relayed stream is never relayed again), which makes it public.
   */
  protected relayed(stream: Stream, remote: string, local: string, rest: Uint8Array): void {
    if (this.#closed) return stream.reset(ResetReason.UnknownTunnel);
    const left = this.admit(remote);
    if (!left) return stream.reset(ResetReason.LimitReached);
    const toClient = this.#open(remote, local);
    if (!toClient) {
      left();
      return stream.reset(ResetReason.LimitReached);
    }
    const throttle = this.relayThrottle();
    this.#began();
    spliceThen(
      streamEnd(stream),
      streamEnd(toClient),
      { aFirst: rest, counters: this.stats, throttle },
      (result) => this.#ended(result, remote, left),
    );
  }

  /**
   * Whether one more visitor connection from `remote` may come in now (a route's limits and
   * policy): what to call once when it goes, or undefined to refuse it. Default: always.
   */
  protected admit(_remote: string): (() => void) | undefined {
    return NOTHING;
  }

  /**
   * What the bytes of the next visitor are held by, visitor → client (`aToB`) and back (`bToA`);
   * undefined (the default) when nothing limits them.
   */
  protected throttle(): { aToB?: SpliceThrottle; bToA?: SpliceThrottle } | undefined {
    return undefined;
  }

  /**
   * What a relayed visitor's bytes are held by ({@linkcode throttle} by default: looked up once,
   * as for a visitor of this node's own port).
   */
  protected relayThrottle(): { aToB?: SpliceThrottle; bToA?: SpliceThrottle } | undefined {
    return this.throttle();
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
    stream.write(encodeStreamHeader({ kind: "visitor", tunnel: this.id, remote, local }));
    return stream;
  }

  /** Counts a visitor whose splice begins. */
  #began(): void {
    this.stats.connections++;
    this.stats.active++;
  }

  /**
   * Counts a visitor whose splice ended and lets its place go. A callback, not an async function
   * awaiting the splice: one promise less per visitor, and one function less for the JIT to build.
   */
  #ended(result: SpliceResult, visitor: Transport | string, left: () => void): void {
    this.stats.active--;
    left();
    if (result.error) {
      this.stats.errors++;
      this.#log.debug("visitor ended with an error", {
        visitor: typeof visitor === "string" ? visitor : visitor.remoteAddress,
        detail: result.error.message,
      });
    }
  }
}
