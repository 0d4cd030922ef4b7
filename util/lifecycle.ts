/**
 * A small explicit state machine for lifecycles (session, client, daemon): a transition table and
 * listeners. It is for events that happen a few times in an object's life, never per frame.
 *
 * @module
 */

/** `table[state][event]` is the next state; a missing entry means the event is not allowed there. */
export type TransitionTable<S extends string, E extends string> = Record<
  S,
  Partial<Record<E, S>>
>;

/** Called after every transition. */
export type TransitionListener<S extends string, E extends string> = (
  to: S,
  from: S,
  event: E,
) => void;

/**
 * Holds a current state and moves it only along the table's transitions.
 *
 * @example
 * ```ts
 * import { Lifecycle } from "./lifecycle.ts";
 * const door = new Lifecycle<"open" | "shut", "close" | "open">(
 *   { open: { close: "shut" }, shut: { open: "open" } },
 *   "open",
 * );
 * door.fire("close");
 * console.assert(door.state === "shut");
 * console.assert(door.fire("close") === false); // not allowed from "shut"
 * ```
 */
export class Lifecycle<S extends string, E extends string> {
  readonly #table: TransitionTable<S, E>;
  readonly #listeners: TransitionListener<S, E>[] = [];
  #state: S;

  /** Starts in `initial`. */
  constructor(table: TransitionTable<S, E>, initial: S) {
    this.#table = table;
    this.#state = initial;
  }

  /** The current state. */
  get state(): S {
    return this.#state;
  }

  /** Whether `event` is allowed in the current state. */
  can(event: E): boolean {
    return this.#table[this.#state][event] !== undefined;
  }

  /** Applies `event`; returns false (and changes nothing) when the table does not allow it. */
  fire(event: E): boolean {
    const from = this.#state;
    const to = this.#table[from][event];
    if (to === undefined) return false;
    this.#state = to;
    for (const listener of this.#listeners) listener(to, from, event);
    return true;
  }

  /** Registers a listener called after each transition. */
  onTransition(listener: TransitionListener<S, E>): void {
    this.#listeners.push(listener);
  }
}
