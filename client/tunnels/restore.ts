/**
 * What the client asks for again once a new session is ready (after a reconnect, or on the first
 * session for what `keep` and `keepOffer` registered before it): every tunnel, on the port it
 * had, and every offer. Tunnels are asked for together, each on its own, so one waiting for its
 * port holds up no other; offers follow once every tunnel is settled, one at a time, in the
 * order they were first registered. A request the daemon refuses is reported as an `error` and
 * not asked for again until the next session, except a tunnel's `port_in_use`: its old port may
 * still be held for the session that was lost, so it is asked for again for a while.
 *
 * @module
 */

import type { ClientError } from "../errors.ts";
import type { OfferRecord } from "./offers.ts";
import type { TunnelRecord } from "./expose.ts";

/** Pause between two attempts to get a tunnel's old port back after a reconnect. */
export const RESTORE_RETRY_MS = 500;

/** What restoring asks of the client, on the session it began on. */
export interface RestoreContext {
  /** Whether that session is still the client's (a restore stops when it is not). */
  isCurrent(): boolean;
  /** Asks the daemon for `record` on `port` (0: any); rejects with its refusal. */
  expose(record: TunnelRecord, port: number): Promise<void>;
  /** Asks the daemon to take the offer; rejects with its refusal. */
  offer(name: string, record: OfferRecord): Promise<unknown>;
  /** The offer `name` was taken and is still the client's: start or re-report its health check. */
  offered(name: string, record: OfferRecord): void;
  /** The client's offers now (a withdrawn or replaced one is not watched). */
  offers: ReadonlyMap<string, OfferRecord>;
  /** A request that failed and is not asked for again on this session. */
  onError(error: ClientError): void;
  /** How long to keep asking for a tunnel's old port while it is `port_in_use`. */
  restoreTimeoutMs: number;
  /** Milliseconds now; `Date.now` unless a test replaces it. */
  now?: () => number;
  /** Waits `ms` between two asks for a port; a timer unless a test replaces it. */
  sleep?: (ms: number) => Promise<void>;
}

const sleepMs = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** Asks for every tunnel in `tunnels` and then every offer of `context.offers` again. */
export async function restoreAll(
  tunnels: Iterable<TunnelRecord>,
  context: RestoreContext,
): Promise<void> {
  await Promise.all([...tunnels].map((record) => restoreTunnel(record, context)));
  for (const [name, record] of context.offers) await restoreOffer(name, record, context);
}

/**
 * Exposes one tunnel again on the port it had (or asked for), so its public address survives the
 * reconnect. The port may still be held for the session that was lost (until the daemon notices,
 * or, in a cluster, until the dead node's claim expires): `port_in_use` is asked again every
 * {@linkcode RESTORE_RETRY_MS} until `restoreTimeoutMs` has passed. Gives up quietly when the
 * tunnel was closed or the session is no longer current; never rejects.
 */
export async function restoreTunnel(record: TunnelRecord, context: RestoreContext): Promise<void> {
  const now = context.now ?? Date.now;
  const sleep = context.sleep ?? sleepMs;
  const port = record.remotePort || (record.request.remotePort ?? 0);
  const deadline = now() + context.restoreTimeoutMs;
  for (;;) {
    if ((record.id === "" && !record.kept) || record.closed) return;
    if (!context.isCurrent()) return;
    try {
      return await context.expose(record, port);
    } catch (error) {
      const code = (error as ClientError).code;
      if (code !== "port_in_use" || port === 0 || now() > deadline) {
        return context.onError(error as ClientError);
      }
    }
    await sleep(RESTORE_RETRY_MS);
  }
}

/** Makes one offer again, then watches its health if it is still the client's; never rejects. */
export async function restoreOffer(
  name: string,
  record: OfferRecord,
  context: RestoreContext,
): Promise<void> {
  try {
    await context.offer(name, record);
    if (context.offers.get(name) === record) context.offered(name, record);
  } catch (error) {
    context.onError(error as ClientError);
  }
}
