import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { Buffer } from "node:buffer";
import { Flag, FrameType } from "./constants.ts";
import { Session } from "./session.ts";
import { frame, KeepingPeer, RawPeer, tick } from "./_raw_peer.ts";
import { concat } from "../util/bytes/bytes.ts";
import { BufferPool, isPooled, offerFrontRoom, releaseBytes } from "../util/bytes/buffer_pool.ts";

/** `n` bytes of a pattern that differs per `seed`. */
function bytes(n: number, seed: number): Uint8Array {
  const out = new Uint8Array(n);
  for (let i = 0; i < n; i++) out[i] = (i * 31 + seed) & 0xff;
  return out;
}

/** Runs `body` with a client session (no keepalive) over `peer`, then tears both down. */
async function withSession(peer: RawPeer, body: (session: Session) => Promise<void>) {
  const session = new Session(peer, { client: true, config: { enableKeepAlive: false } });
  try {
    await body(session);
  } finally {
    session.destroy();
    peer.peerClose();
  }
}

/**
 * `size` bytes of pattern `seed` read `room` bytes into a fresh pooled buffer, as a socket's read
 * lands, with that room offered; and the buffer, to tell whether a write went out in place.
 */
function chunkWithRoom(size: number, room: number, seed: number) {
  const buffer = new BufferPool(Math.max(66 * 1024, room + size), 2).acquire();
  const chunk = buffer.subarray(room, room + size);
  chunk.set(bytes(size, seed));
  offerFrontRoom(chunk, room);
  return { buffer, chunk };
}

/** The payload of the last data frame `peer` got on stream `id`, as its own bytes. */
function lastPayload(peer: RawPeer, id: number): Uint8Array {
  return new Uint8Array(peer.framesOf(FrameType.Data, 0, id).at(-1)!.payload);
}

describe("outbound batches", () => {
  it("carry only the frames written, though their memory is not zero-filled", async () => {
    // Leave stale non-zero bytes where the allocator may hand memory out next, so a byte the writer
    // skipped would show up as a broken frame rather than as a harmless zero.
    for (const size of [64, 2048, 100_000, 300_000]) Buffer.allocUnsafe(size).fill(0xee);
    const peer = new RawPeer();
    await withSession(peer, async (session) => {
      const sizes = [1, 5000, 100_000];
      const streams = sizes.map((size, i) => {
        const stream = session.open();
        stream.write(bytes(size, i));
        return stream;
      });
      streams[0].end();
      // The auto-tuning ping, 3 SYNs on 4 data frames (100 000 bytes take two), and one FIN.
      const frames = await peer.waitFrames(6);
      assert.equal(peer.writes, 1, "one tick's frames go out in one write");
      assert.equal(peer.partialBytes, 0, "no bytes after the last frame");
      assert.ok(frames.every((f) => f.version === 0 && f.type <= FrameType.GoAway));
      assert.equal(peer.framesOf(FrameType.Ping, Flag.SYN).length, 1);
      streams.forEach((stream, i) => {
        const data = peer.framesOf(FrameType.Data, 0, stream.id);
        assert.equal(data[0].flags & Flag.SYN, Flag.SYN);
        assert.deepEqual(concat(data.map((f) => f.payload)), bytes(sizes[i], i));
      });
      assert.equal(peer.framesOf(FrameType.WindowUpdate, Flag.FIN, streams[0].id).length, 1);
      assert.equal(frames.length, 6);
    });
  });
});

describe("frame sizes", () => {
  it("data copied into a write goes in frames of 64 KiB", async () => {
    const peer = new RawPeer();
    await withSession(peer, async (session) => {
      const stream = session.open();
      stream.write(bytes(200_000, 1));
      await peer.waitFrames(5);
      const data = peer.framesOf(FrameType.Data, 0, stream.id);
      assert.deepEqual(data.map((f) => f.payload.length), [65_536, 65_536, 65_536, 3_392]);
    });
  });

  it("streams sending at once share each write 64 KiB at a time", async () => {
    const peer = new KeepingPeer();
    await withSession(peer, async (session) => {
      const a = session.open();
      const b = session.open();
      a.write(bytes(200_000, 1));
      b.write(bytes(200_000, 2));
      await peer.waitFrames(9);
      // The first write (the tuning ping and the data) carries 128 KiB of each.
      const first = new RawPeer();
      first.start({ data() {}, drain() {}, end() {}, close() {} });
      first.write(peer.given[0]);
      for (const [stream, seed] of [[a, 1], [b, 2]] as const) {
        const sent = first.framesOf(FrameType.Data, 0, stream.id);
        assert.equal(sent.reduce((n, f) => n + f.payload.length, 0), 131_072);
        const data = peer.framesOf(FrameType.Data, 0, stream.id);
        assert.deepEqual(concat(data.map((f) => f.payload)), bytes(200_000, seed));
      }
    });
  });

  it("a read of 250,000 bytes with room goes out as it lies, in one frame", async () => {
    const peer = new KeepingPeer();
    await withSession(peer, async (session) => {
      const stream = session.open();
      stream.write(bytes(10, 1));
      await peer.waitFrames(2);
      const { buffer, chunk } = chunkWithRoom(250_000, 32, 2);
      stream.write(chunk);
      await peer.waitFrames(3);
      const inPlace = peer.given.at(-1)!;
      assert.equal(inPlace.buffer, buffer.buffer, "no copy");
      assert.equal(inPlace.length, 12 + 250_000);
      assert.deepEqual(lastPayload(peer, stream.id), bytes(250_000, 2));
    });
  });

  it("chunkLimit: the largest frame, or less so that a frame is one framed message", () => {
    const plain = new Session(new RawPeer(), { client: true, config: { enableKeepAlive: false } });
    const framing = new Session(new FramingPeer(), {
      client: true,
      config: { enableKeepAlive: false },
    });
    const small = new Session(new RawPeer(), {
      client: true,
      config: { enableKeepAlive: false, maxDataFrameSize: 1000 },
    });
    try {
      assert.equal(plain.chunkLimit, 256 * 1024);
      assert.equal(framing.chunkLimit, 64 * 1024 - 12);
      assert.equal(small.chunkLimit, 1000);
      assert.equal(plain.open().chunkLimit, 256 * 1024, "what its streams report");
    } finally {
      for (const session of [plain, framing, small]) session.destroy();
    }
  });
});

/** A transport that frames in place, as our WebSocket does: it records what it was given. */
class FramingPeer extends RawPeer {
  readonly headroom = 16;
  readonly framableSize = 64 * 1024;
  readonly framed: Uint8Array[] = [];
  writeFramable(chunk: Uint8Array): boolean {
    this.framed.push(chunk);
    return this.write(chunk);
  }
}

describe("outbound batches for a transport that frames in place", () => {
  it("leave the headroom free in front of each batch and keep under the framable size", async () => {
    const peer = new FramingPeer();
    await withSession(peer, async (session) => {
      const stream = session.open();
      // Under the initial window (256 KiB), so all of it goes out without the peer's credit.
      stream.write(bytes(200_000, 7));
      stream.end();
      const sent = () =>
        peer.framesOf(FrameType.Data, 0, stream.id).reduce((n, f) => n + f.payload.length, 0);
      for (let i = 0; i < 200 && sent() < 200_000; i++) {
        await new Promise((resolve) => setTimeout(resolve, 5));
      }
      assert.ok(peer.framed.length >= 4, `${peer.framed.length} batches`);
      for (const batch of peer.framed) {
        // The headroom is the batch's own: its allocation starts at least that far in front.
        assert.ok(batch.byteOffset >= 16);
        assert.ok(batch.length <= 64 * 1024, `${batch.length}`);
      }
      const data = peer.framesOf(FrameType.Data, 0, stream.id);
      assert.deepEqual(concat(data.map((f) => f.payload)), bytes(200_000, 7));
    });
  });
});

describe("a chunk read with room in front of it", () => {
  it("goes out as it lies, its frame header written in front, once", async () => {
    const peer = new KeepingPeer();
    await withSession(peer, async (session) => {
      const a = session.open();
      const b = session.open();
      // The opening batch (the tuning ping, the SYNs) goes first.
      a.write(bytes(10, 1));
      b.write(bytes(10, 2));
      await peer.waitFrames(3);
      const { buffer, chunk } = chunkWithRoom(40_000, 16, 3);
      const before = peer.given.length;
      a.write(chunk);
      await peer.waitFrames(4);
      const inPlace = peer.given[before];
      assert.equal(inPlace.buffer, buffer.buffer, "no copy: the read's own memory");
      assert.equal(inPlace.byteOffset, 4);
      assert.equal(inPlace.length, 12 + 40_000);
      const frame = peer.framesOf(FrameType.Data, 0, a.id).at(-1)!;
      assert.equal(frame.payload.length, 40_000);
      assert.deepEqual(new Uint8Array(frame.payload), bytes(40_000, 3));

      // The same memory written again (to another stream) is copied: the room was used.
      b.write(chunk);
      await peer.waitFrames(5);
      assert.notEqual(peer.given.at(-1)!.buffer, buffer.buffer);
      assert.deepEqual(
        lastPayload(peer, b.id),
        bytes(40_000, 3),
      );
      // And plain memory is copied into a batch as always.
      a.write(bytes(5000, 4));
      await peer.waitFrames(6);
      assert.equal(peer.given.at(-1)!.length, 12 + 5000);
      assert.deepEqual(
        lastPayload(peer, a.id),
        bytes(5000, 4),
      );
    });
  });

  it("is copied when another stream's frames share the batch", async () => {
    const peer = new KeepingPeer();
    await withSession(peer, async (session) => {
      const a = session.open();
      const b = session.open();
      a.write(bytes(10, 1));
      b.write(bytes(10, 2));
      await peer.waitFrames(3);
      const { buffer, chunk } = chunkWithRoom(20_000, 16, 5);
      a.write(chunk);
      b.write(bytes(100, 6));
      await peer.waitFrames(5);
      const batch = peer.given.at(-1)!;
      assert.notEqual(batch.buffer, buffer.buffer, "two streams' frames: one batch, copied");
      assert.deepEqual(
        lastPayload(peer, a.id),
        bytes(20_000, 5),
      );
      assert.deepEqual(
        lastPayload(peer, b.id),
        bytes(100, 6),
      );
    });
  });
});

describe("a chunk read with room in front of it, to a transport that frames in place", () => {
  it("leaves the transport's headroom in front of the frame header, if the frame fits", async () => {
    const peer = new FramingPeer();
    await withSession(peer, async (session) => {
      const stream = session.open();
      stream.write(bytes(10, 1));
      await peer.waitFrames(2);
      const { buffer: fits, chunk: chunk } = chunkWithRoom(40_000, 32, 8);
      stream.write(chunk);
      await peer.waitFrames(3);
      const framed = peer.framed.at(-1)!;
      assert.equal(framed.buffer, fits.buffer, "framed where it lies");
      assert.equal(framed.byteOffset, 20, "the yamux header right in front, 16 bytes free before");
      assert.deepEqual(
        lastPayload(peer, stream.id),
        bytes(40_000, 8),
      );
      // A frame larger than one message of the transport is copied into batches instead.
      const { buffer: big, chunk: whole } = chunkWithRoom(65_530, 32, 9);
      stream.write(whole);
      const sent = () =>
        peer.framesOf(FrameType.Data, 0, stream.id).reduce((n, f) => n + f.payload.length, 0);
      for (let i = 0; i < 200 && sent() < 10 + 40_000 + 65_530; i++) {
        await new Promise((resolve) => setTimeout(resolve, 5));
      }
      assert.ok(peer.framed.every((c) => c.buffer !== big.buffer));
      const data = peer.framesOf(FrameType.Data, 0, stream.id);
      assert.deepEqual(concat(data.slice(2).map((f) => f.payload)), bytes(65_530, 9));
    });
  });
});

describe("payloads relayed from one session to another", () => {
  /** A relay from a raw inbound peer to a stream of a second session, claims passed on. */
  async function relay(
    body: (inbound: RawPeer, outPeer: KeepingPeer, outId: number) => Promise<void>,
  ) {
    const inbound = new RawPeer();
    const outPeer = new KeepingPeer();
    const from = new Session(inbound, { client: true, config: { enableKeepAlive: false } });
    const to = new Session(outPeer, { client: true, config: { enableKeepAlive: false } });
    try {
      const out = to.open();
      out.write(bytes(10, 1));
      await outPeer.waitFrames(2);
      from.onStream = (stream) => stream.setOnData((chunk) => void out.write(chunk), true);
      await body(inbound, outPeer, out.id);
    } finally {
      from.destroy();
      to.destroy();
      inbound.peerClose();
      outPeer.peerClose();
    }
  }

  /** Hands `wire` to `inbound` as a socket's read lands, 32 bytes into a pooled buffer. */
  function read(inbound: RawPeer, wire: Uint8Array): Uint8Array {
    const buffer = new BufferPool(64 * 1024, 2).acquire();
    buffer.set(wire, 32);
    inbound.handlers.data(buffer.subarray(32, 32 + wire.length));
    return buffer;
  }

  it("goes out where it arrived, its new frame header over its old one", async () => {
    await relay(async (inbound, outPeer, outId) => {
      // The peer's SYN and a 40 000-byte frame.
      const payload = bytes(40_000, 2);
      const buffer = read(inbound, frame(FrameType.Data, Flag.SYN, 2, payload.length, payload));
      await outPeer.waitFrames(3);
      const sent = outPeer.given.at(-1)!;
      assert.equal(sent.buffer, buffer.buffer, "framed where it arrived: no copy");
      assert.equal(sent.byteOffset, 32, "over the decoded header");
      const relayed = outPeer.framesOf(FrameType.Data, 0, outId).at(-1)!;
      assert.deepEqual(new Uint8Array(relayed.payload), payload);
    });
  });

  it("lying back to back in one read go out in one write, each framed over its old header", async () => {
    await relay(async (inbound, outPeer, outId) => {
      // One read: the peer's SYN and three frames.
      const payloads = [bytes(20_000, 2), bytes(9_000, 3), bytes(15_000, 4)];
      const wire = concat([
        frame(FrameType.Data, Flag.SYN, 2, payloads[0].length, payloads[0]),
        frame(FrameType.Data, 0, 2, payloads[1].length, payloads[1]),
        frame(FrameType.Data, 0, 2, payloads[2].length, payloads[2]),
      ]);
      const writes = outPeer.writes;
      const buffer = read(inbound, wire);
      await outPeer.waitFrames(5);
      assert.equal(outPeer.writes, writes + 1, "one write");
      const sent = outPeer.given.at(-1)!;
      assert.equal(sent.buffer, buffer.buffer, "where they arrived: no copy");
      assert.equal(sent.byteOffset, 32);
      assert.equal(sent.length, wire.length);
      const relayed = outPeer.framesOf(FrameType.Data, 0, outId).slice(-3);
      assert.deepEqual(relayed.map((f) => new Uint8Array(f.payload)), payloads);
    });
  });

  it("lying back to back stop at one that does not lie right behind the one before", async () => {
    await relay(async (inbound, outPeer, outId) => {
      const payloads = [bytes(20_000, 5), bytes(9_000, 6)];
      // A window update of another stream lies between the two frames: its bytes are not free.
      const wire = concat([
        frame(FrameType.Data, Flag.SYN, 2, payloads[0].length, payloads[0]),
        frame(FrameType.WindowUpdate, 0, 4, 0),
        frame(FrameType.Data, 0, 2, payloads[1].length, payloads[1]),
      ]);
      const writes = outPeer.writes;
      read(inbound, wire);
      await outPeer.waitFrames(4);
      assert.equal(outPeer.writes, writes + 2, "two writes");
      assert.equal(outPeer.given.at(-2)!.length, 12 + payloads[0].length);
      assert.equal(outPeer.given.at(-1)!.length, 12 + payloads[1].length);
      const relayed = outPeer.framesOf(FrameType.Data, 0, outId).slice(-2);
      assert.deepEqual(relayed.map((f) => new Uint8Array(f.payload)), payloads);
    });
  });
});

describe("a small piece queued ahead of a chunk with room", () => {
  it("goes alone, and the chunk behind it still goes out in place", async () => {
    const peer = new KeepingPeer();
    await withSession(peer, async (session) => {
      const stream = session.open();
      stream.write(bytes(10, 1));
      await peer.waitFrames(2);
      const { buffer, chunk } = chunkWithRoom(30_000, 16, 2);
      stream.write(bytes(100, 3));
      stream.write(chunk);
      await peer.waitFrames(4);
      assert.equal(peer.given.at(-2)!.length, 12 + 100, "the small piece alone");
      assert.equal(peer.given.at(-1)!.buffer, buffer.buffer, "the chunk in place");
      const data = peer.framesOf(FrameType.Data, 0, stream.id);
      assert.deepEqual(
        concat(data.slice(1).map((f) => f.payload)),
        concat([bytes(100, 3), bytes(30_000, 2)]),
      );
    });
  });
});

/**
 * A transport like Bun's TCP: a large chunk goes to the kernel as it lies and alone, and a written
 * chunk's claim is given back at once.
 */
class AsIsPeer extends KeepingPeer {
  readonly writesLargeAsIs = true;
  readonly releasesWrites = true;
  /** Each write's length and where it lay, taken when written (a freed buffer reads empty). */
  readonly shapes: { length: number; buffer: ArrayBufferLike; byteOffset: number }[] = [];
  override write(chunk: Uint8Array): boolean {
    const { length, buffer, byteOffset } = chunk;
    this.shapes.push({ length, buffer, byteOffset });
    const accepted = super.write(chunk);
    releaseBytes(chunk);
    return accepted;
  }
}

/** A session's stream to `peer` that has sent its SYN and may send `credit` bytes more. */
async function openWithCredit(session: Session, peer: RawPeer, credit: number) {
  const stream = session.open();
  stream.write(bytes(10, 0));
  await peer.waitFrames(2);
  peer.send(frame(FrameType.WindowUpdate, Flag.ACK, stream.id, credit));
  await tick();
  return stream;
}

describe("a large chunk to a transport that writes large chunks as they are", () => {
  it("goes out as it lies behind headers written apart, in frames of up to 256 KiB", async () => {
    const peer = new AsIsPeer();
    await withSession(peer, async (session) => {
      const stream = await openWithCredit(session, peer, 1 << 20);
      // A read as Bun hands it over: its own buffer, adopted with one claim.
      const pool = new BufferPool(0, 0);
      const chunk = bytes(640_000, 7) as Uint8Array<ArrayBuffer>;
      assert.ok(pool.adopt(chunk));
      const before = peer.shapes.length;
      stream.write(chunk);
      await peer.waitFrames(2 + 3);
      const writes = peer.shapes.slice(before);
      assert.deepEqual(writes.map((w) => w.length), [12, 262_144, 12, 262_144, 12, 115_712]);
      for (const [i, at] of [[1, 0], [3, 262_144], [5, 524_288]]) {
        assert.equal(writes[i].buffer, chunk.buffer, "no copy: the read's own memory");
        assert.equal(writes[i].byteOffset, at);
      }
      const data = peer.framesOf(FrameType.Data, 0, stream.id).slice(1);
      assert.deepEqual(data.map((f) => f.length), [262_144, 262_144, 115_712]);
      assert.deepEqual(concat(data.map((f) => f.payload)), bytes(640_000, 7));
      // Each piece carried a claim of its own and gave it back once written: the last one freed
      // the read, and none was given back twice.
      assert.equal(isPooled(chunk), false);
      assert.equal(pool.strays, 0);
      assert.equal(pool.dropped, 1);
    });
  });

  it("goes on from where a smaller piece was copied, and its FIN follows it", async () => {
    const peer = new AsIsPeer();
    await withSession(peer, async (session) => {
      const stream = await openWithCredit(session, peer, 1 << 20);
      const before = peer.given.length;
      stream.write(bytes(20_000, 1));
      stream.write(bytes(100_000, 2));
      stream.end();
      await peer.waitFrames(2 + 3);
      const writes = peer.given.slice(before);
      // Under 96 KiB: copied into the batch behind its header. Then the large one apart.
      assert.deepEqual(writes.map((w) => w.length), [12 + 20_000, 12, 100_000, 12]);
      const frames = peer.frames().slice(-3);
      assert.deepEqual(frames.map((f) => [f.type, f.flags, f.length]), [
        [FrameType.Data, 0, 20_000],
        [FrameType.Data, 0, 100_000],
        [FrameType.WindowUpdate, Flag.FIN, 0],
      ]);
      assert.deepEqual(frames[1].payload, bytes(100_000, 2));
    });
  });

  it("on a transport that frames in place too: the headers framed, the piece written", async () => {
    class FramingAsIsPeer extends FramingPeer {
      override readonly framableSize = 160 * 1024;
      readonly writesLargeAsIs = true;
      readonly plain: Uint8Array[] = [];
      override write(chunk: Uint8Array): boolean {
        if (!this.framed.includes(chunk)) this.plain.push(chunk);
        return super.write(chunk);
      }
    }
    const peer = new FramingAsIsPeer();
    await withSession(peer, async (session) => {
      const stream = await openWithCredit(session, peer, 1 << 20);
      const chunk = bytes(300_000, 6);
      const framedBefore = peer.framed.length;
      stream.write(chunk);
      await peer.waitFrames(2 + 2);
      // At most a message of the transport's (160 KiB here) a piece, each behind its header.
      assert.deepEqual(peer.plain.map((w) => w.length), [163_828, 300_000 - 163_828]);
      assert.ok(peer.plain.every((w) => w.buffer === chunk.buffer), "no copy");
      const headers = peer.framed.slice(framedBefore);
      assert.deepEqual(headers.map((h) => h.length), [12, 12]);
      assert.ok(headers.every((h) => h.byteOffset >= 16), "the headroom is free in front");
      const data = peer.framesOf(FrameType.Data, 0, stream.id).slice(1);
      assert.deepEqual(concat(data.map((f) => f.payload)), bytes(300_000, 6));
    });
  });

  it("is copied, four to a write, when it is a chunk of 64 KiB", async () => {
    const peer = new AsIsPeer();
    await withSession(peer, async (session) => {
      const stream = await openWithCredit(session, peer, 1 << 20);
      const before = peer.shapes.length;
      for (let i = 0; i < 4; i++) stream.write(bytes(65_536, 10 + i));
      await peer.waitFrames(2 + 4);
      assert.deepEqual(peer.shapes.slice(before).map((w) => w.length), [4 * (12 + 65_536)]);
    });
  });

  it("is copied into frames of 64 KiB when the transport does not say so", async () => {
    const peer = new KeepingPeer();
    await withSession(peer, async (session) => {
      const stream = await openWithCredit(session, peer, 1 << 20);
      const chunk = bytes(100_000, 3);
      const before = peer.given.length;
      stream.write(chunk);
      await peer.waitFrames(2 + 2);
      const writes = peer.given.slice(before);
      assert.deepEqual(writes.map((w) => w.length), [24 + 100_000]);
      assert.notEqual(writes[0].buffer, chunk.buffer);
      assert.deepEqual(
        peer.framesOf(FrameType.Data, 0, stream.id).slice(1).map((f) => f.length),
        [65_536, 100_000 - 65_536],
      );
    });
  });
});
