/**
 * What the HTTP front saw, per host, for metrics: requests by status, bytes each way, and the
 * time from a request's head to its response's end. Hosts no tunnel holds are counted together
 * under `(unknown)`, and past {@linkcode MAX_HOSTS} hosts under `(other)`, so visitors cannot
 * grow the metrics without bound by sending made-up `Host` values.
 *
 * @module
 */

import type { HttpExchange } from "./http_front.ts";

/** The most hosts counted on their own. */
export const MAX_HOSTS = 10_000;

/** One host's counters. */
export interface HttpHostStats {
  /** Requests by the status the visitor got. */
  readonly byStatus: Map<number, number>;
  /** Request bytes sent on to the client. */
  bytesIn: number;
  /** Response bytes sent back to visitors. */
  bytesOut: number;
  /** Sum of the requests' durations, seconds. */
  seconds: number;
}

/** Counters of the HTTP front, by host. */
export class HttpStats {
  readonly #hosts = new Map<string, HttpHostStats>();

  /** Counts `exchange`; `known` says whether a tunnel holds its host. */
  record(exchange: HttpExchange, known: boolean): void {
    let key = known ? exchange.host : "(unknown)";
    if (!this.#hosts.has(key) && this.#hosts.size >= MAX_HOSTS) key = "(other)";
    let stats = this.#hosts.get(key);
    if (!stats) {
      stats = { byStatus: new Map(), bytesIn: 0, bytesOut: 0, seconds: 0 };
      this.#hosts.set(key, stats);
    }
    stats.byStatus.set(exchange.status, (stats.byStatus.get(exchange.status) ?? 0) + 1);
    stats.bytesIn += exchange.bytesIn;
    stats.bytesOut += exchange.bytesOut;
    stats.seconds += exchange.ms / 1000;
  }

  /** Every host counted so far, with its counters. */
  entries(): IterableIterator<[string, HttpHostStats]> {
    return this.#hosts.entries();
  }
}
