/**
 * Named services: a client offers a service under a name with no public port; another client that
 * may use it opens a `service` stream naming it, and the daemon opens a stream to the offering
 * client and splices the two (like frp's stcp, but multiplexed over the sessions that exist).
 *
 * @module
 */

import type { Session } from "../protocol/session.ts";
import type { Stream } from "../protocol/stream.ts";
import { encodeStreamHeader } from "../tunnel/stream_header.ts";
import { ResetReason } from "../tunnel/reset_reasons.ts";
import { splice, type SpliceCounters, streamEnd } from "../tunnel/splice.ts";

/** One offered service. */
export interface ServiceOffer {
  /** The service name. */
  readonly name: string;
  /** The offering client. */
  readonly client: string;
  /** The offering client's session id. */
  readonly sessionId: string;
  /** Live counters: `aToB` user → offerer bytes, `bToA` the other way. */
  readonly stats: SpliceCounters & { connections: number; active: number };
}

/** Who offers which service. One offer per name: a second client gets a conflict. */
export class ServiceRegistry {
  readonly #offers = new Map<string, ServiceOffer & { session: Session }>();

  /** Registers an offer; false when another session already offers the name. */
  offer(name: string, client: string, sessionId: string, session: Session): boolean {
    const existing = this.#offers.get(name);
    if (existing && existing.sessionId !== sessionId) return false;
    if (!existing) {
      const stats = { aToB: 0, bToA: 0, connections: 0, active: 0 };
      this.#offers.set(name, { name, client, sessionId, session, stats });
    }
    return true;
  }

  /** Removes an offer of this session; false when it had none under that name. */
  withdraw(name: string, sessionId: string): boolean {
    if (this.#offers.get(name)?.sessionId !== sessionId) return false;
    return this.#offers.delete(name);
  }

  /** Removes every offer of a session (it ended). */
  withdrawAll(sessionId: string): void {
    for (const [name, offer] of this.#offers) {
      if (offer.sessionId === sessionId) this.#offers.delete(name);
    }
  }

  /** The current offers. */
  list(): ServiceOffer[] {
    return [...this.#offers.values()].map(({ session: _, ...offer }) => offer);
  }

  /**
   * Connects a user's `stream` to the service: opens a stream to the offerer (header `service`
   * with `from`) and splices the two. Resets the user's stream with UnknownService when nobody
   * offers it, or LimitReached when the offerer's session cannot take another stream.
   */
  async connect(stream: Stream, name: string, from: string, rest: Uint8Array): Promise<void> {
    const offer = this.#offers.get(name);
    if (!offer) return stream.reset(ResetReason.UnknownService);
    let target: Stream;
    try {
      target = offer.session.open();
    } catch {
      return stream.reset(ResetReason.LimitReached);
    }
    target.write(encodeStreamHeader({ kind: "service", service: name, from }));
    offer.stats.connections++;
    offer.stats.active++;
    await splice(streamEnd(stream), streamEnd(target), { aFirst: rest, counters: offer.stats });
    offer.stats.active--;
  }
}
