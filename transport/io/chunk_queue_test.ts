import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { ChunkQueue, JOIN_BELOW, MAX_BATCH } from "./chunk_queue.ts";
import { MESSAGE_SIZE } from "../ws/transport.ts";
import { pattern, sameBytes } from "../_test_util.ts";

const KIB = 1024;

describe("ChunkQueue", () => {
  it("coalesces small chunks into one message and splits big ones without copying", () => {
    const q = new ChunkQueue();
    q.push(new Uint8Array([1, 2]));
    q.push(new Uint8Array([3]));
    assert.deepEqual([...q.take(MESSAGE_SIZE)], [1, 2, 3]);
    assert.ok(q.empty);
    const big = pattern(3 * MESSAGE_SIZE + 5, 1);
    q.push(big);
    const parts = [
      q.take(MESSAGE_SIZE),
      q.take(MESSAGE_SIZE),
      q.take(MESSAGE_SIZE),
      q.take(MESSAGE_SIZE),
    ];
    assert.deepEqual(parts.map((p) => p.length), [MESSAGE_SIZE, MESSAGE_SIZE, MESSAGE_SIZE, 5]);
    assert.ok(parts.every((p) => p.buffer === big.buffer), "split parts are views");
    assert.equal(q.bytes, 0);
  });

  it("joins across chunk boundaries, cutting the last one, and puts refused messages back first", () => {
    const q = new ChunkQueue();
    const data = pattern(200 * KIB, 2);
    for (let i = 0; i < data.length; i += 3000) q.push(data.subarray(i, i + 3000));
    const first = q.take(MESSAGE_SIZE);
    assert.equal(first.length, MESSAGE_SIZE);
    q.unshift(first);
    const out: Uint8Array[] = [];
    while (!q.empty) out.push(q.take(MESSAGE_SIZE));
    assert.ok(out.every((m) => m.length <= MESSAGE_SIZE));
    assert.ok(sameBytes(new Uint8Array(out.flatMap((m) => [...m])), data));
  });
});

describe("ChunkQueue as a TCP write queue", () => {
  it("joins small chunks up to the cap, and stops before a large one", () => {
    const queue = new ChunkQueue();
    queue.push(new Uint8Array([1]));
    queue.push(new Uint8Array([2, 3]));
    const big = new Uint8Array(JOIN_BELOW);
    queue.push(big);
    assert.deepEqual([...queue.takeWrite(MAX_BATCH)], [1, 2, 3]);
    assert.equal(queue.takeWrite(MAX_BATCH), big, "a large chunk goes out alone, not copied");
    for (let i = 0; i < 3; i++) queue.push(new Uint8Array(JOIN_BELOW - 1));
    assert.equal(queue.takeWrite(2 * JOIN_BELOW).length, 2 * (JOIN_BELOW - 1), "the cap holds");
    assert.equal(queue.takeWrite(2 * JOIN_BELOW).length, JOIN_BELOW - 1);
    assert.ok(queue.empty);
    assert.equal(queue.bytes, 0);
  });

  // A mux batch is 256 KiB of data plus frame headers: cut at MAX_BATCH, each one's tail was
  // joined to the next batch, which copied every byte of a bulk transfer.
  it("hands chunks larger than the cap over whole, one per write, without copying", () => {
    const queue = new ChunkQueue();
    const batches = [0, 1, 2].map(() => new Uint8Array(MAX_BATCH + 48));
    for (const batch of batches) queue.push(batch);
    for (const batch of batches) assert.equal(queue.takeWrite(MAX_BATCH), batch);
    assert.ok(queue.empty);
  });

  // Found by a bulk transfer after many small ones (2026-11-26): a join that crossed the point
  // where the queue compacts its array copied chunks from the old array, already sent ones.
  it("joins correctly across the queue's compaction of a long backlog", () => {
    const queue = new ChunkQueue();
    for (let i = 0; i < 1100; i++) queue.push(new Uint8Array([i & 0xff]));
    assert.equal(queue.takeWrite(1020).length, 1020);
    const joined = queue.takeWrite(40); // the head passes 1024 half-way
    assert.deepEqual([...joined], Array.from({ length: 40 }, (_, i) => (1020 + i) & 0xff));
    assert.equal(queue.bytes, 40);
    assert.deepEqual(
      [...queue.takeWrite(100)],
      Array.from({ length: 40 }, (_, i) => (1060 + i) & 0xff),
    );
  });

  it("hands a lone chunk over without copying", () => {
    const queue = new ChunkQueue();
    const chunk = new Uint8Array(10);
    queue.push(chunk);
    assert.equal(queue.takeWrite(MAX_BATCH), chunk);
  });
  it("peek shows the next chunk as pushed and shift removes it whole", () => {
    const queue = new ChunkQueue();
    assert.equal(queue.peek(), undefined);
    const a = new Uint8Array([1, 2, 3]);
    const b = new Uint8Array([4]);
    queue.push(a);
    queue.push(b);
    assert.equal(queue.peek(), a);
    assert.equal(queue.shift(), a, "the same array, not a copy");
    assert.equal(queue.bytes, 1);
    assert.equal(queue.shift(), b);
    assert.ok(queue.empty);
  });
});

describe("ChunkQueue as a write queue where writes cost more than copies", () => {
  it("joins a relayed read's large and small pieces into one write, in order", () => {
    const q = new ChunkQueue();
    const large = pattern(64 * KIB - 12, 1);
    const small = pattern(1000, 2);
    const next = pattern(60 * KIB, 3);
    q.push(large);
    q.push(small);
    q.push(next);
    const out = q.takeJoined(MAX_BATCH);
    assert.equal(out.length, large.length + small.length + next.length);
    assert.ok(sameBytes(out.subarray(0, large.length), large));
    assert.ok(sameBytes(out.subarray(large.length, large.length + 1000), small));
    assert.ok(sameBytes(out.subarray(large.length + 1000), next));
    assert.ok(q.empty);
  });

  it("hands large chunks over whole, one per write, when no small one is among them", () => {
    const q = new ChunkQueue();
    const a = pattern(64 * KIB, 1);
    const b = pattern(64 * KIB, 2);
    q.push(a);
    q.push(b);
    assert.equal(q.takeJoined(MAX_BATCH), a);
    assert.equal(q.takeJoined(MAX_BATCH), b);
  });

  it("never joins past the cap", () => {
    const q = new ChunkQueue();
    const sizes = [200 * KIB, 1 * KIB, 100 * KIB];
    for (const [i, n] of sizes.entries()) q.push(pattern(n, i));
    assert.equal(q.takeJoined(MAX_BATCH).length, 201 * KIB);
    assert.equal(q.takeJoined(MAX_BATCH).length, 100 * KIB);
    assert.ok(q.empty);
  });

  it("a lone small chunk goes as it is", () => {
    const q = new ChunkQueue();
    const only = pattern(JOIN_BELOW - 1, 5);
    q.push(only);
    assert.equal(q.takeJoined(MAX_BATCH), only);
  });
});
