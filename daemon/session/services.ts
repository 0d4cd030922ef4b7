/**
 * Named services: a client offers a service under a name with no public port; another client that
 * may use it opens a `service` stream naming it, and the daemon opens a stream to the offering
 * client and splices the two (like frp's stcp, but multiplexed over the sessions that exist). Who
 * offers what is kept by the registry (several offers may serve one name: an HA client's
 * sessions, a group's members; the registry picks one per user); this module is the offer and
 * the splice.
 *
 * @module
 */

import type { Session } from "../../protocol/session.ts";
import type { Stream } from "../../protocol/stream.ts";
import { encodeStreamHeader } from "../../tunnel/stream/stream_header.ts";
import { ResetReason } from "../../tunnel/stream/reset_reasons.ts";
import { splice, streamEnd } from "../../tunnel/splice.ts";
import type { ServiceOffer, ServiceRecord } from "../registry/registry.ts";

/** A new offer, reached through the offering client's `yamux` session. */
export function serviceOffer(record: ServiceRecord, yamux: Session): ServiceOffer {
  return {
    ...record,
    yamux,
    healthy: true,
    stats: { aToB: 0, bToA: 0, connections: 0, active: 0 },
  };
}

/**
 * Connects a user's `stream` to `offer`: opens a stream to the offerer (header `service` with
 * `from`) and splices the two. Resets the user's stream with UnknownService when nobody offers
 * it, or LimitReached when the offerer's session cannot take another stream.
 */
export async function connectService(
  stream: Stream,
  offer: ServiceOffer | undefined,
  from: string,
  rest: Uint8Array,
): Promise<void> {
  if (!offer) return stream.reset(ResetReason.UnknownService);
  let target: Stream;
  try {
    target = offer.yamux.open();
  } catch {
    return stream.reset(ResetReason.LimitReached);
  }
  target.write(encodeStreamHeader({ kind: "service", service: offer.name, from }));
  offer.stats.connections++;
  offer.stats.active++;
  await splice(streamEnd(stream), streamEnd(target), { aFirst: rest, counters: offer.stats });
  offer.stats.active--;
}
