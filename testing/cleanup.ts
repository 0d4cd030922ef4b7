/**
 * Test support: one place where everything a test started (processes, servers, sockets, temp
 * files) is registered, and {@linkcode cleanup} tears it all down. Test files call it from
 * `after` or `afterEach`, so it runs even when a test fails.
 *
 * @module
 */

const closers = new Set<() => Promise<void> | void>();

/** Registers `closer` to run at the next {@linkcode cleanup}; returns a function that unregisters it. */
export function register(closer: () => Promise<void> | void): () => void {
  closers.add(closer);
  return () => closers.delete(closer);
}

/**
 * Tears down everything this module started and that is still alive: child processes are
 * SIGKILLed (and awaited, bounded), servers and sockets closed, temp files removed. Safe to call
 * any number of times; call it from `after` or `afterEach`, so it runs even when a test fails.
 */
export async function cleanup(): Promise<void> {
  const all = [...closers];
  closers.clear();
  await Promise.allSettled(all.map(async (close) => await close()));
}
