import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { Deadlines } from "./deadlines.ts";

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Waits until `done()` holds, for at most two seconds. */
async function until(done: () => boolean): Promise<void> {
  for (let i = 0; i < 200 && !done(); i++) await sleep(10);
  assert.ok(done(), "condition not reached within 2 s");
}

describe("Deadlines", () => {
  it("calls each deadline that was not cancelled, once, in the order they fall due", async () => {
    const deadlines = new Deadlines(0);
    const fired: string[] = [];
    deadlines.add(30, () => fired.push("c"));
    deadlines.add(10, () => fired.push("a"));
    const cancelled = deadlines.add(20, () => fired.push("cancelled"));
    deadlines.add(20, () => fired.push("b"));
    cancelled.cancel();
    assert.equal(deadlines.size, 3);
    await until(() => fired.length === 3);
    await sleep(40);
    assert.deepEqual(fired, ["a", "b", "c"]);
    assert.equal(deadlines.size, 0);
  });

  it("never calls a deadline cancelled before it was due, even with the timer armed for it", async () => {
    const deadlines = new Deadlines(0);
    let calls = 0;
    deadlines.add(15, () => calls++).cancel();
    const later = deadlines.add(30, () => calls += 10);
    await until(() => calls > 0);
    later.cancel(); // after expiry: nothing happens
    assert.equal(calls, 10);
  });

  it("takes deadlines added while others expire", async () => {
    const deadlines = new Deadlines(0);
    const fired: number[] = [];
    deadlines.add(5, () => {
      fired.push(1);
      deadlines.add(5, () => fired.push(2));
    });
    await until(() => fired.length === 2);
    assert.deepEqual(fired, [1, 2]);
  });

  it("with slack, deadlines due close together expire in one wakeup", async () => {
    const deadlines = new Deadlines(1_000);
    const fired: number[] = [];
    deadlines.add(5, () => fired.push(deadlines.size));
    deadlines.add(500, () => fired.push(deadlines.size));
    await until(() => fired.length === 2);
    // The second ran in the same pass as the first, within the slack.
    assert.deepEqual(fired, [1, 0]);
  });

  it("does not keep the process alive for a deadline nobody waits on", async () => {
    // A child would be needed to see the exit; here: an armed timer with nothing left behind it
    // is released, and adding again after expiry arms a new one.
    const deadlines = new Deadlines(0);
    deadlines.add(60_000, () => {}).cancel();
    let fired = false;
    deadlines.add(5, () => fired = true);
    await until(() => fired);
  });
});
