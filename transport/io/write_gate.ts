/**
 * The write side's bookkeeping that every adapter shares, whatever holds its bytes (our
 * {@linkcode ChunkQueue}, Node's socket buffer, the peer's inbox in memory): whether `write` may
 * still take bytes, the high-water mark that makes it answer false, the drain owed after such an
 * answer, and `end()` said once. Adapters keep only how their runtime moves bytes.
 *
 * No allocation and no closure per call: this sits on every write of the data path.
 *
 * @example
 * ```ts
 * import { WriteGate } from "./write_gate.ts";
 * const gate = new WriteGate(10);
 * let buffered = 0;
 * // write(chunk) of an adapter:
 * if (gate.open(false)) buffered += 12;
 * console.assert(gate.underMark(buffered) === false); // the caller must wait for drain
 * buffered = 0; // the runtime took the bytes
 * console.assert(gate.drainDue(buffered) === true); // so the adapter emits drain, once
 * console.assert(gate.drainDue(buffered) === false);
 * ```
 *
 * @module
 */

import { DEFAULT_HIGH_WATER_MARK } from "./chunk_queue.ts";

/** Backpressure and end-of-writing state of one transport. */
export class WriteGate {
  /** Buffered bytes at which `write` answers false. */
  readonly highWaterMark: number;
  #ending = false;
  #needDrain = false;

  /** A gate with `highWaterMark` (default 1 MiB). */
  constructor(highWaterMark: number = DEFAULT_HIGH_WATER_MARK) {
    this.highWaterMark = highWaterMark;
  }

  /** True once `end()` was said: nothing more may be written. */
  get ending(): boolean {
    return this.#ending;
  }

  /** True while a drain is owed: `write` answered false and the buffer is not under the mark yet. */
  get drainOwed(): boolean {
    return this.#needDrain;
  }

  /**
   * Whether `write` may take bytes now: not after close and not after `end()`. A write refused
   * here answers false without a later drain: there is nothing left to wait for.
   */
  open(closed: boolean): boolean {
    return !closed && !this.#ending;
  }

  /**
   * `write`'s answer once the chunk is queued: true while `buffered` is under the mark; otherwise
   * false, and a drain is owed (see {@linkcode drainDue}).
   */
  underMark(buffered: number): boolean {
    if (buffered < this.highWaterMark) return true;
    this.#needDrain = true;
    return false;
  }

  /**
   * After the runtime took bytes: true, once, when a drain is owed and `buffered` fell under the
   * mark. The adapter then emits `drain`.
   */
  drainDue(buffered: number): boolean {
    if (!this.#needDrain || buffered >= this.highWaterMark) return false;
    this.#needDrain = false;
    return true;
  }

  /**
   * `end()`: true the first time, while open; the adapter then flushes what is queued and shuts
   * its write side down. False when already ending or closed: nothing to do.
   */
  end(closed: boolean): boolean {
    if (this.#ending || closed) return false;
    this.#ending = true;
    return true;
  }
}
