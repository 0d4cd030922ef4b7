/**
 * Joins two byte pipes (a yamux stream and a socket, or two streams) in both directions, with
 * backpressure and half-close: when one side's writes back up, the other side stops reading; when
 * one side ends, the other is ended after the queued bytes; when one side fails, the other is
 * aborted.
 *
 * @module
 */

import type { Stream } from "../protocol/stream.ts";
import type { Transport } from "../protocol/transport.ts";

/** Handlers a {@linkcode PipeEnd} reports to. */
export interface PipeHandlers {
  /** Bytes arrived. */
  data(chunk: Uint8Array): void;
  /**
   * `data` follows the claim rules of `util/buffer_pool.ts`: each chunk is written to the other
   * end once, with its claim, and not read afterwards (see `TransportHandlers.releases`).
   */
  readonly releases?: boolean;
  /** The peer half-closed. */
  end(): void;
  /** Writes fell back under the high-water mark. */
  drain(): void;
  /** Done for good; `error` when it failed. */
  close(error?: Error): void;
}

/** One end of a splice: a yamux stream or a transport, seen the same way. */
export interface PipeEnd {
  /** Starts reporting to `handlers` (a paused end stays paused until {@linkcode resume}). */
  listen(handlers: PipeHandlers): void;
  /** Sends bytes; false means wait for `drain`. */
  write(chunk: Uint8Array): boolean;
  /** Half-closes after queued bytes. */
  end(): void;
  /** Stops reading. */
  pause(): void;
  /** Resumes reading. */
  resume(): void;
  /** Tears down at once; a stream is reset with `reason` (see `reset_reasons.ts`). */
  abort(reason: number): void;
}

/** A yamux stream as a {@linkcode PipeEnd}. */
export function streamEnd(stream: Stream): PipeEnd {
  return {
    listen(handlers) {
      stream.setOnData(handlers.data, handlers.releases === true);
      stream.onEnd = handlers.end;
      stream.onDrain = handlers.drain;
      stream.onClose = handlers.close;
    },
    write: (chunk) => stream.write(chunk),
    end: () => stream.end(),
    pause: () => stream.pause(),
    resume: () => stream.resume(),
    abort: (reason) => stream.reset(reason),
  };
}

/** A transport (socket) as a {@linkcode PipeEnd}. */
export function transportEnd(transport: Transport): PipeEnd {
  return {
    listen: (handlers) => transport.start(handlers),
    write: (chunk) => transport.write(chunk),
    end: () => transport.end(),
    pause: () => transport.pause(),
    resume: () => transport.resume(),
    abort: () => transport.close(),
  };
}

/** What a finished splice moved. */
export interface SpliceResult {
  /** Bytes from `a` to `b`. */
  aToB: number;
  /** Bytes from `b` to `a`. */
  bToA: number;
  /** The first failure, if either side failed before both finished cleanly. */
  error?: Error;
}

/** Live byte counters of a running splice, for metrics. */
export interface SpliceCounters {
  /** Bytes from `a` to `b` so far. */
  aToB: number;
  /** Bytes from `b` to `a` so far. */
  bToA: number;
}

/** What a limited direction spends its bytes against (a token bucket's `spend`). */
export interface SpliceThrottle {
  /** Spends `n` bytes just moved; returns the milliseconds to stop reading before moving more. */
  spend(n: number): number;
}

/**
 * A throttle for a splice that outlives the rules it began under (a kept relay stream): the
 * limits in force are looked up again only when their owners' generation has moved, so while no
 * rule changes a chunk costs one number compared, and with no rule at all nothing is spent.
 *
 * @example
 * ```ts
 * import { LiveThrottle } from "./splice.ts";
 * let generation = 0;
 * let limit: { spend(n: number): number } | undefined;
 * const live = new LiveThrottle(() => limit, () => generation);
 * console.assert(live.spend(1_000) === 0);
 * limit = { spend: (n) => n };
 * generation++; // the owner of the rules says they changed
 * console.assert(live.spend(7) === 7);
 * ```
 */
export class LiveThrottle implements SpliceThrottle {
  readonly #lookup: () => SpliceThrottle | undefined;
  readonly #generation: () => number;
  #seen: number;
  #current: SpliceThrottle | undefined;

  /**
   * The limit `lookup()` gives, looked up now and again whenever `generation()` (a number the
   * rules' owners change at every change of a rule) differs from the last one seen.
   */
  constructor(lookup: () => SpliceThrottle | undefined, generation: () => number) {
    this.#lookup = lookup;
    this.#generation = generation;
    this.#seen = generation();
    this.#current = lookup();
  }

  /** The limit in force now; undefined when there is none. */
  current(): SpliceThrottle | undefined {
    const generation = this.#generation();
    if (generation !== this.#seen) {
      this.#seen = generation;
      this.#current = this.#lookup();
    }
    return this.#current;
  }

  /** Spends `n` bytes against the limit in force (none: 0, nothing held). */
  spend(n: number): number {
    const limit = this.current();
    return limit === undefined ? 0 : limit.spend(n);
  }
}

/**
 * Looks at the bytes a splice relays (the client's request inspector), each chunk before it is
 * written on: it must copy what it keeps (the chunk may be reused once it returns) and not throw.
 */
export interface SpliceObserver {
  /** Bytes from `a` to `b`. */
  aToB(chunk: Uint8Array): void;
  /** Bytes from `b` to `a`. */
  bToA(chunk: Uint8Array): void;
}

/**
 * Pipes `a` and `b` into each other until both are closed. `aFirst` is written to `b` before
 * anything else (bytes that arrived with a stream header; not shown to `observer`). `counters`,
 * if given, is updated live; `observer`, if given, sees every later chunk (without one the relay
 * path is the plain one). A direction with a `throttle` stops reading its source for as long as the
 * throttle says after each chunk: the flow is held where it comes from (TCP or yamux window), never
 * buffered here.
 *
 * @example
 * ```ts ignore
 * const result = await splice(streamEnd(stream), transportEnd(socket));
 * ```
 */
export function splice(
  a: PipeEnd,
  b: PipeEnd,
  options: {
    aFirst?: Uint8Array;
    counters?: SpliceCounters;
    observer?: SpliceObserver;
    throttle?: { aToB?: SpliceThrottle; bToA?: SpliceThrottle };
  } = {},
): Promise<SpliceResult> {
  const counters = options.counters ?? { aToB: 0, bToA: 0 };
  return new Promise((resolve) => {
    let open = 2;
    let failure: Error | undefined;
    const forward = (
      from: PipeEnd,
      to: PipeEnd,
      count: (n: number) => void,
      throttle: SpliceThrottle | undefined,
    ): PipeHandlers => {
      let ended = false;
      const handlers: PipeHandlers = {
        // A pure relay: every chunk goes to `to.write` once, claim and all, and is not looked at
        // again, so pooled buffers come back as soon as the other end has written them.
        releases: true,
        data(chunk) {
          count(chunk.length);
          if (!to.write(chunk)) from.pause();
        },
        end() {
          ended = true;
          to.end();
        },
        drain: () => {}, // replaced below: a drain on `to` resumes `from`
        close(error) {
          // Closing before its end arrived (a reset, a dropped socket) is a failure even without
          // an error: the other side must not wait for bytes that will never come.
          if ((error || !ended) && failure === undefined) {
            failure = error ?? new Error("closed before its end");
            to.abort(0);
          }
          if (--open === 0) resolve({ aToB: counters.aToB, bToA: counters.bToA, error: failure });
        },
      };
      if (!throttle) return handlers;
      // Limited: `from` reads again only when `to` has drained and the hold is over.
      let blocked = false;
      let hold: ReturnType<typeof setTimeout> | undefined;
      const close = handlers.close;
      // Bytes may still come after a pause (read before it): they are spent too, and the hold
      // lasts until the debt is paid, however it grew.
      const holdFor = (wait: number) => {
        hold = setTimeout(() => {
          const more = throttle.spend(0);
          if (more > 0) return holdFor(more);
          hold = undefined;
          if (!blocked) from.resume();
        }, Math.ceil(wait));
      };
      handlers.data = (chunk) => {
        count(chunk.length);
        blocked = !to.write(chunk);
        const wait = throttle.spend(chunk.length);
        if (wait > 0 && hold === undefined) holdFor(wait);
        if (blocked || hold !== undefined) from.pause();
      };
      handlers.close = (error) => {
        clearTimeout(hold);
        close(error);
      };
      const resume = () => {
        blocked = false;
        if (hold === undefined) from.resume();
      };
      if (from === a) resumeA = resume;
      else resumeB = resume;
      return handlers;
    };
    // How a throttled source is resumed when the other end drains (unthrottled: resume() alone).
    let resumeA: (() => void) | undefined;
    let resumeB: (() => void) | undefined;
    const aHandlers = forward(a, b, (n) => counters.aToB += n, options.throttle?.aToB);
    const bHandlers = forward(b, a, (n) => counters.bToA += n, options.throttle?.bToA);
    const observer = options.observer;
    if (observer) {
      // Looked at before it is written: once written, a pooled chunk may be reused.
      const aData = aHandlers.data;
      const bData = bHandlers.data;
      aHandlers.data = (chunk) => {
        observer.aToB(chunk);
        aData(chunk);
      };
      bHandlers.data = (chunk) => {
        observer.bToA(chunk);
        bData(chunk);
      };
    }
    aHandlers.drain = resumeB ?? (() => b.resume());
    bHandlers.drain = resumeA ?? (() => a.resume());
    let aBlocked = false;
    if (options.aFirst && options.aFirst.length > 0) {
      counters.aToB += options.aFirst.length;
      aBlocked = !b.write(options.aFirst);
    }
    a.listen(aHandlers);
    b.listen(bHandlers);
    // A stream may arrive paused (after its header was read): let both flow unless blocked.
    if (aBlocked) a.pause();
    else a.resume();
    b.resume();
  });
}
