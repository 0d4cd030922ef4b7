/**
 * The client side of every scenario: echo streams whose every byte is verified, a bulk stream and
 * sequential round trips, all over {@linkcode Duplex}. Timing starts after connecting and warm-up.
 *
 * @module
 */

import type { Duplex, DuplexHandlers, Opener } from "./duplex.ts";
import { segment, verify } from "./pattern.ts";

/** Bytes per write: the same for every implementation. */
export const CHUNK = 64 * 1024;

/**
 * Writes `size` pattern bytes (stream offset `base`) with backpressure, half-closes, and resolves
 * once the peer half-closed after echoing exactly those bytes. Rejects on the first wrong byte.
 */
export function echoOne(duplex: Duplex, base: number, size: number): Promise<void> {
  return new Promise((resolve, reject) => {
    let sent = 0;
    let received = 0;
    let ended = false;
    let failed = false;
    const fail = (error: Error) => {
      if (failed) return;
      failed = true;
      duplex.close();
      reject(error);
    };
    // Ends only once every byte was accepted: a refused last write still waits for its drain.
    const pump = () => {
      while (sent < size) {
        const chunk = segment(base, sent, Math.min(CHUNK, size - sent));
        sent += chunk.length;
        if (!duplex.write(chunk)) return;
      }
      ended = true;
      duplex.end();
    };
    const handlers: DuplexHandlers = {
      data(chunk) {
        if (failed) return;
        if (received + chunk.length > size) {
          return fail(new Error(`echo longer than the ${size} bytes sent`));
        }
        if (!verify(base, received, chunk)) {
          return fail(
            new Error(`echo differs within bytes ${received}..${received + chunk.length}`),
          );
        }
        received += chunk.length;
        // A library that never reports the peer's half-close ends at the expected length.
        if (duplex.endless && received === size) handlers.end();
      },
      drain: () => {
        if (!failed && !ended) pump();
      },
      end() {
        if (failed) return;
        failed = true; // settled: a late end or error changes nothing
        duplex.close();
        if (received !== size) reject(new Error(`echo ended after ${received} of ${size} bytes`));
        else resolve();
      },
      error: fail,
    };
    duplex.start(handlers);
    pump();
  });
}

/** Runs `count` verified echo streams of `size` bytes, `inflight` at a time. */
export async function runStreams(
  open: Opener,
  count: number,
  size: number,
  inflight: number,
): Promise<void> {
  let next = 0;
  const worker = async () => {
    while (next < count) {
      const index = next++;
      // A distinct block offset per stream, so crossed streams cannot verify.
      await echoOne(await open(), index * 977, size);
    }
  };
  await Promise.all(Array.from({ length: Math.min(inflight, count) }, worker));
}

/**
 * `count` sequential round trips of `size` bytes on one stream; resolves with each one's latency in
 * microseconds. Every echo is verified.
 */
export function runRoundTrips(duplex: Duplex, count: number, size: number): Promise<number[]> {
  return new Promise((resolve, reject) => {
    const latencies: number[] = [];
    let trip = 0;
    let got = 0;
    let started = 0;
    let done = false;
    const fail = (error: Error) => {
      if (done) return;
      done = true;
      duplex.close();
      reject(error);
    };
    // A round trip that crosses the end of the pattern block goes out as two writes.
    const send = () => {
      got = 0;
      started = performance.now();
      for (let at = 0; at < size;) {
        const piece = segment(0, trip * size + at, size - at);
        duplex.write(piece);
        at += piece.length;
      }
    };
    const handlers: DuplexHandlers = {
      data(chunk) {
        if (done) return;
        if (got + chunk.length > size || !verify(0, trip * size + got, chunk)) {
          return fail(new Error(`round trip ${trip}: wrong echo`));
        }
        got += chunk.length;
        if (got < size) return;
        latencies.push((performance.now() - started) * 1000);
        if (++trip < count) return send();
        duplex.end();
        if (duplex.endless) handlers.end();
      },
      drain() {},
      end() {
        if (done) return;
        done = true;
        duplex.close();
        if (trip < count) reject(new Error(`stream ended after ${trip} of ${count} round trips`));
        else resolve(latencies);
      },
      error: fail,
    };
    duplex.start(handlers);
    send();
  });
}

/** The `p` quantile (0..1) of ascending `sorted`, nearest rank as the Go peer computes it. */
export function quantile(sorted: readonly number[], p: number): number {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * p))];
}
