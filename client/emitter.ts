/**
 * A minimal typed event emitter (the client's events are few and typed; EventTarget's untyped
 * CustomEvents would lose that).
 *
 * @module
 */

/** Emits events named by the keys of `Events`, with the listed arguments. */
export class Emitter<Events extends { [K in keyof Events]: unknown[] }> {
  readonly #listeners = new Map<keyof Events, Set<(...args: unknown[]) => void>>();

  /** Adds a listener; returns a function that removes it. */
  on<K extends keyof Events>(event: K, listener: (...args: Events[K]) => void): () => void {
    let set = this.#listeners.get(event);
    if (!set) this.#listeners.set(event, set = new Set());
    const stored = listener as unknown as (...args: unknown[]) => void;
    set.add(stored);
    return () => set.delete(stored);
  }

  /** Calls every listener of `event`; a throwing listener does not stop the others. */
  protected emit<K extends keyof Events>(event: K, ...args: Events[K]): void {
    for (const listener of this.#listeners.get(event) ?? []) {
      try {
        listener(...args);
      } catch (error) {
        queueMicrotask(() => {
          throw error;
        });
      }
    }
  }
}
