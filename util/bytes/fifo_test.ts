import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { Fifo } from "./fifo.ts";

describe("Fifo", () => {
  it("hands items out in the order they came, and undefined once empty", () => {
    const q = new Fifo<number>();
    assert.equal(q.shift(), undefined);
    assert.equal(q.peek(), undefined);
    for (let i = 0; i < 5; i++) q.push(i);
    assert.equal(q.length, 5);
    assert.equal(q.peek(), 0);
    assert.equal(q.peek(4), 4);
    assert.equal(q.peek(5), undefined);
    assert.deepEqual([q.shift(), q.shift()], [0, 1]);
    assert.equal(q.peek(), 2);
    assert.equal(q.peek(2), 4);
    assert.equal(q.peek(3), undefined, "past the tail, not a shifted slot");
    q.push(5);
    assert.deepEqual([q.shift(), q.shift(), q.shift(), q.shift()], [2, 3, 4, 5]);
    assert.equal(q.length, 0);
    assert.equal(q.shift(), undefined);
  });

  it("keeps the order over many pushes and shifts, interleaved at random, like an array", () => {
    const q = new Fifo<number>();
    const model: number[] = [];
    // A fixed xorshift sequence: the same interleaving on every run.
    let seed = 0x9e3779b9;
    const next = () => {
      seed ^= seed << 13;
      seed ^= seed >>> 17;
      seed ^= seed << 5;
      return (seed >>> 0) / 2 ** 32;
    };
    let n = 0;
    for (let step = 0; step < 20_000; step++) {
      if (next() < 0.55) {
        q.push(n);
        model.push(n++);
      } else {
        assert.equal(q.shift(), model.shift());
      }
      assert.equal(q.length, model.length);
      assert.equal(q.peek(), model[0]);
    }
  });

  it("replaces the last identical item only when queued, calling by only then", () => {
    const a = { id: "a" };
    const b = { id: "b" };
    const q = new Fifo<{ id: string }>();
    q.push(a);
    q.push(b);
    q.push(a);
    let calls = 0;
    const copy = (item: { id: string }) => {
      calls++;
      return { id: item.id + "'" };
    };
    assert.equal(q.replace(a, copy), true);
    assert.deepEqual([q.shift(), q.shift(), q.shift()].map((x) => x!.id), ["a", "b", "a'"]);
    assert.equal(q.replace(a, copy), false, "no longer queued");
    assert.equal(calls, 1);
  });

  it("clears everything, and is usable afterwards", () => {
    const q = new Fifo<string>();
    q.push("x");
    q.push("y");
    q.shift();
    q.clear();
    assert.equal(q.length, 0);
    assert.equal(q.shift(), undefined);
    q.push("z");
    assert.equal(q.peek(), "z");
    assert.equal(q.length, 1);
  });
});
