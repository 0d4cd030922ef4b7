/**
 * Event delivery shared by every adapter: holds events until `start()` and while paused, keeps
 * their order, and guarantees that `close` is reported exactly once and that nothing follows it.
 * Adapters then only translate socket events; the contract's ordering rules live here once.
 *
 * @module
 */

import type { TransportHandlers } from "../../protocol/transport.ts";
import { forgetBytes } from "../../util/bytes/buffer_pool.ts";
import { Fifo } from "../../util/bytes/fifo.ts";

/** What the owning adapter must do when delivery reaches certain points. */
export interface SinkHooks {
  /** The handler has seen `end()`: lets adapters close once both directions are finished. */
  endDelivered?(): void;
  /** A handler threw. The adapter tears its socket down; the sink then reports `close(error)`. */
  handlerFailed(error: Error): void;
}

/** Turns anything thrown into an `Error`, so `close(error)` always carries one. */
export function toError(value: unknown): Error {
  return value instanceof Error ? value : new Error(String(value));
}

/** Ordered, pause-aware delivery of {@linkcode TransportHandlers} events for one transport. */
export class EventSink {
  #hooks: SinkHooks;
  #handlers: TransportHandlers | undefined;
  // Data and end wait here before start and while paused, so pause() takes effect at once even
  // when the socket already has a read in flight. The end comes after all data: a flag suffices.
  #held = new Fifo<Uint8Array>();
  #endHeld = false;
  #paused = false;
  #flushing = false;
  #endDelivered = false;
  #closed = false;
  #closeReported = false;
  #closeError: Error | undefined;

  /** Creates a sink reporting to the adapter through `hooks`. */
  constructor(hooks: SinkHooks) {
    this.#hooks = hooks;
  }

  /** True once close was reported or scheduled; adapters stop all work then. */
  get closed(): boolean {
    return this.#closed;
  }

  /** True while the owner asked for no data. */
  get paused(): boolean {
    return this.#paused;
  }

  /**
   * True while received data would be held rather than delivered (not started yet, or paused):
   * an adapter whose socket reads on its own stops it then.
   */
  get holding(): boolean {
    return this.#handlers === undefined || this.#paused;
  }

  /** True after the peer's end was handed to the handler. */
  get endDelivered(): boolean {
    return this.#endDelivered;
  }

  /** Installs the handlers and flushes what arrived before. */
  start(handlers: TransportHandlers): void {
    if (this.#handlers) throw new Error("transport already started");
    this.#handlers = handlers;
    if (this.#closed) queueMicrotask(() => this.#deliverClose());
    else this.#flush();
  }

  /**
   * The handler's wish for the next read's size ({@linkcode TransportHandlers.readLimit}), or 0:
   * none while data waits undelivered, since the handler's framing has not seen it yet.
   */
  readLimit(preferred: number, capacity: number): number {
    const handlers = this.#handlers;
    if (handlers?.readLimit === undefined || this.#held.length > 0) return 0;
    return handlers.readLimit(preferred, capacity);
  }

  /** Reports received bytes (held while paused or not started). */
  data(chunk: Uint8Array): void {
    if (this.#closed || chunk.length === 0) return;
    const handlers = this.#handlers;
    if (handlers === undefined || this.#paused || this.#flushing || this.#held.length > 0) {
      this.#held.push(chunk);
      this.#flush();
      return;
    }
    // Nothing waits before it: delivered at once, without a queue entry per chunk.
    this.#flushing = true;
    try {
      this.#deliverData(handlers, chunk);
    } catch (error) {
      this.#hooks.handlerFailed(toError(error));
    } finally {
      this.#flushing = false;
    }
    // Events the handler caused (an end, say) wait in the queue.
    if (this.#held.length > 0 || this.#endHeld) this.#flush();
  }

  #deliverData(handlers: TransportHandlers, chunk: Uint8Array): void {
    // A handler that keeps views on its own terms gets memory no pool will hand out again.
    if (handlers.releases !== true) forgetBytes(chunk);
    handlers.data(chunk);
  }

  /** Reports the peer's half-close, after all data received before it. */
  end(): void {
    if (this.#closed) return;
    this.#endHeld = true;
    this.#flush();
  }

  /** Reports that the write buffer fell under its mark. Not held by pause: it concerns writing. */
  drain(): void {
    if (this.#closed || !this.#handlers) return;
    try {
      this.#handlers.drain();
    } catch (error) {
      this.#hooks.handlerFailed(toError(error));
    }
  }

  /** Stops data delivery until {@linkcode resume}. */
  pause(): void {
    this.#paused = true;
  }

  /** Delivers held events, then lets new ones through. */
  resume(): void {
    if (!this.#paused) return;
    this.#paused = false;
    this.#flush();
  }

  /**
   * Reports close once. Held data is dropped: a closed transport calls nothing more. Delivery waits
   * for a microtask so a handler calling `close()` is never re-entered from inside that call.
   */
  close(error?: Error): void {
    if (this.#closed) return;
    this.#closed = true;
    this.#held.clear();
    this.#endHeld = false;
    this.#closeError = error;
    queueMicrotask(() => this.#deliverClose());
  }

  #deliverClose(): void {
    // Without handlers the close waits for start(), which schedules this again.
    if (!this.#handlers || this.#closeReported) return;
    this.#closeReported = true;
    this.#handlers.close(this.#closeError);
  }

  #flush(): void {
    const handlers = this.#handlers;
    // A handler that causes more events (or resumes) must not nest deliveries: the outer loop
    // picks them up in order.
    if (!handlers || this.#flushing) return;
    this.#flushing = true;
    try {
      // Handlers may pause, close or push more events while we loop; re-check each turn.
      while (!this.#paused && !this.#closed && this.#held.length > 0) {
        this.#deliverData(handlers, this.#held.shift()!);
      }
      if (!this.#paused && !this.#closed && this.#endHeld) {
        this.#endHeld = false;
        this.#endDelivered = true;
        handlers.end();
        this.#hooks.endDelivered?.();
      }
    } catch (error) {
      this.#hooks.handlerFailed(toError(error));
    } finally {
      this.#flushing = false;
    }
  }
}
