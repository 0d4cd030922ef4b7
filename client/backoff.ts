/**
 * Reconnect delays: exponential backoff with full jitter (a random delay between 0 and the
 * current ceiling), capped, and reset once a connection has stayed up for a while. Full jitter
 * keeps a crowd of clients that lost the same daemon from reconnecting in lockstep.
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
  /** A connection up this long counts as stable and resets the backoff. Default 30 000. */
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
    this.#stable = options.stableMs ?? 30_000;
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

  /** A connection ended after being up for `upMs`: reset if it was stable. */
  connectionEnded(upMs: number): void {
    if (upMs >= this.#stable) this.#attempt = 0;
  }
}
