/**
 * `GET /v1/events`: the daemon's event feed as Server-Sent Events.
 *
 * Every message carries the event's sequence number as its `id`, so a client that reconnects
 * with `Last-Event-ID` (or `?lastEventId=`) gets what it missed from the daemon's
 * {@linkcode EventRing}, then live events. When the id it asks for is no longer in the ring (or
 * was never issued by this daemon run), the stream starts with an `event: reset` message: events
 * were lost, and what follows is everything still kept. Without an id the stream is live only;
 * `lastEventId=0` asks for the whole history.
 *
 * Each connection reads the ring through a cursor instead of keeping a queue of its own, and the
 * body is pulled only as fast as the listener gets it to the peer (`transport/http/`), so a
 * connection costs little however slow its reader. A reader that falls more than `maxLag` events
 * behind, or needs an event that has left the ring, is disconnected: its body fails, and the
 * listener closes the connection; it can reconnect and resume. A finished stream leaves nothing
 * behind: no subscriber in the ring, no timer, no listener on the daemon's stop.
 *
 * @module
 */

import { Hono } from "hono";
import { DEFAULT_RING_CAPACITY, EventRing, type SequencedEvent } from "./event_ring.ts";
import type { EventsApiDeps } from "./deps.ts";

/** Options of the feed endpoint. */
export interface EventsApiOptions {
  /** Events kept for resuming (used when the daemon's ring is created). Default 1000. */
  ringCapacity?: number;
  /** How far (in events) a reader may fall behind before it is disconnected. Default 256. */
  maxLag?: number;
  /** Interval of heartbeat comments on an otherwise idle stream. Default 15 s. */
  heartbeatMs?: number;
}

/** Default of {@linkcode EventsApiOptions.maxLag}. */
export const DEFAULT_MAX_LAG = 256;
/** Default of {@linkcode EventsApiOptions.heartbeatMs}. */
export const DEFAULT_HEARTBEAT_MS = 15_000;
/** At most this many events go into one chunk, so that a replay does not build one huge string. */
const BATCH = 64;

const rings = new WeakMap<object, EventRing>();

/**
 * The event history of `daemon`: created, and subscribed to its feed, once per daemon.
 * `capacity` applies only to that first call.
 */
export function eventRing(
  daemon: Pick<EventsApiDeps, "events">,
  capacity: number = DEFAULT_RING_CAPACITY,
): EventRing {
  let ring = rings.get(daemon);
  if (!ring) {
    ring = new EventRing(capacity);
    ring.follow(daemon.events);
    rings.set(daemon, ring);
  }
  return ring;
}

/** Formats one event as an SSE message: id, event type, and the event as JSON. */
export function formatEvent({ id, event }: SequencedEvent): string {
  // type and time first, and a field cannot overwrite them.
  const data = Object.assign({ type: event.type, time: event.time }, event.fields, {
    type: event.type,
    time: event.time,
  });
  return `id: ${id}\nevent: ${event.type}\ndata: ${JSON.stringify(data)}\n\n`;
}

/** Where a feed connection starts. */
export interface Start {
  /** The last id the reader has: the stream goes on with the next one. */
  after: number;
  /** When set, the stream starts with an `event: reset` message carrying this as its data. */
  reset?: Record<string, unknown>;
}

/** Works out where a connection asking for events after `lastId` (undefined: live) starts. */
export function startOf(ring: EventRing, lastId: number | undefined): Start {
  if (lastId === undefined) return { after: ring.lastId };
  const known = lastId <= ring.lastId && lastId >= ring.firstId - 1;
  if (known) return { after: lastId };
  return {
    after: ring.firstId - 1,
    reset: {
      type: "reset",
      time: Date.now(),
      reason: lastId > ring.lastId ? "unknown_id" : "events_lost",
      requested: lastId,
      firstId: ring.firstId,
      lastId: ring.lastId,
    },
  };
}

/** How one SSE body behaves. */
export interface EventStreamOptions {
  /** Live events a reader may fall behind before it is disconnected. */
  maxLag: number;
  /** Interval of heartbeat comments. */
  heartbeatMs: number;
  /**
   * The stream ends (normally) when this aborts, e.g. once the daemon stopped. A signal, not a
   * promise: the stream removes its listener when it ends, where a promise would keep every
   * stream ever opened reachable until it settled.
   */
  signal?: AbortSignal;
}

/**
 * The SSE body for one connection: replay from `start`, then live events and heartbeats. It ends
 * when the reader cancels it, when `signal` aborts, or with an error when the reader falls behind.
 */
export function eventStream(
  ring: EventRing,
  start: Start,
  options: EventStreamOptions,
): ReadableStream<Uint8Array> {
  const encoder = new TextEncoder();
  let cursor = start.after; // the last id handed to the stream
  const liveFrom = ring.lastId; // replayed events do not count as lag
  let reset = start.reset;
  let heartbeatDue = false;
  let done = false;
  let wake: (() => void) | undefined;
  let unsubscribe: (() => void) | undefined;
  let heartbeat: ReturnType<typeof setInterval> | undefined;
  let controller!: ReadableStreamDefaultController<Uint8Array>;

  const stop = () => finish();
  const finish = (error?: Error) => {
    if (done) return;
    done = true;
    unsubscribe?.();
    clearInterval(heartbeat);
    options.signal?.removeEventListener("abort", stop);
    wake?.();
    try {
      if (error) controller.error(error);
      else controller.close();
    } catch {
      // Already closed or cancelled by the reader.
    }
  };

  const next = (): string | undefined => {
    let text = "";
    if (reset) {
      text += `event: reset\ndata: ${JSON.stringify(reset)}\n\n`;
      reset = undefined;
    }
    for (let n = 0; n < BATCH && cursor < ring.lastId; n++) {
      const entry = ring.get(cursor + 1);
      if (!entry) return void finish(new Error("event feed reader fell out of the ring"));
      text += formatEvent(entry);
      cursor = entry.id;
    }
    if (text === "" && heartbeatDue) text = ": heartbeat\n\n";
    heartbeatDue = false;
    return text === "" ? undefined : text;
  };

  return new ReadableStream<Uint8Array>({
    start(c) {
      controller = c;
      unsubscribe = ring.subscribe((entry) => {
        // The ring is the buffer: a reader too far behind is cut off rather than buffered for.
        const behind = entry.id - Math.max(cursor, liveFrom);
        if (behind > options.maxLag || cursor < ring.firstId - 1) {
          return finish(new Error(`event feed reader fell ${behind} events behind`));
        }
        wake?.();
      });
      heartbeat = setInterval(() => {
        heartbeatDue = true;
        wake?.();
      }, options.heartbeatMs);
      if (options.signal?.aborted) return finish();
      options.signal?.addEventListener("abort", stop, { once: true });
      // A comment first, so that the response (and its headers) starts at once.
      c.enqueue(encoder.encode(": tunnelmux events\n\n"));
    },
    async pull(c) {
      while (!done) {
        const text = next();
        if (text !== undefined) return c.enqueue(encoder.encode(text));
        if (done) return;
        await new Promise<void>((resolve) => wake = resolve);
        wake = undefined;
      }
    },
    cancel() {
      finish();
    },
  }, { highWaterMark: 1 });
}

/** Parses an SSE resume id: a non-negative decimal integer, or undefined when absent. */
export function parseLastEventId(value: string | null | undefined): number | undefined | null {
  if (value === null || value === undefined || value.trim() === "") return undefined;
  const text = value.trim();
  if (!/^\d{1,15}$/.test(text)) return null;
  return Number(text);
}

/**
 * The `GET /v1/events` endpoint, as a sub-app for the admin API to mount (it applies auth).
 * Creating it starts the daemon's event history, so create it when the daemon starts.
 */
export function eventsApi(deps: EventsApiDeps, options: EventsApiOptions = {}): Hono {
  const ring = eventRing(deps, options.ringCapacity);
  // `?scope=cluster` follows every node's events (each with its `node`), from its own history.
  let clusterRing: EventRing | undefined;
  if (deps.cluster) {
    clusterRing = new EventRing(options.ringCapacity ?? DEFAULT_RING_CAPACITY);
    clusterRing.follow(deps.cluster.events);
  }
  const maxLag = options.maxLag ?? DEFAULT_MAX_LAG;
  const heartbeatMs = options.heartbeatMs ?? DEFAULT_HEARTBEAT_MS;
  // One listener on the daemon's stop for the whole endpoint; each stream listens to the signal
  // and stops listening when it ends.
  const stopping = new AbortController();
  void deps.stopped.then(() => stopping.abort(), () => stopping.abort());
  const app = new Hono();
  app.get("/v1/events", (c) => {
    // The header is what EventSource sends on reconnect; it is newer than the URL's query.
    const lastId = parseLastEventId(c.req.header("last-event-id") ?? c.req.query("lastEventId"));
    if (lastId === null) {
      return c.json({
        error: { code: "bad_request", message: "Last-Event-ID must be a non-negative integer" },
      }, 400);
    }
    const scope = c.req.query("scope") ?? "node";
    if ((scope !== "node" && scope !== "cluster") || (scope === "cluster" && !clusterRing)) {
      const message = scope === "cluster"
        ? "this daemon is not in a cluster"
        : `scope must be "node" or "cluster"`;
      return c.json({ error: { code: "bad_request", message } }, 400);
    }
    const source = scope === "cluster" ? clusterRing! : ring;
    const body = eventStream(source, startOf(source, lastId), {
      maxLag,
      heartbeatMs,
      // Not `c.req.raw.signal`: both listeners cancel the body when the client goes away, while
      // Deno's legacy request.signal also aborts after successful responses and prints a warning
      // when something listens to it.
      signal: stopping.signal,
    });
    return c.body(body, 200, {
      "content-type": "text/event-stream; charset=utf-8",
      "cache-control": "no-store",
      "x-accel-buffering": "no",
    });
  });
  return app;
}
