/**
 * The session's writer. Everything produced in one tick (control frames, window updates, flags and
 * stream data) is assembled into a single buffer and handed to the transport in one write, control
 * frames first. Stream data is shared out round-robin so one busy stream cannot starve the others.
 *
 * Memory is bounded: while the transport pushes back, data stays in the streams' own queues (which
 * report backpressure to their writers) and only control frames queue here, up to a fixed count.
 *
 * @module
 */

import { allocUnsafe } from "../util/bytes/alloc_unsafe.ts";
import { Flag, FrameType, HEADER_LENGTH } from "./constants.ts";
import { writeHeader } from "./header.ts";
import type { SessionConfig } from "./config.ts";
import type { Transport } from "./transport.ts";
import type { Stream } from "./stream.ts";
import { countFrame, type SessionStats } from "./stats.ts";
import { acquireAtLeast, releaseBytes } from "../util/bytes/buffer_pool.ts";

/**
 * Batches larger than this come from the relay pools when the transport gives written chunks
 * back: smaller ones are cheap from a shared slab (`allocUnsafe`), and a pooled buffer is 65 KiB
 * (or 260 KiB) whatever part of it a batch fills.
 */
const POOLED_BATCH = 4 * 1024;

/**
 * Less than this to send is never a chunk with room in front of it: only socket reads of at least
 * 8 KiB and payloads of at least 8 KiB are offered room (`transport/deno/tcp.ts`,
 * `frame_decoder.ts`). Smaller batches are copied without looking.
 */
const FRAMABLE_FROM = 4 * 1024;

/**
 * Data copied into a batch goes in frames of at most this, and streams sending at once share a
 * batch this much at a time, round-robin. Only a chunk sent as it lies (a socket read with room
 * for the header in front) makes a larger frame, up to `maxDataFrameSize`: the receiver gets it in
 * fewer reads, and nothing is copied to build it. Copied into frames of 256 KiB, a bulk transfer
 * cost Bun's sender a tenth more CPU than in frames of 64 KiB.
 */
const BATCH_FRAME = 64 * 1024;

/**
 * A stream's next chunk of at least this much goes out as it lies, behind its header written apart,
 * on a transport that writes large chunks as they are (`Transport.writesLargeAsIs`: Bun's TCP, and
 * our WebSocket over it): two system calls instead of a copy of the chunk, and frames up to
 * `maxDataFrameSize` rather than {@linkcode BATCH_FRAME}, so the receiver relays them in fewer
 * writes. Not for chunks of 64 KiB: a batch carries four of them in one write, where apart they
 * take eight (on Bun an echo of 64 KiB writes ran a tenth slower apart, and as fast as copied from
 * 96 KiB on).
 */
const APART_FROM = 96 * 1024;

/** Assembles and writes frames for one session. */
export class Outbound {
  readonly #transport: Transport;
  readonly #config: SessionConfig;
  readonly #stats: SessionStats;
  #control = new Uint8Array(HEADER_LENGTH * 8);
  #controlLength = 0;
  #queuedPingReplies = 0;
  // Streams with something to send, in the order they asked; each one's `_outboundQueued` says it
  // is here. An array and a flag, not a Set: a Set that goes from one member to none and back on
  // every round trip reallocates its table each time, and iterating it allocates an iterator.
  // Counts rather than `length` (here and in the plan below): an array emptied by `length = 0`
  // gives its storage up and allocates again at the next push.
  #pending: (Stream | undefined)[] = [];
  #pendingCount = 0;
  #scheduled = false;
  #writable = true;
  #closed = false;
  readonly #flushCallback = () => this.flush();
  /** Room left in front of each batch for the transport's framing (see `Transport.headroom`). */
  readonly #headroom: number;
  /** The transport gives written chunks back, so batches may come from a pool. */
  readonly #pooled: boolean;
  /** Data per batch: the config's, or less so a batch fits what the transport frames in place. */
  readonly #batchBudget: number;
  /**
   * The largest chunk a stream's write sends as one frame as it lies, its header written in front
   * (see `#framedInPlace`): `maxDataFrameSize`, or less, so the frame is one message of a
   * transport that frames in place. A relay reads no more than this at once.
   */
  readonly chunkLimit: number;
  /** The largest frame of copied data: {@linkcode BATCH_FRAME}, or `maxDataFrameSize` if less. */
  readonly #batchFrame: number;
  /** Large chunks go out as they lie, their headers written apart (see {@linkcode APART_FROM}). */
  readonly #apart: boolean;
  /** The chunk to write right after the batch that ends with its header. */
  #apartView: Uint8Array | undefined;

  // Plan of the batch being assembled, reused between batches.
  #planStreams: Stream[] = [];
  #planCredit: number[] = [];
  #planData: number[] = [];
  #planCount = 0;

  /** Writes to `transport`, counting into `stats`. */
  constructor(transport: Transport, config: SessionConfig, stats: SessionStats) {
    this.#transport = transport;
    this.#config = config;
    this.#stats = stats;
    this.#headroom = transport.writeFramable ? transport.headroom ?? 0 : 0;
    this.#pooled = transport.releasesWrites === true;
    // Room for the batch's frame headers and control frames under the framable size; a batch that
    // still exceeds it (many streams at once) is split and copied by the transport, as before.
    const framable = this.#headroom > 0 ? transport.framableSize : undefined;
    this.#batchBudget = framable
      ? Math.max(4096, Math.min(config.maxWriteBatch, framable - 4096))
      : config.maxWriteBatch;
    this.#batchFrame = Math.min(config.maxDataFrameSize, BATCH_FRAME);
    this.#apart = transport.writesLargeAsIs === true;
    this.chunkLimit = framable
      ? Math.min(config.maxDataFrameSize, framable - HEADER_LENGTH)
      : config.maxDataFrameSize;
  }

  /** Whether the transport accepted the last write without pushing back. */
  get writable(): boolean {
    return this.#writable;
  }

  /**
   * Queues a header-only control frame (RST, GoAway, ping, refusals); it is never dropped. A queue
   * that reaches `maxQueuedControlFrames` goes to the transport at once while the transport takes
   * writes, so a burst answered within one tick is not held against the peer. Returns false when
   * the queue is full and the transport pushes back: the peer is not reading what we send, and
   * the caller should stop reading it (see {@linkcode backlogged}) until {@linkcode drained}.
   */
  control(type: number, flags: number, streamId: number, length: number): boolean {
    if (this.#closed) return true;
    if (this.#controlFull() && this.#writable) this.#writeControlNow();
    if (this.#controlLength === this.#control.length) {
      const grown = new Uint8Array(this.#control.length * 2);
      grown.set(this.#control);
      this.#control = grown;
    }
    writeHeader(this.#control, this.#controlLength, type, flags, streamId, length);
    this.#controlLength += HEADER_LENGTH;
    countFrame(this.#stats.framesOut, type);
    this.#schedule();
    return !this.backlogged;
  }

  /** The control queue is full and the transport pushes back: stop reading the peer. */
  get backlogged(): boolean {
    return this.#controlFull() && !this.#writable;
  }

  #controlFull(): boolean {
    return this.#controlLength >= this.#config.maxQueuedControlFrames * HEADER_LENGTH;
  }

  /** Hands the queued control frames to the transport now (a copy: the queue buffer is reused). */
  #writeControlNow(): void {
    const out = this.#control.slice(0, this.#controlLength);
    this.#controlLength = 0;
    this.#stats.bytesOut += out.length;
    this.#writable = this.#transport.write(out);
  }

  /** Queues the answer to a ping, unless too many answers already wait (a flood is not answered). */
  pingReply(value: number): boolean {
    if (this.#queuedPingReplies >= this.#config.maxPendingPingReplies) return false;
    this.#queuedPingReplies++;
    return this.control(FrameType.Ping, Flag.ACK, 0, value);
  }

  /** The stream has something to send; it joins the next batch. */
  schedule(stream: Stream): void {
    if (this.#closed) return;
    if (!stream._outboundQueued) {
      stream._outboundQueued = true;
      this.#pending[this.#pendingCount++] = stream;
    }
    this.#schedule();
  }

  /** The transport drained: resume writing. */
  drained(): void {
    this.#writable = true;
    if (this.#controlLength > 0 || this.#pendingCount > 0) this.#schedule();
  }

  /** Stops writing for good; queued frames are dropped. */
  close(): void {
    this.#closed = true;
    for (let i = 0; i < this.#pendingCount; i++) this.#pending[i]!._outboundQueued = false;
    this.#pending = [];
    this.#pendingCount = 0;
    this.#controlLength = 0;
  }

  /** Writes everything that may go out now. Normally runs once per tick on its own. */
  flush(): void {
    this.#scheduled = false;
    while (this.#writable && !this.#closed) {
      const batch = this.#assemble();
      if (batch === null) return;
      this.#stats.bytesOut += batch.length;
      this.#writable = this.#headroom > 0
        ? this.#transport.writeFramable!(batch)
        : this.#transport.write(batch);
      const view = this.#apartView;
      if (view !== undefined) {
        // The frame's payload, whatever the header's write said: a frame is never left half sent.
        this.#apartView = undefined;
        this.#stats.bytesOut += view.length;
        this.#writable = this.#transport.write(view);
      }
      this.#notifyDrains();
    }
  }

  #schedule(): void {
    if (this.#scheduled) return;
    this.#scheduled = true;
    queueMicrotask(this.#flushCallback);
  }

  /**
   * One batch: plan it, share the data budget out, allocate it exactly, then write control frames,
   * header-only frames and data frames into it. Returns null when nothing may go out.
   */
  #assemble(): Uint8Array | null {
    const sendableTotal = this.#plan();
    if (this.#planCount === 0 && this.#controlLength === 0) return null;
    if (this.#planCount === 1) {
      const framed = this.#framedInPlace();
      if (framed !== undefined) return framed;
    }
    if (this.#planCount === 1 && this.#apart && this.#planData[0] >= APART_FROM) {
      const header = this.#headerApart();
      if (header !== undefined) return header;
    }
    if (sendableTotal > this.#batchBudget) this.#shareBudget();
    const size = this.#batchSize();
    // Not zero-filled: every byte handed out (up to `at`) is written below, and zero-filling a
    // 256 KiB batch was a fifth of Bun's CPU time in S3 (see docs/performance.md). Small sizes come
    // from a shared slab (util/bytes/alloc_unsafe.ts), which never hands a region out twice.
    // With headroom, the batch starts that far into its own allocation, so the transport can put
    // its frame header in front without copying the batch (a WebSocket over our own framing).
    // A batch from the relay pool carries its claim to the transport, which gives it back once
    // written (util/bytes/buffer_pool.ts): a bulk sender reuses a few buffers instead of leaving
    // one behind per batch for the garbage collector.
    const h = this.#headroom;
    const pooled = this.#pooled && size > POOLED_BATCH ? acquireAtLeast(h + size) : undefined;
    const out: Uint8Array = pooled !== undefined
      ? pooled.subarray(h, h + size)
      : h > 0
      ? allocUnsafe(h + size).subarray(h)
      : allocUnsafe(size);
    let at = this.#writeControl(out);
    at = this.#writeHeaderFrames(out, at);
    at = this.#writeData(out, at);
    return at === size ? out : out.subarray(0, at);
  }

  /**
   * The batch when it is one stream's next chunk, whole, in one frame (its further chunks follow in
   * the next batches), and the chunk's buffer has room for the header in front of it (a socket
   * read that left it free, `util/bytes/buffer_pool.ts`) and for the transport's headroom in front
   * of that: the header is written there and the chunk goes out as it lies, not copied into a
   * batch. A bulk relay's every read takes this way. Over a transport without headroom, control
   * frames and the stream's window update due now go first, in a small batch of their own, and the
   * chunk follows it ({@linkcode #apartView}), rather than everything copied into one batch.
   * Undefined when it does not apply.
   */
  #framedInPlace(): Uint8Array | undefined {
    // Only large chunks are ever offered room (bulk reads, large payloads): a round trip's small
    // batch skips the lookups.
    if (this.#planData[0] < FRAMABLE_FROM) return undefined;
    const h = this.#headroom;
    const ahead = this.#controlLength > 0 || this.#needsHeaderFrame(0);
    if (ahead && h > 0) return undefined;
    // At most one data frame, and one message of a transport that frames (its framing goes in
    // front of ours).
    const most = Math.min(this.#planData[0], this.chunkLimit);
    const stream = this.#planStreams[0];
    const room = stream._takeFramable(most, h + HEADER_LENGTH);
    if (room === undefined) {
      // A small piece first (the tail of a frame a read cut): it goes alone, so that the large
      // chunk behind it still goes out in place rather than copied in with it.
      const before = stream._bytesBeforeFramable(h + HEADER_LENGTH);
      if (before > 0 && before < this.#planData[0]) this.#planData[0] = before;
      return undefined;
    }
    // The frames ahead take the stream's flags, if any: they are the first on the wire.
    const first = ahead ? this.#framesAhead(0) : undefined;
    const n = room.length - h - HEADER_LENGTH;
    const framed = h > 0 ? room.subarray(h) : room;
    writeHeader(framed, 0, FrameType.Data, stream._takeFlags(), stream.id, n);
    this.#stats.framesOut.data++;
    const joined = h === 0 ? this.#joinAdjacent(stream, framed, this.#planData[0] - n) : framed;
    // A FIN due now goes in the next batch, header-only: nothing may follow the chunk here.
    this.#dropFinished();
    if (first === undefined) return joined;
    this.#apartView = joined;
    return first;
  }

  /**
   * The frames that follow `framed` where they lie: the stream's next chunks, each right behind the
   * one before with its old header's room between (consecutive payloads of one read, as an echo
   * or a session-to-session relay sends them back), framed there too and written with it as one
   * chunk, up to `credit` bytes of data: at most one read, and only one stream is sending. One
   * claim covers the joined chunk: the others each chunk carried are given back here.
   */
  #joinAdjacent(stream: Stream, framed: Uint8Array, credit: number): Uint8Array {
    const buffer = framed.buffer;
    const start = framed.byteOffset;
    let end = start + framed.length;
    while (credit > 0) {
      const most = credit < this.chunkLimit ? credit : this.chunkLimit;
      const next = stream._takeAdjacentFramable(most, HEADER_LENGTH, buffer, end);
      if (next === undefined) break;
      const n = next.length - HEADER_LENGTH;
      writeHeader(next, 0, FrameType.Data, 0, stream.id, n);
      this.#stats.framesOut.data++;
      releaseBytes(framed);
      end += next.length;
      credit -= n;
    }
    return end === start + framed.length ? framed : new Uint8Array(buffer, start, end - start);
  }

  /**
   * The batch when one stream's next chunk lies in one piece of at least {@linkcode APART_FROM}:
   * control frames, the stream's window update if due and the piece's data header, which `flush`
   * writes and then the piece itself, as it lies ({@linkcode #apartView}). A piece is at most one
   * frame; the rest of a larger chunk goes in the next batches. Undefined when it does not apply.
   */
  #headerApart(): Uint8Array | undefined {
    const stream = this.#planStreams[0];
    const view = stream._takeView(Math.min(this.#planData[0], this.chunkLimit), APART_FROM);
    if (view === undefined) {
      // A small piece first (the tail of a chunk cut into frames): it is copied alone, so that the
      // large chunk behind it still goes out as it lies rather than copied in with it.
      const before = stream._bytesBeforeView(APART_FROM);
      if (before > 0 && before < this.#planData[0]) this.#planData[0] = before;
      return undefined;
    }
    const out = this.#framesAhead(HEADER_LENGTH);
    const at = out.length - HEADER_LENGTH;
    writeHeader(out, at, FrameType.Data, stream._takeFlags(), stream.id, view.length);
    this.#stats.framesOut.data++;
    this.#apartView = view;
    // A FIN due now goes in the next batch, header-only: nothing may follow the piece here.
    this.#dropFinished();
    return out;
  }

  /**
   * A small batch of the control frames and the lone planned stream's header frame due now, with
   * `extra` bytes left at its end for the caller (a data header); the transport's headroom in
   * front of it, as any batch has.
   */
  #framesAhead(extra: number): Uint8Array {
    const size = this.#controlLength + (this.#needsHeaderFrame(0) ? HEADER_LENGTH : 0) + extra;
    const h = this.#headroom;
    const out = h > 0 ? allocUnsafe(h + size).subarray(h) : allocUnsafe(size);
    this.#writeHeaderFrames(out, this.#writeControl(out));
    return out;
  }

  /**
   * Fills the plan: the streams with something to send, the credit each returns and how much data
   * it may send. Streams blocked on credit or a SYN slot leave the pending set (they are scheduled
   * again then). Returns the data they could send in all.
   */
  #plan(): number {
    const streams = this.#planStreams;
    const credits = this.#planCredit;
    const data = this.#planData;
    let count = 0;
    let now = -1; // read the clock only if some stream returns credit
    let sendableTotal = 0;
    const pending = this.#pending;
    let kept = 0;
    // The count is read on each turn: a stream scheduled meanwhile is planned too.
    for (let i = 0; i < this.#pendingCount; i++) {
      const stream = pending[i]!;
      if (now < 0 && stream._creditDue) now = performance.now();
      const credit = stream._takeCredit(now);
      const sendable = stream._sendable();
      if (credit === 0 && sendable === 0 && !stream._hasFlags && !stream._finDue()) {
        stream._outboundQueued = false;
        continue;
      }
      pending[kept++] = stream;
      streams[count] = stream;
      credits[count] = credit;
      data[count] = sendable;
      count++;
      sendableTotal += sendable;
    }
    // A loop, not fill(): on Bun, fill() on this array made a round trip several times dearer.
    for (let j = kept; j < this.#pendingCount; j++) pending[j] = undefined;
    this.#pendingCount = kept;
    this.#planCount = count;
    return sendableTotal;
  }

  /** Shares the batch's data budget out round-robin, {@linkcode BATCH_FRAME} at a time. */
  #shareBudget(): void {
    const data = this.#planData;
    const quantum = this.#batchFrame;
    let budget = this.#batchBudget;
    const count = this.#planCount;
    const wants = data.slice(0, count);
    for (let i = 0; i < count; i++) data[i] = 0;
    let progress = true;
    while (budget > 0 && progress) {
      progress = false;
      for (let i = 0; i < count && budget > 0; i++) {
        const n = Math.min(wants[i] - data[i], quantum, budget);
        if (n > 0) {
          data[i] += n;
          budget -= n;
          progress = true;
        }
      }
    }
  }

  /** The batch's exact size, so it is one allocation and needs no copy afterwards. */
  #batchSize(): number {
    const data = this.#planData;
    const maxFrame = this.#batchFrame;
    let size = this.#controlLength;
    for (let i = 0; i < this.#planCount; i++) {
      const n = data[i];
      if (this.#needsHeaderFrame(i)) size += HEADER_LENGTH;
      // Room for the data frames, and for a FIN frame after them should the data end the stream.
      if (n > 0) size += n + (Math.ceil(n / maxFrame) + 1) * HEADER_LENGTH;
    }
    return size;
  }

  /** Control frames go first. Returns where the next frame starts. */
  #writeControl(out: Uint8Array): number {
    out.set(this.#control.subarray(0, this.#controlLength));
    const at = this.#controlLength;
    this.#controlLength = 0;
    this.#queuedPingReplies = 0;
    return at;
  }

  /** Then window updates and flag-only frames (SYN, ACK, a FIN with no data before it). */
  #writeHeaderFrames(out: Uint8Array, at: number): number {
    const streams = this.#planStreams;
    for (let i = 0; i < this.#planCount; i++) {
      const stream = streams[i];
      if (!this.#needsHeaderFrame(i)) continue;
      let flags = stream._takeFlags();
      if (this.#planData[i] === 0 && stream._finDue()) flags |= Flag.FIN;
      writeHeader(out, at, FrameType.WindowUpdate, flags, stream.id, this.#planCredit[i]);
      at += HEADER_LENGTH;
      this.#stats.framesOut.windowUpdate++;
      if (flags & Flag.FIN) stream._finSent();
    }
    return at;
  }

  /**
   * Then data, each stream's share as consecutive frames with SYN/ACK on the first. FIN follows in
   * a header-only frame: libp2p-yamux applies a Data frame's FIN before its payload and would drop
   * the payload, and hashicorp and go-yamux send FIN the same way. A stream with nothing left to
   * send leaves the pending set.
   */
  #writeData(out: Uint8Array, at: number): number {
    const streams = this.#planStreams;
    const maxFrame = this.#batchFrame;
    for (let i = 0; i < this.#planCount; i++) {
      let remaining = this.#planData[i];
      const stream = streams[i];
      while (remaining > 0) {
        const n = remaining < maxFrame ? remaining : maxFrame;
        remaining -= n;
        const flags = stream._takeFlags();
        stream._copyOut(out, at + HEADER_LENGTH, n);
        writeHeader(out, at, FrameType.Data, flags, stream.id, n);
        at += HEADER_LENGTH + n;
        this.#stats.framesOut.data++;
      }
      if (this.#planData[i] > 0 && stream._finDue()) {
        writeHeader(out, at, FrameType.WindowUpdate, Flag.FIN, stream.id, 0);
        at += HEADER_LENGTH;
        this.#stats.framesOut.windowUpdate++;
        stream._finSent();
      }
    }
    this.#dropFinished();
    return at;
  }

  /** Takes the streams with nothing left to send off the pending list, keeping the others' order. */
  #dropFinished(): void {
    const pending = this.#pending;
    let kept = 0;
    for (let i = 0; i < this.#pendingCount; i++) {
      const stream = pending[i]!;
      if (stream._sendable() === 0 && !stream._finDue() && !stream._creditDue) {
        stream._outboundQueued = false;
      } else {
        pending[kept++] = stream;
      }
    }
    // A loop, not fill(): on Bun, fill() on this array made a round trip several times dearer.
    for (let j = kept; j < this.#pendingCount; j++) pending[j] = undefined;
    this.#pendingCount = kept;
  }

  /** A stream needs a header-only frame: credit to return, or flags/FIN that no data frame carries. */
  #needsHeaderFrame(i: number): boolean {
    if (this.#planCredit[i] > 0) return true;
    if (this.#planData[i] > 0) return false;
    const stream = this.#planStreams[i];
    return stream._hasFlags || stream._finDue();
  }

  #notifyDrains(): void {
    const streams = this.#planStreams;
    for (let i = 0; i < this.#planCount; i++) {
      const stream = streams[i];
      if (stream._drainDue()) stream._emitDrain();
    }
  }
}
