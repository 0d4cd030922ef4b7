/**
 * A token bucket: `rate` tokens a second, holding at most `burst`. It refills from the clock when
 * asked (no timer), so an idle bucket costs nothing. {@linkcode TokenBucket.take} is for
 * admissions (a connection takes one token or is refused); {@linkcode TokenBucket.spend} is for
 * bytes, which are already read: the bucket goes into debt and says how long the reader must
 * hold before reading more, so the flow is held, never buffered.
 *
 * @example
 * ```ts
 * import { TokenBucket } from "./token_bucket.ts";
 * let now = 0;
 * const bucket = new TokenBucket(10, 2, () => now);
 * console.assert(bucket.take() && bucket.take() && !bucket.take());
 * now += 100; // 100 ms at 10/s is one token
 * console.assert(bucket.take());
 * ```
 *
 * @module
 */

/** Milliseconds from some fixed point, increasing. */
export type Clock = () => number;

/** The default clock: `performance.now()`, which never goes back. */
export const monotonicClock: Clock = () => performance.now();

/** Tokens refilled at a rate, up to a burst. */
export class TokenBucket {
  #rate: number;
  #burst: number;
  #tokens: number;
  #at: number;
  readonly #now: Clock;

  /** A full bucket of `burst` tokens refilled at `rate` a second, read from `now`. */
  constructor(rate: number, burst: number, now: Clock = monotonicClock) {
    this.#rate = rate;
    this.#burst = burst;
    this.#tokens = burst;
    this.#now = now;
    this.#at = now();
  }

  /** The rate, tokens a second. */
  get rate(): number {
    return this.#rate;
  }

  /** Tokens now (negative while in debt). */
  get tokens(): number {
    this.#refill();
    return this.#tokens;
  }

  /** Whether it is full (an idle bucket that can be forgotten without losing anything). */
  get full(): boolean {
    return this.tokens >= this.#burst;
  }

  /** Changes rate and burst (a reload), keeping the tokens it has, up to the new burst. */
  set(rate: number, burst: number): void {
    this.#refill();
    this.#rate = rate;
    this.#burst = burst;
    this.#tokens = Math.min(this.#tokens, burst);
  }

  /**
   * Takes `n` tokens if it has them (true), else takes nothing (false). `at`: the clock's reading
   * now, when the caller has one (several buckets asked at one instant read the clock once).
   */
  take(n = 1, at?: number): boolean {
    this.#refill(at);
    if (this.#tokens < n) return false;
    this.#tokens -= n;
    return true;
  }

  /**
   * Spends `n` tokens even past zero, and returns how many milliseconds until it is out of debt
   * (0 when it is not in debt): how long to hold before the next spend.
   */
  spend(n: number): number {
    this.#refill();
    this.#tokens -= n;
    return this.#tokens >= 0 ? 0 : (-this.#tokens / this.#rate) * 1000;
  }

  #refill(at?: number): void {
    const now = at ?? this.#now();
    const elapsed = now - this.#at;
    this.#at = now;
    if (elapsed > 0) {
      this.#tokens = Math.min(this.#burst, this.#tokens + (elapsed * this.#rate) / 1000);
    }
  }
}
