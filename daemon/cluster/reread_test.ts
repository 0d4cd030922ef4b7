import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { randomSequence } from "../../testing/random_sequence.ts";
import { sleep, waitFor } from "../../testing/wait.ts";
import { RereadTimer } from "./reread.ts";

describe("RereadTimer", () => {
  it("runs once, after a delay drawn uniformly below the bound", async () => {
    const runs: number[] = [];
    const reread = new RereadTimer({
      spreadMs: 200,
      random: randomSequence(0.5),
      run: () => runs.push(performance.now()),
    });
    const scheduledAt = performance.now();
    assert.equal(reread.schedule(), 100, "random 0.5 of 200 ms");
    assert.equal(reread.pending, true);
    assert.deepEqual(runs, [], "not at once");
    await waitFor(() => runs.length > 0, { timeoutMs: 10_000, message: "the re-read" });
    // A timer never fires before its delay (1 ms: the runtimes' clocks round to it).
    assert.ok(runs[0] - scheduledAt >= 99, `ran ${runs[0] - scheduledAt} ms after scheduling`);
    assert.equal(reread.pending, false);
    await sleep(250);
    assert.equal(runs.length, 1, "once");
    reread.stop();
  });

  it("NATS lost again during the delay drops the re-read: two flaps, one re-read", async () => {
    let runs = 0;
    const reread = new RereadTimer({
      spreadMs: 400,
      random: randomSequence(0.9, 0.5, 0.1),
      run: () => runs++,
    });
    assert.equal(reread.schedule(), 360, "back");
    reread.cancel(); // away again
    assert.equal(reread.pending, false);
    assert.equal(reread.schedule(), 200, "back");
    reread.cancel(); // away again
    assert.equal(reread.schedule(), 40, "back, and stays");
    await waitFor(() => runs > 0, { timeoutMs: 10_000, message: "the re-read" });
    // Past both dropped delays: had either stayed, it would have run by now.
    await sleep(400);
    assert.equal(runs, 1);
    reread.stop();
  });

  it("a second return without a loss in between replaces the pending re-read", async () => {
    let runs = 0;
    const reread = new RereadTimer({
      spreadMs: 300,
      random: randomSequence(0.5, 0.1),
      run: () => runs++,
    });
    reread.schedule();
    reread.schedule();
    await sleep(300);
    assert.equal(runs, 1);
    reread.stop();
  });

  it("stopping drops the pending re-read, and nothing is scheduled after", async () => {
    let runs = 0;
    const reread = new RereadTimer({ spreadMs: 100, random: () => 0.5, run: () => runs++ });
    reread.schedule();
    reread.stop();
    assert.equal(reread.pending, false, "no timer left to keep the process alive");
    assert.equal(reread.schedule(), -1);
    assert.equal(reread.pending, false);
    await sleep(150);
    assert.equal(runs, 0);
  });

  it("a bound of 0 re-reads at once; a random source at 1 still stays below the bound", () => {
    let runs = 0;
    const now = new RereadTimer({ spreadMs: 0, random: () => 0.7, run: () => runs++ });
    assert.equal(now.schedule(), 0);
    assert.equal(runs, 1, "at once, as before the spreading");
    assert.equal(now.pending, false);
    const edge = new RereadTimer({ spreadMs: 50, random: () => 1, run: () => runs++ });
    assert.equal(edge.schedule(), 49);
    edge.stop();
  });
});
