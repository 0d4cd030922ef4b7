/**
 * When a node reads the cluster's buckets again after NATS came back: after a random delay below a
 * bound, not at once. After a NATS restart every node reconnects in the same instant; were each to
 * read every bucket then, NATS would take _N_ whole reads of the registry at the moment it has just
 * recovered. Spread uniformly over the bound, they come at about _N_ / bound a second instead
 * (`docs/cluster.md`, sizing).
 *
 * @example
 * ```ts
 * import { RereadTimer } from "./reread.ts";
 * let reads = 0;
 * const reread = new RereadTimer({ spreadMs: 3_000, run: () => reads++ });
 * reread.schedule(); // NATS came back: read within 3 s
 * reread.cancel(); // NATS went away again before that: nothing is read
 * reread.stop();
 * console.assert(reads === 0);
 * ```
 *
 * @module
 */

/** What a {@linkcode RereadTimer} runs, and when. */
export interface RereadOptions {
  /** The bound, ms: each delay is uniform in [0, spreadMs); 0 runs at once. */
  readonly spreadMs: number;
  /** The re-read. */
  readonly run: () => void;
  /** A uniform random number in [0, 1) (default `Math.random`; tests choose theirs). */
  readonly random?: () => number;
}

/** At most one pending re-read, after a random delay; dropped when NATS goes away again. */
export class RereadTimer {
  readonly #options: RereadOptions;
  #timer: ReturnType<typeof setTimeout> | undefined;
  #stopped = false;

  /** A timer that runs `options.run` once per {@linkcode schedule} not cancelled. */
  constructor(options: RereadOptions) {
    this.#options = options;
  }

  /** Whether a re-read is waiting for its delay. */
  get pending(): boolean {
    return this.#timer !== undefined;
  }

  /**
   * NATS came back: the re-read runs after a new random delay, which is returned (ms). One pending
   * before is dropped, so reconnections never stack re-reads. After {@linkcode stop}: nothing, -1.
   */
  schedule(): number {
    this.cancel();
    if (this.#stopped) return -1;
    const { spreadMs, run, random = Math.random } = this.#options;
    // Clamped: a random source that returns 1 must not wait past the bound.
    const delay = Math.min(Math.floor(random() * spreadMs), Math.max(0, spreadMs - 1));
    if (delay <= 0) {
      run();
      return 0;
    }
    this.#timer = setTimeout(() => {
      this.#timer = undefined;
      if (!this.#stopped) run();
    }, delay);
    return delay;
  }

  /** NATS went away again: the pending re-read, if any, is dropped (the next return schedules). */
  cancel(): void {
    if (this.#timer !== undefined) clearTimeout(this.#timer);
    this.#timer = undefined;
  }

  /** The node stops: the pending re-read is dropped and none is scheduled again. */
  stop(): void {
    this.#stopped = true;
    this.cancel();
  }
}
