import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { PairFactory } from "./_contract.ts";
import { transportContract } from "./_contract.ts";
import { pattern, Probe, sameBytes, tick } from "./_test_util.ts";
import { concat } from "../util/bytes/bytes.ts";
import { memoryPair, type MemoryPairOptions } from "./memory.ts";
import { poisonReleasedBuffers, relayBuffers, releaseBytes } from "../util/bytes/buffer_pool.ts";

function factory(extra: MemoryPairOptions = {}): PairFactory {
  return (options) => {
    const [a, b] = memoryPair({ ...extra, ...options });
    return Promise.resolve({
      a,
      b,
      cleanup() {
        a.close();
        b.close();
      },
    });
  };
}

// The same contract as the sockets, under each delivery mode.
transportContract("memory", factory());
transportContract(
  "memory (split, macrotask)",
  factory({ split: { seed: 42 }, delivery: "macrotask" }),
);
transportContract("memory (coalesce)", factory({ coalesce: true }));

describe("memoryPair chunking", () => {
  it("re-splits the stream at seeded random boundaries, reproducibly", async () => {
    const sizes: number[][] = [];
    for (let run = 0; run < 2; run++) {
      const [a, b] = memoryPair({ split: { seed: 9, maxChunk: 64 } });
      const pb = new Probe();
      a.start(new Probe());
      b.start(pb);
      const data = pattern(10_000, 5);
      a.write(data.subarray(0, 5000));
      a.write(data.subarray(5000));
      await pb.until(() => pb.bytes === data.length, "all bytes");
      assert.ok(sameBytes(pb.received(), data));
      sizes.push(pb.chunks.map((c) => c.length));
      assert.ok(pb.chunks.length > 100, "the stream was re-split");
      assert.ok(pb.chunks.some((c) => c.length < 8), "some chunks are tiny");
      assert.ok(pb.chunks.every((c) => c.length <= 64));
      a.close();
    }
    assert.deepEqual(sizes[0], sizes[1]);
  });

  it("takes chunk sizes from a function, across write boundaries", async () => {
    const [a, b] = memoryPair({ split: () => 3 });
    const pb = new Probe();
    a.start(new Probe());
    b.start(pb);
    a.write(new Uint8Array([1, 2]));
    a.write(new Uint8Array([3, 4, 5, 6, 7]));
    await pb.until(() => pb.bytes === 7, "all bytes");
    assert.deepEqual(pb.chunks.map((c) => [...c]), [[1, 2, 3], [4, 5, 6], [7]]);
    a.close();
  });

  it("coalesces writes made in the same tick into one chunk", async () => {
    const [a, b] = memoryPair({ coalesce: true });
    const pb = new Probe();
    a.start(new Probe());
    b.start(pb);
    const parts = [pattern(10, 1), pattern(20, 2), pattern(30, 3)];
    for (const part of parts) a.write(part);
    await pb.until(() => pb.bytes === 60, "all bytes");
    assert.equal(pb.chunks.length, 1);
    assert.ok(sameBytes(pb.chunks[0], concat(parts)));
    a.close();
  });

  it("delivers asynchronously, never inside write()", async () => {
    const [a, b] = memoryPair();
    const pb = new Probe();
    a.start(new Probe());
    b.start(pb);
    a.write(new Uint8Array(4));
    assert.equal(pb.bytes, 0);
    assert.equal(a.bufferedAmount, 4);
    await tick();
    assert.equal(pb.bytes, 4);
    assert.equal(a.bufferedAmount, 0);
    a.close();
  });

  it("names its ends", () => {
    const [a, b] = memoryPair();
    assert.equal(a.localAddress, b.remoteAddress);
    assert.equal(a.remoteAddress, b.localAddress);
    a.close();
  });
});

describe("memory: pooled chunks (util/bytes/buffer_pool.ts)", () => {
  for (const mode of ["split", "coalesce"] as const) {
    it(`a pooled chunk re-cut (${mode}) keeps its buffer until every piece is given back`, async () => {
      const was = poisonReleasedBuffers(true);
      try {
        const options: MemoryPairOptions = mode === "split"
          ? { split: { seed: 7, maxChunk: 5000 } }
          : { coalesce: true };
        const [a, b] = memoryPair(options);
        const payload = pattern(relayBuffers.size, 9);
        const received: Uint8Array[] = [];
        let ended!: () => void;
        let failed!: (error: Error) => void;
        const done = new Promise<void>((resolve, reject) => {
          ended = resolve;
          failed = reject;
        });
        b.start({
          releases: true,
          data(chunk) {
            received.push(chunk.slice());
            releaseBytes(chunk);
            // Whatever went back to the pool is handed out and overwritten at once.
            const other = relayBuffers.acquire();
            other.fill(0);
            releaseBytes(other);
          },
          drain() {},
          end: ended,
          close: (error) => error && failed(error),
        });
        const chunk = relayBuffers.acquire();
        chunk.set(payload);
        a.write(chunk); // with its claim
        a.write(new Uint8Array([1, 2, 3]));
        a.end();
        await done;
        assert.ok(sameBytes(concat(received), concat([payload, new Uint8Array([1, 2, 3])])));
        a.close();
        b.close();
      } finally {
        poisonReleasedBuffers(was);
      }
    });
  }
});
