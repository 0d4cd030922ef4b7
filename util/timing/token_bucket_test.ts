import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { TokenBucket } from "./token_bucket.ts";

describe("token bucket", () => {
  it("admits a burst, then one per 1/rate seconds", () => {
    let now = 1000;
    const bucket = new TokenBucket(5, 3, () => now);
    assert.deepEqual([bucket.take(), bucket.take(), bucket.take(), bucket.take()], [
      true,
      true,
      true,
      false,
    ]);
    now += 199; // 0.995 of a token
    assert.equal(bucket.take(), false);
    now += 1;
    assert.equal(bucket.take(), true);
    assert.equal(bucket.take(), false);
  });

  it("refills no further than its burst", () => {
    let now = 0;
    const bucket = new TokenBucket(100, 4, () => now);
    now += 60_000;
    assert.equal(bucket.tokens, 4);
    assert.ok(bucket.full);
    bucket.take();
    assert.ok(!bucket.full);
  });

  it("goes into debt for bytes already read and says how long to hold", () => {
    let now = 0;
    const bucket = new TokenBucket(1000, 1000, () => now); // 1000 bytes/s, 1000 burst
    assert.equal(bucket.spend(600), 0);
    assert.equal(bucket.spend(900), 500); // 500 in debt at 1000/s: hold 500 ms
    now += 250;
    assert.equal(bucket.tokens, -250);
    now += 250;
    assert.equal(bucket.spend(0), 0);
    // Over a long transfer the bytes let through match the rate: 10 s of 64 KiB chunks.
    let sent = 0;
    now = 10_000;
    const limited = new TokenBucket(100_000, 16_384, () => now);
    const start = now;
    while (now - start < 10_000) {
      sent += 65_536;
      now += limited.spend(65_536);
    }
    const elapsed = (now - start) / 1000;
    assert.ok(Math.abs(sent / elapsed - 100_000) / 100_000 < 0.03, `${sent / elapsed} B/s`);
  });

  it("keeps its tokens across a change of rate, capped by the new burst", () => {
    let now = 0;
    const bucket = new TokenBucket(10, 10, () => now);
    bucket.set(1, 2);
    assert.equal(bucket.tokens, 2);
    bucket.take(2);
    now += 1000;
    assert.equal(bucket.tokens, 1);
  });

  it("takes at a reading of the clock its caller gives, without reading its own", () => {
    let reads = 0;
    const bucket = new TokenBucket(10, 1, () => (reads++, 0));
    reads = 0;
    assert.ok(bucket.take(1, 0));
    assert.ok(!bucket.take(1, 50), "half a token by 50 ms");
    assert.ok(bucket.take(1, 100));
    assert.equal(reads, 0);
  });
});
