/**
 * A first-in, first-out queue for hot paths: one array that is never shifted, read from a head
 * index and reused once emptied.
 *
 * Why not an array's `push` and `shift`: JavaScriptCore (Bun) changes how an array stores its
 * items when it is shifted, and optimized code that pushed to arrays stored the other way is
 * thrown away when it meets one; a stream's buffer of received chunks cost 700 such
 * deoptimizations of its receive path in a 1 GiB transfer. `shift` also moves every item left.
 *
 * @example
 * ```ts
 * import { Fifo } from "./fifo.ts";
 *
 * const q = new Fifo<string>();
 * q.push("a");
 * q.push("b");
 * console.assert(q.shift() === "a" && q.length === 1 && q.peek() === "b");
 * ```
 *
 * @module
 */

/** A FIFO queue of `T` (never `undefined`): push at the tail, shift from the head. */
export class Fifo<T> {
  // Items are #items[#head] to #items[#tail - 1]; slots outside hold undefined, so shifted items
  // are not kept alive. The array is kept when the queue empties (indices back to 0).
  #items: (T | undefined)[] = [];
  #head = 0;
  #tail = 0;

  /** How many items are queued. */
  get length(): number {
    return this.#tail - this.#head;
  }

  /** Appends `item` at the tail. */
  push(item: T): void {
    this.#items[this.#tail++] = item;
  }

  /** Removes and returns the head item; undefined when empty. */
  shift(): T | undefined {
    if (this.#head === this.#tail) return undefined;
    const item = this.#items[this.#head];
    this.#items[this.#head++] = undefined;
    if (this.#head === this.#tail) this.#head = this.#tail = 0;
    return item;
  }

  /** The item `index` places behind the head (0: the head) without removing it; undefined past the tail. */
  peek(index = 0): T | undefined {
    const at = this.#head + index;
    return at < this.#tail ? this.#items[at] : undefined;
  }

  /**
   * Replaces the last queued item identical to `item` by what `by` makes of it; false (and `by`
   * not called) when `item` is not queued.
   */
  replace(item: T, by: (item: T) => T): boolean {
    for (let i = this.#tail - 1; i >= this.#head; i--) {
      if (this.#items[i] !== item) continue;
      this.#items[i] = by(item);
      return true;
    }
    return false;
  }

  /** Drops every item (and the references to them). */
  clear(): void {
    this.#items.fill(undefined, this.#head, this.#tail);
    this.#head = this.#tail = 0;
  }
}
