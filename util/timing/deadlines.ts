/**
 * Deadlines for many short waits that nearly always end well before them (a stream's header, a
 * dial to a local service), kept on one timer. A timer of the runtime's own per wait cost each
 * visitor a timer set and a timer cleared on the hot path of a tunnel (Deno sends both through its
 * op layer); here adding and cancelling a deadline is a set insertion and a deletion, and the one
 * timer fires only when the earliest deadline is due. That timer does not keep the process alive:
 * the wait it guards does.
 *
 * @example
 * ```ts
 * import { Deadlines } from "./deadlines.ts";
 * const deadlines = new Deadlines();
 * let expired = false;
 * const deadline = deadlines.add(10_000, () => expired = true);
 * deadline.cancel(); // the wait ended in time
 * console.assert(!expired && deadlines.size === 0);
 * ```
 *
 * @module
 */

/** One deadline of a {@linkcode Deadlines}; cancel it when the wait ends in time. */
export class Deadline {
  /** @internal */
  constructor(
    readonly owner: Deadlines,
    /** When it is due, on `performance.now()`'s clock. */
    readonly due: number,
    readonly onExpire: () => void,
  ) {}

  /** The wait ended: `onExpire` will not be called. Safe to call more than once, or after expiry. */
  cancel(): void {
    this.owner._remove(this);
  }
}

function unref(timer: ReturnType<typeof setTimeout>): void {
  // Deno's timers are numbers released with Deno.unrefTimer; Bun's and Node's are objects.
  if (typeof timer === "number") {
    (globalThis as { Deno?: { unrefTimer(id: number): void } }).Deno?.unrefTimer(timer);
  } else (timer as { unref?: () => void }).unref?.();
}

/** A set of deadlines served by one timer, each called at most `slackMs` late. */
export class Deadlines {
  readonly #entries = new Set<Deadline>();
  readonly #slackMs: number;
  #timer: ReturnType<typeof setTimeout> | undefined;
  // When the armed timer fires; Infinity when none is armed.
  #armedFor = Infinity;
  readonly #fire = () => this.#expire();

  /** Deadlines may run up to `slackMs` late, so ones due close together share a wakeup. */
  constructor(slackMs = 20) {
    this.#slackMs = slackMs;
  }

  /** Deadlines not yet cancelled or expired. */
  get size(): number {
    return this.#entries.size;
  }

  /** Calls `onExpire` once, `ms` from now, unless the returned deadline is cancelled first. */
  add(ms: number, onExpire: () => void): Deadline {
    const deadline = new Deadline(this, performance.now() + ms, onExpire);
    this.#entries.add(deadline);
    // Waits of one kind are added in the order they fall due: only an earlier one re-arms.
    if (deadline.due + this.#slackMs < this.#armedFor) this.#arm(deadline.due);
    return deadline;
  }

  /** @internal {@linkcode Deadline.cancel}. The timer stays armed: it finds nothing due and stops. */
  _remove(deadline: Deadline): void {
    this.#entries.delete(deadline);
  }

  #arm(due: number): void {
    if (this.#timer !== undefined) clearTimeout(this.#timer);
    this.#armedFor = due;
    this.#timer = setTimeout(this.#fire, Math.max(0, due - performance.now()));
    unref(this.#timer);
  }

  #expire(): void {
    this.#timer = undefined;
    this.#armedFor = Infinity;
    const now = performance.now() + this.#slackMs;
    let next = Infinity;
    for (const deadline of this.#entries) {
      if (deadline.due <= now) {
        this.#entries.delete(deadline);
        deadline.onExpire();
      } else if (deadline.due < next) next = deadline.due;
    }
    // An onExpire that added a deadline may have armed the timer already.
    if (next < this.#armedFor) this.#arm(next);
  }
}

/** The process's deadlines for short waits on the data path: stream headers, dials, delayed ACKs. */
export const sharedDeadlines: Deadlines = new Deadlines();
