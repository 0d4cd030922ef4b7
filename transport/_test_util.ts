/**
 * Helpers shared by the transport tests (not a test file itself).
 *
 * @module
 */

import type { Transport, TransportHandlers } from "../protocol/transport.ts";
import { connectTcp } from "./mod.ts";
import { concat } from "../util/bytes/bytes.ts";

export { pattern, sameBytes } from "../util/bytes/bytes.ts";

/** True under Deno. */
export const isDeno = "Deno" in globalThis;
/** True under Bun. */
export const isBun = "Bun" in globalThis;

/** Hang guard for waits: a broken transport fails the test instead of stalling the run. */
const WAIT_LIMIT_MS = 5000;

/** Records every event of a transport and lets tests await conditions on them. */
export class Probe implements TransportHandlers {
  /** Received chunks, kept as handed over (zero-copy views). */
  chunks: Uint8Array[] = [];
  /** Received byte count. */
  bytes = 0;
  /** Number of end() calls. */
  ends = 0;
  /** Number of drain() calls. */
  drains = 0;
  /** Arguments of every close() call. */
  closes: (Error | undefined)[] = [];
  /** Extra reaction to data (echo servers). */
  onData: ((chunk: Uint8Array) => void) | undefined;
  /** Extra reaction to drain. */
  onDrain: (() => void) | undefined;
  /** Extra reaction to end. */
  onEnd: (() => void) | undefined;
  /** Events in order, for ordering checks. */
  log: string[] = [];
  #waiters = new Set<() => void>();

  data(chunk: Uint8Array): void {
    this.chunks.push(chunk);
    this.bytes += chunk.length;
    this.onData?.(chunk);
    this.#poke();
  }
  drain(): void {
    this.drains++;
    this.log.push("drain");
    this.onDrain?.();
    this.#poke();
  }
  end(): void {
    this.ends++;
    this.log.push("end");
    this.onEnd?.();
    this.#poke();
  }
  close(error?: Error): void {
    this.closes.push(error);
    this.log.push("close");
    this.#poke();
  }

  /** All received bytes joined. */
  received(): Uint8Array {
    return concat(this.chunks);
  }

  /** Resolves once `condition` holds (checked after every event). */
  until(condition: () => boolean, what = "condition"): Promise<void> {
    if (condition()) return Promise.resolve();
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.#waiters.delete(check);
        reject(new Error(`timed out waiting for ${what}`));
      }, WAIT_LIMIT_MS);
      const check = () => {
        if (!condition()) return;
        clearTimeout(timer);
        this.#waiters.delete(check);
        resolve();
      };
      this.#waiters.add(check);
    });
  }

  #poke(): void {
    for (const check of [...this.#waiters]) check();
  }
}

/** Lets timers and I/O run once. */
export function tick(ms = 0): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/**
 * Writes `data` in `chunkSize` slices, honouring backpressure: after a false return it waits for
 * the probe's next drain.
 */
export async function writeAll(
  transport: Transport,
  probe: Probe,
  data: Uint8Array,
  chunkSize = 64 * 1024,
): Promise<void> {
  for (let offset = 0; offset < data.length; offset += chunkSize) {
    const drainsBefore = probe.drains;
    if (!transport.write(data.subarray(offset, offset + chunkSize))) {
      await probe.until(() => probe.drains > drainsBefore, "drain");
    }
  }
}

/** Makes `transport` echo everything back, pausing its reads while its own writes are backed up. */
export function echo(transport: Transport, probe: Probe): void {
  probe.onData = (chunk) => {
    // The chunk is ours to keep, so it can be handed straight to write().
    if (!transport.write(chunk)) transport.pause();
  };
  probe.onDrain = () => transport.resume();
  probe.onEnd = () => transport.end();
}

/**
 * Connects to 127.0.0.1:`port`, sends `bytes`, and resolves with the first `bytes.length` bytes
 * that come back, then closes (a visitor of an echo service or a tunnel).
 */
export function tcpExchange(port: number, bytes: Uint8Array): Promise<Uint8Array> {
  return connectTcp({ hostname: "127.0.0.1", port }).then((t: Transport) =>
    new Promise((resolve, reject) => {
      const got: number[] = [];
      t.start({
        data: (chunk) => {
          got.push(...chunk);
          if (got.length >= bytes.length) {
            t.close();
            resolve(Uint8Array.from(got));
          }
        },
        drain: () => {},
        end: () => {},
        close: (error) => error && reject(error),
      });
      t.write(bytes);
    })
  );
}
