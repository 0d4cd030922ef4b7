/**
 * The daemon's recent history, for charts that start filled: every {@linkcode RECENT_SAMPLE_MS} a
 * sample of throughput (transport bytes per second each way, from the session totals `/metrics`
 * keeps, so a session that closed does not make the rate go negative), sessions and open
 * streams, kept in a fixed ring of the last {@linkcode RECENT_SAMPLES}: bounded memory, whoever
 * watches or not. Served as `GET /v1/metrics/recent`; the admin server owns the sampling timer.
 *
 * @module
 */

import { Hono } from "hono";
import type { MetricsApiDeps } from "./deps.ts";
import { sessionTotals } from "./metrics.ts";

/** Time between samples, ms: the dashboard's poll period, so its charts continue them. */
export const RECENT_SAMPLE_MS = 2_000;

/** Samples kept: five minutes at {@linkcode RECENT_SAMPLE_MS}. */
export const RECENT_SAMPLES = 150;

/** What is sampled: running byte totals (never going down) and counts now. */
export interface RecentTotals {
  /** Transport bytes received, all sessions so far. */
  bytesIn: number;
  /** Transport bytes sent, all sessions so far. */
  bytesOut: number;
  /** Sessions now. */
  sessions: number;
  /** Open streams now, over every session. */
  streams: number;
}

/** One sample as served. */
export interface RecentSample {
  /** When it was taken (ISO 8601). */
  at: string;
  /** Bytes per second received since the sample before. */
  bytesIn: number;
  /** Bytes per second sent since the sample before. */
  bytesOut: number;
  /** Sessions then. */
  sessions: number;
  /** Open streams then. */
  streams: number;
}

/** A fixed ring of the newest samples of `source`. */
export class RecentHistory {
  /** How many samples are kept. */
  readonly capacity: number;
  readonly #source: () => RecentTotals;
  readonly #slots: (RecentSample | undefined)[];
  #next = 0;
  #count = 0;
  #last: { t: number; bytesIn: number; bytesOut: number } | undefined;

  /** An empty history of `source`, keeping `capacity` samples (at least 1). */
  constructor(source: () => RecentTotals, capacity: number = RECENT_SAMPLES) {
    if (!Number.isInteger(capacity) || capacity < 1) {
      throw new RangeError(`history capacity must be a positive integer, not ${capacity}`);
    }
    this.capacity = capacity;
    this.#source = source;
    this.#slots = new Array(capacity);
  }

  /**
   * Takes a sample at `now` (ms since the epoch). The first one only sets the baseline for rates:
   * a rate needs two readings.
   */
  sample(now: number = Date.now()): void {
    const totals = this.#source();
    const last = this.#last;
    this.#last = { t: now, bytesIn: totals.bytesIn, bytesOut: totals.bytesOut };
    if (!last || now <= last.t) return;
    const seconds = (now - last.t) / 1000;
    this.#slots[this.#next] = {
      at: new Date(now).toISOString(),
      bytesIn: Math.max(0, totals.bytesIn - last.bytesIn) / seconds,
      bytesOut: Math.max(0, totals.bytesOut - last.bytesOut) / seconds,
      sessions: totals.sessions,
      streams: totals.streams,
    };
    this.#next = (this.#next + 1) % this.capacity;
    this.#count = Math.min(this.#count + 1, this.capacity);
  }

  /** The kept samples, oldest first. */
  samples(): RecentSample[] {
    const out: RecentSample[] = [];
    const first = (this.#next - this.#count + this.capacity) % this.capacity;
    for (let i = 0; i < this.#count; i++) out.push(this.#slots[(first + i) % this.capacity]!);
    return out;
  }
}

/** What a daemon's recent history samples: its session totals, sessions and streams. */
export function daemonTotals(daemon: Pick<MetricsApiDeps, "registry" | "events">): RecentTotals {
  const { bytesIn, bytesOut } = sessionTotals(daemon).snapshot();
  const sessions = daemon.registry.sessions();
  let streams = 0;
  for (const session of sessions) streams += session.streamCount;
  return { bytesIn, bytesOut, sessions: sessions.length, streams };
}

/**
 * `GET /v1/metrics/recent`: the samples of `history`, oldest first, with their period; none
 * without a history (an app built without an admin server, as tests do).
 */
export function recentApi(history: RecentHistory | undefined): Hono {
  const app = new Hono();
  app.get(
    "/v1/metrics/recent",
    (c) =>
      c.json({ intervalMs: RECENT_SAMPLE_MS, samples: history?.samples() ?? [] }, 200, {
        "cache-control": "no-store",
      }),
  );
  return app;
}
