/**
 * Reconnect delays: exponential backoff with full jitter (a random delay between 0 and the
 * current ceiling), capped. Full jitter keeps a crowd of clients that lost the same daemon from
 * reconnecting in lockstep.
 *
 * When to start over: a connection that proved the daemon works resets the backoff, so an isolated
 * link reset costs one short delay (at most `initialMs`). A connection proves it by being
 * authenticated and then either carrying a stream besides the control stream (a visitor, a
 * forward, a service) or staying up for `stableMs`. A daemon that accepts and then drops its
 * clients proves nothing, and the delays before each try grow to `maxMs`.
 *
 * @module
 */

/** Backoff tuning. Durations in milliseconds. */
export interface BackoffOptions {
  /** Ceiling of the first delay. Default 500. */
  initialMs?: number;
  /** Largest ceiling. Default 30 000. */
  maxMs?: number;
  /** Ceiling growth per failure. Default 2. */
  factor?: number;
  /** An authenticated connection up this long resets the backoff, traffic or not. Default 10 000. */
  stableMs?: number;
  /** Random source in [0, 1); tests replace it. */
  random?: () => number;
}

/**
 * Hands out reconnect delays.
 *
 * @example
 * ```ts
 * import { Backoff } from "./backoff.ts";
 * const backoff = new Backoff({ initialMs: 100, maxMs: 1000, random: () => 0.5 });
 * console.assert(backoff.next() === 50 && backoff.next() === 100);
 * ```
 */
export class Backoff {
  readonly #initial: number;
  readonly #max: number;
  readonly #factor: number;
  readonly #stable: number;
  readonly #random: () => number;
  #attempt = 0;

  /** Creates a backoff at its first step. */
  constructor(options: BackoffOptions = {}) {
    this.#initial = options.initialMs ?? 500;
    this.#max = options.maxMs ?? 30_000;
    this.#factor = options.factor ?? 2;
    this.#stable = options.stableMs ?? 10_000;
    this.#random = options.random ?? Math.random;
  }

  /** Failures since the last reset. */
  get attempt(): number {
    return this.#attempt;
  }

  /** The delay before the next attempt, and one step up. */
  next(): number {
    const ceiling = Math.min(this.#max, this.#initial * this.#factor ** this.#attempt);
    this.#attempt++;
    return Math.floor(this.#random() * ceiling);
  }

  /**
   * An authenticated connection ended after `upMs`; `carriedTraffic` says whether it carried a
   * stream besides the control stream. Either proof resets the backoff.
   */
  connectionEnded(upMs: number, carriedTraffic = false): void {
    if (carriedTraffic || upMs >= this.#stable) this.#attempt = 0;
  }
}
