/**
 * A worker's memory as the M1 report records it: taken after a forced full garbage collection, so
 * what remains is what is still referenced (Deno needs `--v8-flags=--expose-gc`).
 *
 * @module
 */

import process from "node:process";

/** One reading of a process's memory, in bytes. */
export interface MemorySnapshot {
  /** Resident set size. */
  rss: number;
  /** JS heap in use. */
  heapUsed: number;
  /** JS heap reserved. */
  heapTotal: number;
  /** Memory outside the JS heap held by JS objects (ArrayBuffers among it). */
  external: number;
}

/** Runs a full collection: `Bun.gc(true)` under Bun, `gc()` under Deno with `--expose-gc`. */
export function forceGc(): void {
  const bun = (globalThis as { Bun?: { gc(force: boolean): void } }).Bun;
  if (bun) return bun.gc(true);
  const gc = (globalThis as { gc?: () => void }).gc;
  if (!gc) throw new Error("no gc(): run Deno with --v8-flags=--expose-gc");
  gc();
}

/**
 * Collects twice (the first pass can leave finalizer-held garbage for the second), lets pending
 * callbacks run in between, then reads `process.memoryUsage()`.
 */
export async function snapshot(): Promise<MemorySnapshot> {
  forceGc();
  await new Promise((resolve) => setTimeout(resolve, 20));
  forceGc();
  const { rss, heapUsed, heapTotal, external } = process.memoryUsage();
  return { rss, heapUsed, heapTotal, external };
}
