import assert from "node:assert/strict";
import { afterEach, beforeEach, describe, it } from "node:test";
import {
  BufferPool,
  forgetBytes,
  isPooled,
  offerFrontRoom,
  POISON,
  poisonReleasedBuffers,
  releaseBytes,
  retainBytes,
  takeFrontRoom,
} from "./buffer_pool.ts";

describe("BufferPool", () => {
  let wasPoisoning = false;
  beforeEach(() => wasPoisoning = poisonReleasedBuffers(true));
  afterEach(() => poisonReleasedBuffers(wasPoisoning));

  it("returns a buffer when its last claim is given back, and hands it out again", () => {
    const pool = new BufferPool(64, 4);
    const a = pool.acquire();
    assert.equal(a.length, 64);
    retainBytes(a.subarray(10, 20));
    releaseBytes(a);
    assert.equal(pool.free, 0, "one claim is still out");
    assert.ok(isPooled(a));
    releaseBytes(a.subarray(10, 20));
    assert.equal(pool.free, 1);
    assert.ok(!isPooled(a));
    assert.ok(a.every((b) => b === POISON), "poisoned on return");
    assert.equal(pool.acquire(), a);
    assert.equal(pool.created, 1);
  });

  it("lends the room in front of an offered chunk once, to that chunk only", () => {
    const pool = new BufferPool(64, 4);
    const buffer = pool.acquire();
    const chunk = buffer.subarray(16, 40);
    offerFrontRoom(chunk, 16);
    assert.equal(takeFrontRoom(buffer.subarray(16, 40), 4), undefined, "another view, same place");
    assert.equal(takeFrontRoom(chunk, 17), undefined, "more room than offered");
    const framed = takeFrontRoom(chunk, 12)!;
    assert.equal(framed.buffer, buffer.buffer, "the same memory, not a copy");
    assert.equal(framed.byteOffset, 4);
    assert.equal(framed.length, 36);
    assert.equal(takeFrontRoom(chunk, 12), undefined, "used up: no two frames share the room");
    releaseBytes(framed);
    assert.equal(pool.free, 1, "the widened view carries the chunk's claim");
    // Handed out again, the buffer offers nothing until a new offer.
    const again = pool.acquire();
    assert.equal(takeFrontRoom(again.subarray(16, 40), 12), undefined);
    releaseBytes(again);
  });

  it("offers no more room than lies in front of the view", () => {
    const pool = new BufferPool(64, 4);
    const chunk = pool.acquire().subarray(8);
    offerFrontRoom(chunk, 12);
    assert.equal(takeFrontRoom(chunk, 12), undefined);
    releaseBytes(chunk);
  });

  it("offers no room in memory it does not own or has forgotten", () => {
    const plain = new Uint8Array(64).subarray(16);
    offerFrontRoom(plain, 16);
    assert.equal(takeFrontRoom(plain, 12), undefined);
    const pool = new BufferPool(64, 4);
    const chunk = pool.acquire().subarray(16);
    offerFrontRoom(chunk, 16);
    forgetBytes(chunk);
    assert.equal(takeFrontRoom(chunk, 12), undefined, "handed to code outside the claim rules");
  });

  it("ignores views of memory it does not own", () => {
    const plain = new Uint8Array(8);
    retainBytes(plain);
    releaseBytes(plain);
    releaseBytes(plain);
    forgetBytes(plain);
    assert.ok(!isPooled(plain));
  });

  it("forgets a buffer for good: later releases do nothing and it never comes back", () => {
    const pool = new BufferPool(32, 4);
    const a = pool.acquire();
    retainBytes(a);
    forgetBytes(a.subarray(1));
    releaseBytes(a);
    releaseBytes(a);
    assert.equal(pool.free, 0);
    assert.notEqual(pool.acquire(), a);
  });

  it("keeps at most maxFree buffers", () => {
    const pool = new BufferPool(16, 2);
    const taken = [pool.acquire(), pool.acquire(), pool.acquire()];
    for (const bytes of taken) releaseBytes(bytes);
    assert.equal(pool.free, 2);
    releaseBytes(taken[2]); // dropped from the accounting: nothing to give back
    assert.equal(pool.free, 2);
  });

  it("frees a buffer the full pool turns away at once, and keeps the ones it takes", () => {
    const pool = new BufferPool(16, 2);
    const taken = [pool.acquire(), pool.acquire(), pool.acquire()];
    for (const bytes of taken) releaseBytes(bytes);
    // Detached: its memory went back now, not at the engine's next collection.
    assert.equal(taken[2].buffer.byteLength, 0);
    assert.equal(taken[2].length, 0);
    assert.equal(pool.dropped, 1);
    assert.deepEqual([taken[0].buffer.byteLength, taken[1].buffer.byteLength], [16, 16]);
    assert.equal(pool.acquire().length, 16);
  });

  it("frees no buffer that was forgotten, whatever is released later", () => {
    const pool = new BufferPool(16, 0);
    const a = pool.acquire();
    forgetBytes(a);
    releaseBytes(a);
    assert.equal(a.buffer.byteLength, 16);
    assert.equal(pool.dropped, 0);
  });

  it("adopts a whole buffer made elsewhere and frees it when its last claim comes back", () => {
    const reads = new BufferPool(0, 0);
    const chunk = new Uint8Array(100).fill(7);
    assert.ok(reads.adopt(chunk));
    assert.ok(isPooled(chunk));
    assert.ok(!reads.adopt(chunk), "already tracked");
    const kept = chunk.subarray(10, 20);
    retainBytes(kept); // a stream buffers a view of it
    releaseBytes(chunk); // the session is done parsing
    assert.equal(chunk.buffer.byteLength, 100, "a claim is still out");
    assert.ok(kept.every((b) => b === 7));
    releaseBytes(kept);
    assert.equal(chunk.buffer.byteLength, 0);
    assert.equal(reads.free, 0, "never handed out again");
  });

  it("adopts no part of a buffer, and only its own size into a pool that keeps buffers", () => {
    const whole = new Uint8Array(64);
    assert.ok(!new BufferPool(0, 0).adopt(whole.subarray(8)));
    assert.ok(!new BufferPool(32, 4).adopt(whole));
    const pool = new BufferPool(64, 4);
    assert.ok(pool.adopt(whole));
    releaseBytes(whole);
    assert.equal(pool.free, 1);
    assert.equal(pool.acquire(), whole);
  });

  it("with poisoning, a release without a claim and a late claim throw", () => {
    const pool = new BufferPool(16, 2);
    const a = pool.acquire();
    releaseBytes(a);
    assert.throws(() => releaseBytes(a), /released more often than claimed/);
    assert.throws(() => retainBytes(a), /after its release/);
    assert.equal(pool.strays, 2, "counted, for the metric");
    poisonReleasedBuffers(false);
    releaseBytes(a); // without poisoning: ignored, and counted
    assert.equal(pool.strays, 3);
  });

  it("with poisoning, a write into a returned buffer is caught when it is handed out again", () => {
    const pool = new BufferPool(16, 2);
    const a = pool.acquire();
    releaseBytes(a);
    a[5] = 1;
    assert.throws(() => pool.acquire(), /written at byte 5 after its release/);
  });

  it("poisoning turned on later checks only the buffers that came back poisoned", () => {
    poisonReleasedBuffers(false);
    const pool = new BufferPool(16, 2);
    const before = pool.acquire();
    before.fill(7);
    releaseBytes(before); // back unpoisoned: its bytes are whatever it held
    poisonReleasedBuffers(true);
    assert.equal(pool.acquire(), before, "handed out again, not taken for a write after release");
    releaseBytes(before); // back poisoned now
    before[3] = 1;
    assert.throws(() => pool.acquire(), /written at byte 3 after its release/);
  });
});
