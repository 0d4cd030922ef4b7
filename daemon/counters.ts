/**
 * The daemon's event counters (authentication failures, refusals by reason, handshake and idle
 * timeouts, …): one owner that counts, and snapshots for whoever reports them (metrics, tests).
 *
 * @example
 * ```ts
 * import { Counters } from "./counters.ts";
 * const counters = new Counters();
 * counters.count("auth_failure");
 * console.assert(counters.get("auth_failure") === 1);
 * ```
 *
 * @module
 */

/** Named counters that only go up. */
export class Counters {
  readonly #values = new Map<string, number>();

  /** Adds one to `name`. */
  count(name: string): void {
    this.#values.set(name, (this.#values.get(name) ?? 0) + 1);
  }

  /** The value of `name` (0 if never counted). */
  get(name: string): number {
    return this.#values.get(name) ?? 0;
  }

  /** Every counter counted so far, by name, as a fresh object. */
  snapshot(): Record<string, number> {
    return Object.fromEntries(this.#values);
  }
}
