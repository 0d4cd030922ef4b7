import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { tcpContract, tcpPairFactory, transportContract } from "../_contract.ts";
import { isDeno } from "../_test_util.ts";
import {
  bulkBuffers,
  relayBuffers,
  releaseBytes,
  takeFrontRoom,
} from "../../util/bytes/buffer_pool.ts";
import { connectDenoTcp, listenDenoTcp, READ_FRONT_ROOM } from "./tcp.ts";

// The native Deno adapter exists only under Deno; elsewhere these suites are reported as skipped.
const adapter = { connect: connectDenoTcp, listen: listenDenoTcp };
transportContract("deno/tcp", tcpPairFactory(adapter), { skip: !isDeno });
tcpContract("deno/tcp", adapter, !isDeno);

/**
 * Sends `total` bytes of a pattern over a fresh Deno TCP pair; the receiving end's handler asks
 * `readLimit` (when given) and shows each chunk to `look` before giving its claim back. Resolves
 * once the end arrived, with the bytes received and how many differed from the pattern.
 */
async function sendBulk(
  total: number,
  look: (chunk: Uint8Array) => void,
  readLimit?: (preferred: number, capacity: number) => number,
): Promise<{ got: number; wrongBytes: number }> {
  const pair = await tcpPairFactory(adapter)({});
  try {
    let got = 0;
    let wrongBytes = 0;
    const done = new Promise<void>((resolve) => {
      pair.b.start({
        releases: true,
        readLimit,
        data(chunk) {
          for (let i = 0; i < chunk.length; i++) {
            if (chunk[i] !== ((got + i) * 7) % 251) wrongBytes++;
          }
          got += chunk.length;
          look(chunk);
          releaseBytes(chunk);
        },
        drain() {},
        end: () => resolve(),
        close() {},
      });
    });
    const payload = new Uint8Array(total);
    for (let i = 0; i < total; i++) payload[i] = (i * 7) % 251;
    pair.a.start({ data() {}, drain() {}, end() {}, close() {} });
    pair.a.write(payload);
    pair.a.end();
    await done;
    return { got, wrongBytes };
  } finally {
    pair.cleanup();
  }
}

describe("deno/tcp reads of bulk data", { skip: !isDeno }, () => {
  it("are handed over with free room in front of them, for a frame header", async () => {
    const total = 2 * 1024 * 1024;
    let large = 0;
    let roomy = 0;
    const sent = await sendBulk(total, (chunk) => {
      if (chunk.length < 8 * 1024) return;
      large++;
      if (chunk.byteOffset === READ_FRONT_ROOM && takeFrontRoom(chunk, 12)) roomy++;
    });
    assert.deepEqual(sent, { got: total, wrongBytes: 0 });
    // The first reads are small (a connection's buffer grows); from 64 KiB on, every large read
    // comes from the pool with its room.
    assert.ok(large > 8, `${large} large reads`);
    assert.ok(roomy >= large - 4, `${roomy} of ${large} large reads had room in front`);
  });

  it("end where the handler's readLimit asks, up to the rest of the pooled buffer", async () => {
    const total = 8 * 1024 * 1024;
    const wish = 66_000; // more than a read takes unasked (65,504 bytes)
    let asked = 0;
    let capacity = 0;
    let longest = 0;
    let exact = 0;
    let wrongPool = 0;
    const sent = await sendBulk(total, (chunk) => {
      longest = Math.max(longest, chunk.length);
      if (chunk.length === wish) exact++;
      // No larger a buffer than the wish needs (pooled reads lie behind the front room).
      const pooled = chunk.byteOffset === READ_FRONT_ROOM;
      if (pooled && chunk.buffer.byteLength !== relayBuffers.size) wrongPool++;
    }, (_preferred, offered) => {
      asked++;
      capacity = offered;
      return wish;
    });
    assert.deepEqual(sent, { got: total, wrongBytes: 0 });
    assert.ok(asked > 0, "asked before pooled reads");
    assert.ok(capacity > wish, `capacity ${capacity}`);
    assert.equal(longest, wish, "no read beyond the wish, and some as long as it");
    assert.ok(exact > 0);
    assert.equal(wrongPool, 0);
  });

  it("grow to 256 KiB while they come full, in bulk buffers, unless the handler asks for less", async () => {
    for (const wish of [0, 40_000]) {
      const total = 16 * 1024 * 1024;
      let longest = 0;
      let bulk = 0;
      const sent = await sendBulk(total, (chunk) => {
        longest = Math.max(longest, chunk.length);
        if (chunk.buffer.byteLength === bulkBuffers.size) bulk++;
      }, () => wish);
      assert.deepEqual(sent, { got: total, wrongBytes: 0 });
      if (wish === 0) {
        assert.equal(longest, 256 * 1024 - READ_FRONT_ROOM);
        assert.ok(bulk > 0);
      } else {
        assert.equal(longest, wish);
        assert.equal(bulk, 0, "a relay buffer holds what was asked for");
      }
    }
  });
});

describe("deno/tcp short reads into bulk buffers", { skip: !isDeno }, () => {
  it("are moved to relay buffers, the bulk buffer kept for the next read", async () => {
    const pair = await tcpPairFactory(adapter)({});
    try {
      const piece = 16_000; // a TLS record's worth
      const pieces = 30;
      let got = 0;
      let inBulk = 0;
      let inRelay = 0;
      const done = new Promise<void>((resolve) => {
        pair.b.start({
          releases: true,
          // Asks for large reads (as a session's decoder does once frames are large).
          readLimit: () => 200_000,
          data(chunk) {
            got += chunk.length;
            if (chunk.buffer.byteLength === bulkBuffers.size) inBulk++;
            if (chunk.buffer.byteLength === relayBuffers.size) inRelay++;
            releaseBytes(chunk);
          },
          drain() {},
          end: () => resolve(),
          close() {},
        });
      });
      pair.a.start({ data() {}, drain() {}, end() {}, close() {} });
      // A first burst grows the reads to pooled ones; then pieces come one at a time.
      pair.a.write(new Uint8Array(1024 * 1024));
      await new Promise((resolve) => setTimeout(resolve, 50));
      for (let i = 0; i < pieces; i++) {
        pair.a.write(new Uint8Array(piece));
        await new Promise((resolve) => setTimeout(resolve, 5));
      }
      pair.a.end();
      await done;
      assert.equal(got, 1024 * 1024 + piece * pieces);
      // Reads of 16,000 bytes asked 200,000: none is handed over in a 260 KiB buffer.
      assert.ok(inRelay >= pieces / 2, `${inRelay} chunks in relay buffers`);
      assert.ok(inBulk <= 8, `${inBulk} chunks in bulk buffers (the burst's full reads)`);
    } finally {
      pair.cleanup();
    }
  });
});
