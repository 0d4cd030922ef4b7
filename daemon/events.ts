/**
 * The daemon's event feed: what happened to sessions, tunnels and streams, for the admin API's
 * live feed and for operators. Subscribers get every event as it happens; the feed keeps nothing
 * (the admin API keeps its own bounded history).
 *
 * @module
 */

/** Kinds of events. */
export type DaemonEventType =
  | "session_opened"
  | "session_closed"
  | "tunnel_up"
  | "tunnel_down"
  | "route_health"
  | "stream_reset"
  | "visitor_refused"
  | "policy_withheld"
  | "auth_failure"
  | "token_minted"
  | "token_revoked"
  | "certificate_issued"
  | "certificate_failed"
  | "drain";

/** One event: its kind, when (ms since the epoch), and fields that depend on the kind. */
export interface DaemonEvent {
  /** What happened. */
  type: DaemonEventType;
  /** When (ms since the epoch). */
  time: number;
  /** Context: session, client, tunnel, stream, reason, ... */
  fields: Record<string, string | number | undefined>;
}

/** Fans events out to subscribers. */
export class EventFeed {
  readonly #subscribers = new Set<(event: DaemonEvent) => void>();

  /** Adds a subscriber; returns a function that removes it. */
  subscribe(subscriber: (event: DaemonEvent) => void): () => void {
    this.#subscribers.add(subscriber);
    return () => this.#subscribers.delete(subscriber);
  }

  /** Sends an event to every subscriber; one that throws does not stop the others. */
  publish(type: DaemonEventType, fields: DaemonEvent["fields"]): void {
    const event = { type, time: Date.now(), fields };
    for (const subscriber of this.#subscribers) {
      try {
        subscriber(event);
      } catch {
        // A broken subscriber must not break the daemon.
      }
    }
  }
}
