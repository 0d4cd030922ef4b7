/**
 * Test-only helpers: a {@linkcode Transport} whose far end is driven by the test (raw bytes in,
 * decoded frames out), a frame builder, and an in-memory transport pair that re-splits and
 * coalesces what it carries. The frame parser here is deliberately independent of
 * `frame_decoder.ts` so the engine's own decoder is not used to judge the engine.
 *
 * @module
 */

import { HEADER_LENGTH } from "./constants.ts";
import type { Transport, TransportHandlers } from "./transport.ts";
import { prng } from "../util/crypto/prng.ts";
import { EACH_TURN, waitFor } from "../testing/wait.ts";
import { concat } from "../util/bytes/bytes.ts";

/** One frame as the session wrote it. */
export interface RawFrame {
  /** Header byte 0. */
  version: number;
  /** Header byte 1. */
  type: number;
  /** Header bytes 2-3. */
  flags: number;
  /** Header bytes 4-7. */
  streamId: number;
  /** Header bytes 8-11. */
  length: number;
  /** The payload of a Data frame (empty for every other type). */
  payload: Uint8Array;
}

/** Builds raw frame bytes. `payload` may be shorter than `length` (or absent) on purpose. */
export function frame(
  type: number,
  flags: number,
  streamId: number,
  length: number,
  payload?: Uint8Array,
  version = 0,
): Uint8Array {
  const body = payload ?? new Uint8Array(0);
  const out = new Uint8Array(HEADER_LENGTH + body.length);
  const view = new DataView(out.buffer);
  view.setUint8(0, version);
  view.setUint8(1, type);
  view.setUint16(2, flags);
  view.setUint32(4, streamId);
  view.setUint32(8, length);
  out.set(body, HEADER_LENGTH);
  return out;
}

/** Resolves after pending microtasks and `times` macrotask turns. */
export async function tick(times = 1): Promise<void> {
  for (let i = 0; i < times; i++) await new Promise((r) => setTimeout(r, 0));
}

/**
 * A transport whose other end is the test. What the session writes is parsed into
 * {@linkcode RawFrame}s; what the test {@linkcode send}s is delivered to the session as is.
 */
export class RawPeer implements Transport {
  readonly remoteAddress = "raw-peer";
  readonly localAddress = "raw-session";
  /** What `write()` returns; set false to simulate a peer that stopped reading. */
  writeReturns = true;
  /** When the session half-closes, answer by closing (as a real peer would). */
  closeOnEnd = true;
  /** The session called `end()`. */
  ended = false;
  /** The session called `close()`. */
  closed = false;
  /** Frames written before `end()`/`close()` was called, counted at that moment. */
  framesAtEnd = -1;
  /** Chunks passed to `write()` (including dropped ones after close). */
  writes = 0;
  /** Writes after close (dropped). */
  writesAfterClose = 0;
  /** Writes after end (a half-closed transport must not be written to; still recorded here). */
  writesAfterEnd = 0;
  /** pause()/resume() calls by the session. */
  paused = false;

  #handlers: TransportHandlers | null = null;
  #frames: RawFrame[] = [];
  #pending = new Uint8Array(0);
  #closeDelivered = false;

  /** Handlers given by the session. */
  get handlers(): TransportHandlers {
    if (this.#handlers === null) throw new Error("transport not started");
    return this.#handlers;
  }

  // ---- Transport (called by the session) ----

  start(handlers: TransportHandlers): void {
    this.#handlers = handlers;
  }

  write(chunk: Uint8Array): boolean {
    this.writes++;
    if (this.closed) {
      this.writesAfterClose++;
      return false;
    }
    if (this.ended) this.writesAfterEnd++;
    this.#parse(chunk.slice());
    return this.writeReturns;
  }

  pause(): void {
    this.paused = true;
  }

  resume(): void {
    this.paused = false;
  }

  end(): void {
    if (this.ended || this.closed) return;
    this.ended = true;
    if (this.framesAtEnd < 0) this.framesAtEnd = this.#frames.length;
    // Answer on a later microtask, after the session finished its own shutdown steps.
    if (this.closeOnEnd) queueMicrotask(() => this.peerClose());
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    if (this.framesAtEnd < 0) this.framesAtEnd = this.#frames.length;
  }

  get bufferedAmount(): number {
    return 0;
  }

  // ---- The test's side ----

  /** Delivers raw bytes to the session (a fresh copy, so the test may reuse its buffer). */
  send(...chunks: Uint8Array[]): void {
    for (const chunk of chunks) this.handlers.data(chunk.slice());
  }

  /** Delivers all `chunks` as one transport chunk. */
  sendCoalesced(...chunks: Uint8Array[]): void {
    this.handlers.data(concat(chunks));
  }

  /** Tells the session the transport drained. */
  drain(): void {
    this.handlers.drain();
  }

  /** Half-closes the peer's side (the session sees end of data). */
  peerEnd(): void {
    this.handlers.end();
  }

  /** Closes the transport from the peer's side (once). */
  peerClose(error?: Error): void {
    if (this.#closeDelivered) return;
    this.#closeDelivered = true;
    this.closed = true;
    if (this.framesAtEnd < 0) this.framesAtEnd = this.#frames.length;
    this.#handlers?.close(error);
  }

  /** Every complete frame the session wrote so far. */
  frames(): RawFrame[] {
    return this.#frames.slice();
  }

  /** Frames matching `type` (and optionally flags all set, and stream id). */
  framesOf(type: number, flags = 0, streamId?: number): RawFrame[] {
    return this.#frames.filter((f) =>
      f.type === type && (f.flags & flags) === flags &&
      (streamId === undefined || f.streamId === streamId)
    );
  }

  /** Bytes written that do not yet form a complete frame. */
  get partialBytes(): number {
    return this.#pending.length;
  }

  /** Waits until the session wrote at least `n` frames. */
  waitFrames(n: number, turns = 5000): Promise<RawFrame[]> {
    return waitFor(() => this.#frames.length >= n, {
      ...EACH_TURN,
      message: `${n} frames`,
      tries: turns,
    }).then(() => this.frames());
  }

  /** Waits until the session ended or closed the transport. */
  async waitGone(turns = 5000): Promise<void> {
    await waitFor(() => this.ended || this.closed, {
      ...EACH_TURN,
      message: "transport end/close",
      tries: turns,
    });
  }

  #parse(chunk: Uint8Array): void {
    let buf = this.#pending.length > 0 ? concat([this.#pending, chunk]) : chunk;
    while (buf.length >= HEADER_LENGTH) {
      const view = new DataView(buf.buffer, buf.byteOffset, buf.byteLength);
      const type = view.getUint8(1);
      const length = view.getUint32(8);
      const payloadLength = type === 0 ? length : 0;
      if (buf.length < HEADER_LENGTH + payloadLength) break;
      this.#frames.push({
        version: view.getUint8(0),
        type,
        flags: view.getUint16(2),
        streamId: view.getUint32(4),
        length,
        payload: buf.slice(HEADER_LENGTH, HEADER_LENGTH + payloadLength),
      });
      buf = buf.subarray(HEADER_LENGTH + payloadLength);
    }
    this.#pending = buf.slice();
  }
}

/** Options of {@linkcode testPair}. */
export interface TestPairOptions {
  /** Seed for re-splitting; without it chunks are delivered as written. */
  seed?: number;
  /** Largest piece a delivery is cut into when re-splitting. Default 4096. */
  maxPiece?: number;
  /** `write()` returns false once this many bytes wait for delivery. Default 64 KiB. */
  highWaterMark?: number;
}

/**
 * Two connected in-memory transports. Writes are delivered on a later macrotask; with a `seed`,
 * everything waiting is coalesced and cut again at random points (including 1-byte pieces).
 */
export function testPair(options: TestPairOptions = {}): [Transport, Transport] {
  const random = options.seed === undefined ? null : prng(options.seed);
  const maxPiece = options.maxPiece ?? 4096;
  const hwm = options.highWaterMark ?? 64 * 1024;
  const a = new PairEnd("a", random, maxPiece, hwm);
  const b = new PairEnd("b", random, maxPiece, hwm);
  a.peer = b;
  b.peer = a;
  return [a, b];
}

class PairEnd implements Transport {
  readonly remoteAddress: string;
  readonly localAddress: string;
  peer!: PairEnd;
  #handlers: TransportHandlers | null = null;
  #early: (() => void)[] = [];
  #queue: Uint8Array[] = [];
  #queued = 0;
  #needDrain = false;
  #scheduled = false;
  #ending = false;
  #closed = false;
  #readPaused = false;
  #inbox: (() => void)[] = [];

  constructor(
    name: string,
    readonly random: (() => number) | null,
    readonly maxPiece: number,
    readonly hwm: number,
  ) {
    this.localAddress = `memory-${name}`;
    this.remoteAddress = `memory-${name === "a" ? "b" : "a"}`;
  }

  start(handlers: TransportHandlers): void {
    this.#handlers = handlers;
    const early = this.#early;
    this.#early = [];
    for (const fn of early) fn();
  }

  write(chunk: Uint8Array): boolean {
    if (this.#closed || this.#ending) return false;
    if (chunk.length === 0) return this.#queued < this.hwm;
    this.#queue.push(chunk);
    this.#queued += chunk.length;
    this.#schedule();
    if (this.#queued >= this.hwm) {
      this.#needDrain = true;
      return false;
    }
    return true;
  }

  pause(): void {
    this.#readPaused = true;
  }

  resume(): void {
    if (!this.#readPaused) return;
    this.#readPaused = false;
    const inbox = this.#inbox;
    this.#inbox = [];
    for (const fn of inbox) this.#emit(fn);
  }

  end(): void {
    if (this.#closed || this.#ending) return;
    this.#ending = true;
    this.#schedule();
  }

  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    this.#queue = [];
    this.#queued = 0;
    this.#handlers = null;
    this.peer.#remoteClosed();
  }

  get bufferedAmount(): number {
    return this.#queued;
  }

  #schedule(): void {
    if (this.#scheduled) return;
    this.#scheduled = true;
    setTimeout(() => this.#flush(), 0);
  }

  #flush(): void {
    this.#scheduled = false;
    if (this.#closed) return;
    if (this.#queued > 0) {
      const pieces = this.#split();
      this.#queue = [];
      this.#queued = 0;
      for (const piece of pieces) this.peer.#receive(piece);
      if (this.#needDrain && !this.#closed) {
        this.#needDrain = false;
        this.#handlers?.drain();
      }
    }
    if (this.#ending && this.#queued === 0 && !this.#closed) this.peer.#remoteEnded();
  }

  #split(): Uint8Array[] {
    if (this.random === null) return this.#queue;
    const all = concat(this.#queue);
    const pieces: Uint8Array[] = [];
    let at = 0;
    while (at < all.length) {
      const r = this.random();
      // A quarter of the pieces are a single byte; the rest are up to maxPiece.
      const n = r < 0.25 ? 1 : 1 + Math.floor(this.random() * this.maxPiece);
      pieces.push(all.subarray(at, Math.min(all.length, at + n)));
      at += n;
    }
    return pieces;
  }

  #emit(fn: () => void): void {
    if (this.#closed) return;
    if (this.#handlers === null) this.#early.push(fn);
    else if (this.#readPaused) this.#inbox.push(fn);
    else fn();
  }

  #receive(piece: Uint8Array): void {
    this.#emit(() => this.#handlers?.data(piece));
  }

  #remoteEnded(): void {
    this.#emit(() => this.#handlers?.end());
  }

  #remoteClosed(): void {
    if (this.#closed) return;
    this.#closed = true;
    const handlers = this.#handlers;
    this.#handlers = null;
    handlers?.close();
  }
}

/** A {@linkcode RawPeer} that also keeps every chunk the session writes, to tell where it lay. */
export class KeepingPeer extends RawPeer {
  /** The chunks passed to `write()`, as given. */
  readonly given: Uint8Array[] = [];
  override write(chunk: Uint8Array): boolean {
    this.given.push(chunk);
    return super.write(chunk);
  }
}
