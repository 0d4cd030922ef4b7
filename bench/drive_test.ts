/**
 * The workload drivers against an in-memory echo whose write policy the test sets: an echo whose
 * last write is refused still half-closes once drained, and round trips that cross the end of the
 * pattern block still come back whole.
 */

import { describe, it } from "node:test";
import assert from "node:assert/strict";
import type { Duplex, DuplexHandlers } from "./duplex.ts";
import { CHUNK, echoOne, runRoundTrips } from "./drive.ts";
import { BLOCK_LENGTH } from "./pattern.ts";

/**
 * Echoes every write and the half-close back in a microtask. `accept(n)` says whether the
 * n-th write (from 1) is accepted; a refused write is followed by a `drain` on a later task.
 */
class LoopbackEcho implements Duplex {
  writes = 0;
  ends = 0;
  #handlers?: DuplexHandlers;
  constructor(readonly accept: (n: number) => boolean = () => true) {}
  start(handlers: DuplexHandlers): void {
    this.#handlers = handlers;
  }
  write(chunk: Uint8Array): boolean {
    const copy = chunk.slice();
    queueMicrotask(() => this.#handlers!.data(copy));
    const accepted = this.accept(++this.writes);
    if (!accepted) setTimeout(() => this.#handlers!.drain(), 0);
    return accepted;
  }
  end(): void {
    this.ends++;
    queueMicrotask(() => this.#handlers!.end());
  }
  close(): void {}
}

describe("echoOne", () => {
  it("half-closes after a refused last write drains", async () => {
    const size = 3 * CHUNK;
    const echo = new LoopbackEcho((n) => n !== 3);
    await echoOne(echo, 5, size);
    assert.equal(echo.writes, 3);
    assert.equal(echo.ends, 1);
  });

  it("half-closes once when every write is refused", async () => {
    const echo = new LoopbackEcho(() => false);
    await echoOne(echo, 0, 2 * CHUNK + 7);
    assert.equal(echo.writes, 3);
    assert.equal(echo.ends, 1);
  });
});

describe("runRoundTrips", () => {
  it("completes trips that cross the end of the pattern block", async () => {
    const size = 4096; // the block's odd length puts each wrap mid-trip
    const count = Math.ceil((2 * BLOCK_LENGTH) / size);
    const echo = new LoopbackEcho();
    const latencies = await runRoundTrips(echo, count, size);
    assert.equal(latencies.length, count);
    assert.ok(echo.writes > count, "a crossing trip is written in two pieces");
  });
});
