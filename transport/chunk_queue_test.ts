import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { ChunkQueue, MAX_BATCH } from "./chunk_queue.ts";
import { MESSAGE_SIZE } from "./ws.ts";
import { pattern, sameBytes } from "./_test_util.ts";

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
  it("joins small chunks up to MAX_BATCH and hands a large head chunk out as views", () => {
    const queue = new ChunkQueue();
    queue.push(new Uint8Array([1]));
    queue.push(new Uint8Array([2, 3]));
    assert.deepEqual([...queue.take(MAX_BATCH)], [1, 2, 3]);
    const big = new Uint8Array(MAX_BATCH + 1);
    queue.push(big);
    const first = queue.take(MAX_BATCH);
    assert.equal(first.length, MAX_BATCH);
    assert.equal(first.buffer, big.buffer, "no copy");
    assert.equal(queue.take(MAX_BATCH).length, 1);
    assert.ok(queue.empty);
    assert.equal(queue.bytes, 0);
  });

  it("hands a lone chunk over without copying", () => {
    const queue = new ChunkQueue();
    const chunk = new Uint8Array(10);
    queue.push(chunk);
    assert.equal(queue.take(MAX_BATCH), chunk);
  });
});
