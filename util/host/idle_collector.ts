/**
 * A full garbage collection once a process has gone quiet after its memory grew. After a burst of
 * connections a Deno process keeps what the burst made it take (2,000 connections: the daemon
 * idle + 28 MiB, for good), and V8 gives it back only when its heap next fills, which an idle
 * daemon never does; one full collection in the quiet that follows returns most of it (+12 MiB,
 * at a cost of 20–70 ms of an idle process's time). Bun's engine does that by itself within a
 * couple of seconds, so {@linkcode collectWhenIdle} starts nothing there.
 *
 * @example
 * ```ts
 * import { IdleCollector } from "./idle_collector.ts";
 * let rss = 50e6;
 * let collected = 0;
 * const collector = new IdleCollector({
 *   cpuMs: () => 0,
 *   rssBytes: () => rss,
 *   collect: () => { collected++; rss = 52e6; },
 * });
 * collector.check(); // the level it starts from
 * rss = 80e6;
 * collector.check(); // quiet, and 30 MB above it: collects
 * console.assert(collected === 1);
 * ```
 *
 * @module
 */

import { nodeBuiltin } from "./host.ts";
import { currentRuntime } from "./runtime.ts";

/** What {@linkcode IdleCollector} reads and does: the process's CPU time, its RSS, a collection. */
export interface IdleCollectorProbes {
  /** CPU time used so far (user and system), in milliseconds. */
  cpuMs(): number;
  /** Resident memory now, in bytes. */
  rssBytes(): number;
  /** A full garbage collection, at once. */
  collect(): void;
}

/** When {@linkcode IdleCollector} collects. */
export interface IdleCollectorOptions {
  /** Growth of the RSS above its level after the last collection that is worth one. Default 8 MiB. */
  growthBytes?: number;
  /** Most CPU time used since the last check for the process to count as quiet. Default 20 ms. */
  quietCpuMs?: number;
}

/**
 * Decides, at each {@linkcode check} (every {@linkcode CHECK_EVERY_MS} when started by
 * {@linkcode collectWhenIdle}), whether to collect: only when the process used almost no CPU since
 * the last check and its RSS grew by `growthBytes` since the last collection. A collection that
 * returns nothing raises the level, so memory in use never makes it collect again and again.
 */
export class IdleCollector {
  readonly #probes: IdleCollectorProbes;
  readonly #growth: number;
  readonly #quiet: number;
  #lastCpu: number | undefined;
  #level: number | undefined;
  #broken = false;
  /** Collections made. */
  collections = 0;

  /** A collector reading and acting through `probes`. */
  constructor(probes: IdleCollectorProbes, options: IdleCollectorOptions = {}) {
    this.#probes = probes;
    this.#growth = options.growthBytes ?? 8 * 1024 * 1024;
    this.#quiet = options.quietCpuMs ?? 20;
  }

  /**
   * One look: collects if the process is quiet and grew; returns whether it did. A probe that
   * throws (a runtime without one) ends the collector's work for good instead of failing its
   * caller, a timer.
   */
  check(): boolean {
    if (this.#broken) return false;
    try {
      return this.#check();
    } catch {
      this.#broken = true;
      return false;
    }
  }

  #check(): boolean {
    const cpu = this.#probes.cpuMs();
    const quiet = this.#lastCpu !== undefined && cpu - this.#lastCpu <= this.#quiet;
    this.#lastCpu = cpu;
    const rss = this.#probes.rssBytes();
    if (this.#level === undefined || rss < this.#level) this.#level = rss;
    if (!quiet || rss < this.#level + this.#growth) return false;
    this.#probes.collect();
    this.collections++;
    this.#level = this.#probes.rssBytes();
    // The collection's own time is not the process's work.
    this.#lastCpu = this.#probes.cpuMs();
    return true;
  }
}

/** How often {@linkcode collectWhenIdle} looks. */
export const CHECK_EVERY_MS = 2000;

interface NodeProcess {
  cpuUsage(): { user: number; system: number };
}

/**
 * Starts an {@linkcode IdleCollector} for this process on Deno (nothing elsewhere), looking every
 * {@linkcode CHECK_EVERY_MS} on a timer that does not keep the process alive. Returns what stops
 * it.
 */
export function collectWhenIdle(): () => void {
  if (currentRuntime() !== "deno") return () => {};
  const collector = new IdleCollector({
    cpuMs: () => {
      // Looked up here, not at start: on Deno the first touch loads part of its Node layer.
      const { user, system } = (globalThis as unknown as { process: NodeProcess }).process
        .cpuUsage();
      return (user + system) / 1000;
    },
    rssBytes: () => Deno.memoryUsage().rss,
    collect: fullCollection,
  });
  const timer = setInterval(() => collector.check(), CHECK_EVERY_MS);
  Deno.unrefTimer(timer);
  return () => clearInterval(timer);
}

let gc: (() => void) | undefined;

/**
 * A full collection now, on V8 (Deno, Node): its `gc` function, which a flag set at run time
 * exposes to contexts made after it. Loaded on first use.
 */
export function fullCollection(): void {
  if (gc === undefined) {
    nodeBuiltin("node:v8").setFlagsFromString("--expose-gc");
    gc = nodeBuiltin("node:vm").runInNewContext("gc") as () => void;
  }
  gc();
}
