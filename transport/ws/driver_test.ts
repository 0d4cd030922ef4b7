// Our own WebSocket endpoint (ws/driver.ts) over a TCP transport that writes large chunks as they
// are (Bun's): what reaches the socket for a large message, from a server and from a client.
// Runs under `deno test -A` and `bun test`.

import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { Transport, TransportHandlers } from "../../protocol/transport.ts";
import { RawSocketDriver } from "./driver.ts";
import { WebSocketTransport } from "./transport.ts";
import { MessageDecoder } from "./frame.ts";
import { pattern, sameBytes } from "../_test_util.ts";
import { concat } from "../../util/bytes/bytes.ts";
import { BufferPool, isPooled, releaseBytes, retainBytes } from "../../util/bytes/buffer_pool.ts";

/** A TCP transport that keeps what it is given: each write's bytes and where they lay. */
class RecordingTcp implements Transport {
  readonly remoteAddress = "127.0.0.1:1";
  readonly localAddress = "127.0.0.1:2";
  readonly bufferedAmount = 0;
  readonly releasesWrites = true;
  readonly writes: { bytes: Uint8Array; buffer: ArrayBufferLike; byteOffset: number }[] = [];
  constructor(readonly writesLargeAsIs: boolean) {}
  start(_handlers: TransportHandlers): void {}
  write(chunk: Uint8Array): boolean {
    this.writes.push({ bytes: chunk.slice(), buffer: chunk.buffer, byteOffset: chunk.byteOffset });
    releaseBytes(chunk);
    return true;
  }
  pause(): void {}
  resume(): void {}
  end(): void {}
  close(): void {}
}

/** A WebSocket transport in `role` over a {@linkcode RecordingTcp}. */
function endpoint(role: "client" | "server", writesLargeAsIs = true) {
  const tcp = new RecordingTcp(writesLargeAsIs);
  const driver = new RawSocketDriver(tcp, { role, maxMessageSize: 1 << 20 });
  const ws = new WebSocketTransport(driver, {
    remoteAddress: tcp.remoteAddress,
    localAddress: tcp.localAddress,
    messageSize: 256 * 1024,
  });
  driver.attach(ws);
  return { tcp, ws };
}

/** The binary messages in `bytes`, as the other side decodes them. */
function messages(bytes: Uint8Array, masked: boolean): Uint8Array[] {
  const out: Uint8Array[] = [];
  new MessageDecoder({ masked, maxMessageSize: 1 << 20 }).push(bytes, (_, m) => out.push(m));
  return out;
}

const turn = () => new Promise((resolve) => setTimeout(resolve, 0));

describe("ws/driver: a large message over TCP that writes large chunks as they are", () => {
  it("from a server: its header in a write of its own, the message after it as it lies", async () => {
    const { tcp, ws } = endpoint("server");
    assert.equal(ws.writesLargeAsIs, true);
    const chunk = pattern(100_000, 1);
    ws.write(chunk);
    await turn();
    assert.deepEqual(tcp.writes.map((w) => w.bytes.length), [10, 100_000]);
    assert.equal(tcp.writes[1].buffer, chunk.buffer, "no copy");
    const got = messages(concat(tcp.writes.map((w) => w.bytes)), false);
    assert.equal(got.length, 1);
    assert.ok(sameBytes(got[0], pattern(100_000, 1)));
    ws.close();
  });

  it("from a client: header and masked message in one write, the message unchanged", async () => {
    const { tcp, ws } = endpoint("client");
    // A read as Bun hands it over, at an odd offset once a first message took its start.
    const pool = new BufferPool(0, 0);
    const read = pattern(150_001, 2) as Uint8Array<ArrayBuffer>;
    assert.ok(pool.adopt(read));
    // Each message written brings a claim of its own (Transport.write): the first takes one.
    retainBytes(read);
    ws.write(read.subarray(0, 50_001));
    ws.write(read.subarray(50_001));
    await turn();
    assert.deepEqual(tcp.writes.map((w) => w.bytes.length), [8 + 50_001, 14 + 100_000]);
    assert.ok(tcp.writes.every((w) => w.buffer !== read.buffer));
    const got = messages(concat(tcp.writes.map((w) => w.bytes)), true);
    assert.ok(sameBytes(concat(got), pattern(150_001, 2)));
    // Each message's claim was given back once it was masked into its frame, none twice: the
    // last one freed the read.
    assert.equal(isPooled(read), false);
    assert.equal(pool.strays, 0);
    assert.equal(pool.dropped, 1);
    ws.close();
  });

  it("a small chunk ahead of it goes in its message: a client's one write, a server's header apart", async () => {
    for (const role of ["client", "server"] as const) {
      const { tcp, ws } = endpoint(role);
      const pool = new BufferPool(0, 0);
      const read = pattern(100_000, 6) as Uint8Array<ArrayBuffer>;
      assert.ok(pool.adopt(read));
      // A session's frame header, then the payload it sends as it lies.
      ws.write(pattern(12, 7));
      ws.write(read);
      await turn();
      const sizes = tcp.writes.map((w) => w.bytes.length);
      if (role === "client") {
        assert.deepEqual(sizes, [14 + 100_012]);
        assert.equal(isPooled(read), false, "the payload's claim was given back");
      } else {
        assert.deepEqual(sizes, [10, 12, 100_000]);
        assert.equal(tcp.writes[2].buffer, read.buffer, "no copy");
      }
      const got = messages(concat(tcp.writes.map((w) => w.bytes)), role === "client");
      assert.equal(got.length, 1, role);
      assert.ok(sameBytes(got[0], concat([pattern(12, 7), pattern(100_000, 6)])), role);
      assert.equal(pool.strays, 0);
      ws.close();
    }
  });

  it("a small chunk ahead of a full-size one is a message of its own, not joined with a part", async () => {
    const { tcp, ws } = endpoint("client");
    ws.write(pattern(12, 8));
    ws.write(pattern(256 * 1024, 9));
    await turn();
    assert.deepEqual(tcp.writes.map((w) => w.bytes.length), [6 + 12, 14 + 256 * 1024]);
    const got = messages(concat(tcp.writes.map((w) => w.bytes)), true);
    assert.deepEqual(got.map((m) => m.length), [12, 256 * 1024]);
    ws.close();
  });

  it("small ones are joined into a message as before", async () => {
    const { tcp, ws } = endpoint("server");
    ws.write(pattern(10_000, 3));
    ws.write(pattern(5_000, 4));
    await turn();
    assert.deepEqual(tcp.writes.map((w) => w.bytes.length), [4 + 15_000]);
    ws.close();
  });

  it("is copied into its frame where the TCP transport does not say so", async () => {
    const { tcp, ws } = endpoint("server", false);
    assert.equal(ws.writesLargeAsIs, false);
    const chunk = pattern(100_000, 5);
    ws.write(chunk);
    await turn();
    assert.deepEqual(tcp.writes.map((w) => w.bytes.length), [10 + 100_000]);
    assert.notEqual(tcp.writes[0].buffer, chunk.buffer);
    ws.close();
  });
});
