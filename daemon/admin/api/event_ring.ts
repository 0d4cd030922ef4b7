/**
 * A bounded history of the daemon's events, numbered 1, 2, 3, ... as they happen, so that a feed
 * client that reconnects can ask for what came after the last id it saw. The daemon's own
 * {@linkcode EventFeed} keeps nothing; this ring keeps the newest `capacity` events.
 *
 * @module
 */

import type { DaemonEvent, EventFeed } from "../../events.ts";

/** An event with its sequence number. */
export interface SequencedEvent {
  /** Position in the daemon's event history: 1 for the first, then one more each time. */
  id: number;
  /** The event. */
  event: DaemonEvent;
}

/** What {@linkcode EventRing.after} found. */
export interface Replay {
  /** The kept events after the asked-for id, oldest first. */
  events: SequencedEvent[];
  /**
   * True when the asked-for id is not in the history: it fell out of the ring (events in between
   * are lost), or it is newer than anything published (another daemon run).
   */
  gap: boolean;
}

/** Default number of events kept. */
export const DEFAULT_RING_CAPACITY = 1000;

/** The newest events of one feed, numbered, with subscribers that see each as it is numbered. */
export class EventRing {
  /** How many events are kept. */
  readonly capacity: number;
  readonly #slots: (SequencedEvent | undefined)[];
  #lastId = 0;
  readonly #subscribers = new Set<(event: SequencedEvent) => void>();

  /** Creates an empty ring of `capacity` events (at least 1). */
  constructor(capacity: number = DEFAULT_RING_CAPACITY) {
    if (!Number.isInteger(capacity) || capacity < 1) {
      throw new RangeError(`ring capacity must be a positive integer, not ${capacity}`);
    }
    this.capacity = capacity;
    this.#slots = new Array(capacity);
  }

  /** The id of the newest event; 0 before the first. */
  get lastId(): number {
    return this.#lastId;
  }

  /** The id of the oldest event kept; `lastId + 1` when empty. */
  get firstId(): number {
    return Math.max(1, this.#lastId - this.capacity + 1);
  }

  /** Subscribers now (for tests and metrics: a closed feed connection must not stay here). */
  get subscriberCount(): number {
    return this.#subscribers.size;
  }

  /** Numbers `event`, keeps it (dropping the oldest when full) and tells every subscriber. */
  push(event: DaemonEvent): SequencedEvent {
    const entry = { id: ++this.#lastId, event };
    this.#slots[entry.id % this.capacity] = entry;
    for (const subscriber of this.#subscribers) {
      try {
        subscriber(entry);
      } catch {
        // One broken feed connection must not keep the others from their events.
      }
    }
    return entry;
  }

  /** The kept event with `id`, if it is still in the ring. */
  get(id: number): SequencedEvent | undefined {
    if (id < this.firstId || id > this.#lastId) return undefined;
    return this.#slots[id % this.capacity];
  }

  /** The kept events after `id` (0: all of them), and whether `id` itself is unknown. */
  after(id: number): Replay {
    const gap = id > this.#lastId || id < this.firstId - 1;
    const from = gap ? this.firstId : id + 1;
    const events: SequencedEvent[] = [];
    for (let i = from; i <= this.#lastId; i++) events.push(this.#slots[i % this.capacity]!);
    return { events, gap };
  }

  /** Adds a subscriber told about every event pushed from now on; returns its removal. */
  subscribe(subscriber: (event: SequencedEvent) => void): () => void {
    this.#subscribers.add(subscriber);
    return () => this.#subscribers.delete(subscriber);
  }

  /** Pushes every event `feed` publishes from now on; returns the function that stops that. */
  follow(feed: EventFeed): () => void {
    return feed.subscribe((event) => this.push(event));
  }
}
