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
  /** How many bytes the next read should take (see `TransportHandlers.readLimit`). */
  readLimit?(preferred: number, capacity: number): number;
  /**
   * `data` follows the claim rules of `util/bytes/buffer_pool.ts`: each chunk is written to the
   * other end once, with its claim, and not read afterwards (see `TransportHandlers.releases`).
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
  /** The largest chunk a write sends whole, without copying it; 0 for no limit. */
  readonly chunkLimit: number;
}

/** A yamux stream as a {@linkcode PipeEnd}. */
export function streamEnd(stream: Stream): PipeEnd {
  return new StreamEnd(stream);
}

/** A transport (socket) as a {@linkcode PipeEnd}. */
export function transportEnd(transport: Transport): PipeEnd {
  return new TransportEnd(transport);
}

/** The smallest read size a splice asks its source for (see `Direction.readLimit`). */
const MIN_READ_LIMIT = 16 * 1024;

// Every visitor's splice makes two ends and two directions: classes, so that a connection costs a
// few objects, not the thirty closures and objects that handler objects of arrows took.

class StreamEnd implements PipeEnd {
  readonly #stream: Stream;

  constructor(stream: Stream) {
    this.#stream = stream;
  }

  get chunkLimit(): number {
    return this.#stream.chunkLimit;
  }

  listen(handlers: PipeHandlers): void {
    this.#stream.listen(handlers);
  }

  write(chunk: Uint8Array): boolean {
    return this.#stream.write(chunk);
  }

  end(): void {
    this.#stream.end();
  }

  pause(): void {
    this.#stream.pause();
  }

  resume(): void {
    this.#stream.resume();
  }

  abort(reason: number): void {
    this.#stream.reset(reason);
  }
}

class TransportEnd implements PipeEnd {
  readonly #transport: Transport;

  /** A socket takes chunks of any size as they are. */
  readonly chunkLimit = 0;

  constructor(transport: Transport) {
    this.#transport = transport;
  }

  listen(handlers: PipeHandlers): void {
    this.#transport.start(handlers);
  }

  write(chunk: Uint8Array): boolean {
    return this.#transport.write(chunk);
  }

  end(): void {
    this.#transport.end();
  }

  pause(): void {
    this.#transport.pause();
  }

  resume(): void {
    this.#transport.resume();
  }

  abort(): void {
    this.#transport.close();
  }
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

/** What {@linkcode splice} and {@linkcode spliceThen} take besides the two ends. */
export interface SpliceOptions {
  /** Written to `b` before anything else (bytes that arrived with a stream header). */
  aFirst?: Uint8Array;
  /** Updated live with the bytes each way. */
  counters?: SpliceCounters;
  /** Sees every chunk after `aFirst`; without one the relay path is the plain one. */
  observer?: SpliceObserver;
  /** What holds each direction's bytes (rate limits); none: nothing does. */
  throttle?: { aToB?: SpliceThrottle; bToA?: SpliceThrottle };
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
export function splice(a: PipeEnd, b: PipeEnd, options: SpliceOptions = {}): Promise<SpliceResult> {
  return new Promise((resolve) => spliceThen(a, b, options, resolve));
}

/**
 * {@linkcode splice} with a callback: `done` is called once, when both ends are closed (in the
 * same turn, if they already are). What a visitor's path uses: a promise and its reaction per
 * visitor are work for nothing there, and cold code pays for each.
 */
export function spliceThen(
  a: PipeEnd,
  b: PipeEnd,
  options: SpliceOptions,
  done: (result: SpliceResult) => void,
): void {
  const shared = new SpliceState(options.counters ?? { aToB: 0, bToA: 0 }, done);
  const observer = options.observer;
  const aToB = new Direction(shared, a, b, true, options.throttle?.aToB, observer);
  const bToA = new Direction(shared, b, a, false, options.throttle?.bToA, observer);
  aToB.reverse = bToA;
  bToA.reverse = aToB;
  let aBlocked = false;
  if (options.aFirst && options.aFirst.length > 0) {
    shared.counters.aToB += options.aFirst.length;
    aBlocked = !b.write(options.aFirst);
  }
  // Each direction listens to its source: `a` reports to a→b, `b` to b→a.
  a.listen(aToB);
  b.listen(bToA);
  // A stream may arrive paused (after its header was read): let both flow unless blocked.
  if (aBlocked) a.pause();
  else a.resume();
  b.resume();
}

/** What both directions of one splice share: the counters and how the splice ends. */
class SpliceState {
  readonly counters: SpliceCounters;
  readonly #resolve: (result: SpliceResult) => void;
  #open = 2;
  /** The first failure of either side. */
  failure: Error | undefined;

  constructor(counters: SpliceCounters, resolve: (result: SpliceResult) => void) {
    this.counters = counters;
    this.#resolve = resolve;
  }

  /** One side is closed; the splice is over when both are. */
  closed(): void {
    if (--this.#open === 0) {
      this.#resolve({ aToB: this.counters.aToB, bToA: this.counters.bToA, error: this.failure });
    }
  }
}

/**
 * The handlers of one direction's source: its bytes go to `to`, its end ends `to`; its drain lets
 * the opposite direction (which writes into it) go on; its close ends the splice's part it had.
 */
class Direction implements PipeHandlers {
  // A pure relay: every chunk goes to `to.write` once, claim and all, and is not looked at
  // again, so pooled buffers come back as soon as the other end has written them.
  readonly releases = true;
  /** The opposite direction, set once both exist. */
  reverse!: Direction;
  readonly #shared: SpliceState;
  readonly #from: PipeEnd;
  readonly #to: PipeEnd;
  readonly #aToB: boolean;
  readonly #throttle: SpliceThrottle | undefined;
  readonly #observer: SpliceObserver | undefined;
  #ended = false;
  // Limited only: `to` refused more (waiting for its drain), and the hold the throttle asked for.
  #blocked = false;
  #hold: ReturnType<typeof setTimeout> | undefined;

  constructor(
    shared: SpliceState,
    from: PipeEnd,
    to: PipeEnd,
    aToB: boolean,
    throttle: SpliceThrottle | undefined,
    observer: SpliceObserver | undefined,
  ) {
    this.#shared = shared;
    this.#from = from;
    this.#to = to;
    this.#aToB = aToB;
    this.#throttle = throttle;
    this.#observer = observer;
  }

  data(chunk: Uint8Array): void {
    // Looked at before it is written: once written, a pooled chunk may be reused.
    const observer = this.#observer;
    if (observer !== undefined) {
      if (this.#aToB) observer.aToB(chunk);
      else observer.bToA(chunk);
    }
    const counters = this.#shared.counters;
    if (this.#aToB) counters.aToB += chunk.length;
    else counters.bToA += chunk.length;
    const throttle = this.#throttle;
    if (throttle === undefined) {
      if (!this.#to.write(chunk)) this.#from.pause();
      return;
    }
    // Limited: `from` reads again only when `to` has drained and the hold is over.
    this.#blocked = !this.#to.write(chunk);
    const wait = throttle.spend(chunk.length);
    if (wait > 0 && this.#hold === undefined) this.#holdFor(wait);
    if (this.#blocked || this.#hold !== undefined) this.#from.pause();
  }

  /**
   * Reads no larger than what the other end sends whole (a stream over a WebSocket: a message),
   * unless that is small: a small frame size is met by copying, as reads of a few KiB would cost a
   * system call each.
   */
  readLimit(preferred: number): number {
    const limit = this.#to.chunkLimit;
    return limit >= MIN_READ_LIMIT && limit < preferred ? limit : 0;
  }

  end(): void {
    this.#ended = true;
    this.#to.end();
  }

  drain(): void {
    // Our source drained: what the opposite direction writes into it may flow again.
    this.reverse.#resumeSource();
  }

  close(error?: Error): void {
    clearTimeout(this.#hold);
    // Closing before its end arrived (a reset, a dropped socket) is a failure even without
    // an error: the other side must not wait for bytes that will never come.
    const shared = this.#shared;
    if ((error || !this.#ended) && shared.failure === undefined) {
      shared.failure = error ?? new Error("closed before its end");
      this.#to.abort(0);
    }
    shared.closed();
  }

  /** `to` drained: read `from` again, unless a hold is still on. */
  #resumeSource(): void {
    this.#blocked = false;
    if (this.#hold === undefined) this.#from.resume();
  }

  // Bytes may still come after a pause (read before it): they are spent too, and the hold
  // lasts until the debt is paid, however it grew.
  #holdFor(wait: number): void {
    this.#hold = setTimeout(() => {
      const more = this.#throttle!.spend(0);
      if (more > 0) return this.#holdFor(more);
      this.#hold = undefined;
      if (!this.#blocked) this.#from.resume();
    }, Math.ceil(wait));
  }
}
