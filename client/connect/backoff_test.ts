import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { Backoff } from "./backoff.ts";

describe("Backoff", () => {
  it("doubles its ceiling up to the cap, with full jitter below it", () => {
    const ceilings: number[] = [];
    const backoff = new Backoff({ initialMs: 100, maxMs: 1000, random: () => 0.999999 });
    for (let i = 0; i < 7; i++) ceilings.push(backoff.next());
    assert.deepEqual(ceilings, [99, 199, 399, 799, 999, 999, 999]);
    const low = new Backoff({ initialMs: 100, random: () => 0 });
    assert.equal(low.next(), 0, "full jitter reaches zero");
  });

  it("resets after a stable connection, not after a short one", () => {
    const backoff = new Backoff({ initialMs: 100, stableMs: 5000, random: () => 0.5 });
    backoff.next();
    backoff.next();
    backoff.connectionEnded(4999);
    assert.equal(backoff.attempt, 2);
    backoff.connectionEnded(5000);
    assert.equal(backoff.attempt, 0);
    assert.equal(backoff.next(), 50);
  });

  it("resets after a connection that carried traffic, however short", () => {
    const backoff = new Backoff({ initialMs: 100, stableMs: 5000, random: () => 0.5 });
    for (let i = 0; i < 5; i++) backoff.next();
    backoff.connectionEnded(10, false);
    assert.equal(backoff.attempt, 5, "a short connection without traffic proves nothing");
    backoff.connectionEnded(10, true);
    assert.equal(backoff.attempt, 0);
    assert.ok(backoff.next() < 100, "the next delay is below the first ceiling");
  });

  it("keeps growing against a daemon that accepts and then drops its clients", () => {
    const backoff = new Backoff({ initialMs: 100, maxMs: 1000, random: () => 0.999999 });
    const delays: number[] = [];
    for (let i = 0; i < 6; i++) {
      delays.push(backoff.next());
      backoff.connectionEnded(5); // authenticated, then dropped at once, no stream
    }
    assert.deepEqual(delays, [99, 199, 399, 799, 999, 999]);
  });
});
