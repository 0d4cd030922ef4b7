/**
 * Fair admission of connections still in their handshake. A flood of connections that never
 * authenticate must not lock legitimate clients out: a real client finishes its handshake within a
 * round trip or two, so the daemon bounds the connections it holds unauthenticated and, when the
 * bound is reached, lets the newcomer in and closes the oldest pending one instead of refusing.
 * One source address may hold only a share of the places, so a flood from one address evicts its
 * own connections before anyone else's.
 *
 * @module
 */

import { parseHostPort } from "../../util/net/address.ts";

/** What the admission needs of a pending connection. */
export interface PendingConnection {
  /** `host:port` of the peer. */
  readonly remoteAddress: string;
  /** Closes the connection (its handshake did not finish in time for the newcomers). */
  close(): void;
}

/** Bounds of {@linkcode HandshakeAdmission}. */
export interface AdmissionLimits {
  /** Connections held in their handshake at once, from all sources. */
  pending: number;
  /** Of those, from one source address. */
  pendingPerSource: number;
}

/**
 * Tracks connections in their handshake, oldest first, and evicts to make room.
 *
 * @example
 * ```ts
 * import { HandshakeAdmission } from "./admission.ts";
 * const closed: string[] = [];
 * const conn = (remoteAddress: string) => ({ remoteAddress, close: () => closed.push(remoteAddress) });
 * const admission = new HandshakeAdmission(() => ({ pending: 2, pendingPerSource: 2 }));
 * const first = conn("10.0.0.1:1");
 * admission.add(first);
 * admission.add(conn("10.0.0.1:2"));
 * admission.add(conn("10.0.0.2:1")); // full: the oldest pending connection makes room
 * console.assert(closed[0] === "10.0.0.1:1");
 * ```
 */
export class HandshakeAdmission {
  readonly #limits: () => AdmissionLimits;
  readonly #pending = new Set<PendingConnection>();
  readonly #bySource = new Map<string, Set<PendingConnection>>();
  #evicted = 0;

  /** `limits` is read at every admission, so a reload applies at once. */
  constructor(limits: () => AdmissionLimits) {
    this.#limits = limits;
  }

  /** Connections in their handshake now. */
  get size(): number {
    return this.#pending.size;
  }

  /** Pending connections closed to make room, since start. */
  get evicted(): number {
    return this.#evicted;
  }

  /**
   * Admits `connection` as pending, first closing the oldest pending connection of its source
   * when that source holds its share, else the oldest overall when all places are taken. Returns
   * how many were closed.
   */
  add(connection: PendingConnection): number {
    const { pending, pendingPerSource } = this.#limits();
    const source = sourceOf(connection.remoteAddress);
    let closed = 0;
    const own = this.#bySource.get(source);
    while (own !== undefined && own.size >= pendingPerSource && own.size > 0) {
      closed += this.#evict(own.values().next().value!);
    }
    while (this.#pending.size >= pending && this.#pending.size > 0) {
      closed += this.#evict(this.#pending.values().next().value!);
    }
    this.#pending.add(connection);
    let set = this.#bySource.get(source);
    if (set === undefined) this.#bySource.set(source, set = new Set());
    set.add(connection);
    return closed;
  }

  /** The connection authenticated or closed: it no longer holds a place. */
  settle(connection: PendingConnection): void {
    if (!this.#pending.delete(connection)) return;
    const source = sourceOf(connection.remoteAddress);
    const set = this.#bySource.get(source);
    set?.delete(connection);
    if (set?.size === 0) this.#bySource.delete(source);
  }

  #evict(connection: PendingConnection): number {
    this.settle(connection);
    this.#evicted++;
    connection.close();
    return 1;
  }
}

/** The host part of `host:port` (the whole text when it does not parse). */
function sourceOf(remoteAddress: string): string {
  try {
    return parseHostPort(remoteAddress).hostname;
  } catch {
    return remoteAddress;
  }
}
