/**
 * One yamux stream: a reliable, ordered, flow-controlled byte pipe inside a session.
 *
 * The fast interface is callbacks plus a boolean `write()`, in the style of a Node socket: no
 * promise or Web Stream per chunk. `readable`, `writable` and async iteration are adapters built on
 * top (see `web_streams.ts`) and cost nothing unless used.
 *
 * @module
 */

import { INITIAL_STREAM_WINDOW, MAX_UINT32 } from "./constants.ts";
import { YamuxError } from "./errors.ts";
import { nextStreamState, type StreamEvent, StreamState } from "./stream_state.ts";
import type { SessionConfig } from "./config.ts";
import type { TransportHandlers } from "./transport.ts";
import { toReadable, toWritable } from "./web_streams.ts";
import { Fifo } from "../util/bytes/fifo.ts";
import {
  forgetBytes,
  hasFrontRoom,
  releaseBytes,
  retainBytes,
  takeFrontRoom,
} from "../util/bytes/buffer_pool.ts";

/** What a stream needs from its session. Implemented by `Session`; not for applications. */
export interface StreamHost {
  /** The session's validated configuration. */
  readonly config: SessionConfig;
  /** Smoothed round-trip time in milliseconds, 0 until measured. */
  readonly rtt: number;
  /** The largest chunk a write sends as one frame without copying it (see `Stream.chunkLimit`). */
  readonly chunkLimit: number;
  /** The stream has something to send (data, flags or credit): include it in the next write. */
  schedule(stream: Stream): void;
  /** Queues an RST frame for the stream, carrying `code` in its length field. */
  sendReset(stream: Stream, code: number): void;
  /** Asks for up to `bytes` of window growth within the session budget; returns what was granted. */
  reserveWindow(bytes: number): number;
  /** We sent FIN while the peer has not: start the close timeout. */
  halfClosed(stream: Stream): void;
  /** The stream reached a final state: forget it and give back its window growth. */
  finished(stream: Stream, windowGrowth: number): void;
  /**
   * The stream keeps `view` (a piece of the chunk being parsed) while its reader is paused; `end`
   * marks it for {@linkcode Stream._holds}. Once the next chunk is parsed, the session asks the
   * streams to copy the views they still keep if together they hold less than half of their chunk
   * ({@linkcode Stream._unpin}), so that what paused readers keep alive stays close to what they
   * buffer.
   */
  pinned(stream: Stream, view: Uint8Array, end: number): void;
}

/** Called with each chunk of received data. The chunk may be kept: it is never reused. */
export type DataHandler = (chunk: Uint8Array) => void;

/**
 * The shortest round trip auto-tuning compares against. On loopback or in memory the measured RTT
 * is microseconds, so a reader that a scheduler pause or a GC delays by a millisecond would never
 * count as fast; what limits throughput then is still the window. Memory stays bounded by
 * `maxStreamWindow` and the session's receive budget.
 */
const MIN_TUNING_RTT_MS = 1;

const TERMINAL = new Set([StreamState.Closed, StreamState.Reset]);

/** A copy of `view` in memory of its own (a buffered view that must stop pinning its chunk). */
const copyView = (view: Uint8Array): Uint8Array => view.slice();

/**
 * A multiplexed stream. Created by `Session.open()` or handed out by `Session.accept()` /
 * `Session.onStream`; never constructed by applications.
 *
 * @example Echo every stream back, with backpressure in both directions
 * ```ts ignore
 * session.onStream = (stream) => {
 *   stream.onData = (chunk) => {
 *     if (!stream.write(chunk)) stream.pause();
 *   };
 *   stream.onDrain = () => stream.resume();
 *   stream.onEnd = () => stream.end();
 * };
 * ```
 */
export class Stream {
  /** The stream id: odd when the client side opened it, even for the server side. */
  readonly id: number;
  /** When the stream was created (ms since the epoch). */
  readonly createdAt: number = Date.now();
  /** Payload bytes received. */
  bytesIn = 0;
  /** Payload bytes sent. */
  bytesOut = 0;
  /** @internal Whether the session's outbound list holds this stream (its membership flag). */
  _outboundQueued = false;

  readonly #host: StreamHost;
  #state: StreamState;
  #error: Error | undefined;

  // Receive side. Invariant: #recvCredit + #buffered + #owed === #windowSize.
  #windowSize = INITIAL_STREAM_WINDOW;
  #recvCredit = INITIAL_STREAM_WINDOW;
  #owed = 0;
  // Never "within a few round trips" of the first credit. A double from the start: a field that
  // starts as a small integer changes its representation when the first `performance.now()` is
  // stored in it, and V8 then throws away the optimized code of every function that touched a
  // stream, in both processes at once (a 1–2 ms stall of the round trips at the first window
  // update, 128 KiB into a stream).
  #lastCreditAt = -Infinity;
  #buffer = new Fifo<Uint8Array>();
  #buffered = 0;
  /** Bytes that ever waited in #buffer: where a view ends in that count says if it still waits. */
  #bufferedEver = 0;
  #paused = false;
  /**
   * The reader paused since credit last went back: it, not the window, sets the pace, so the
   * window does not grow (more window would only let more wait here).
   */
  #pausedSinceCredit = false;
  #delivering = false;
  #remoteEnded = false;
  #endDelivered = false;
  #onData: DataHandler | null = null;
  /** The data handler follows the claim rules of `util/bytes/buffer_pool.ts` (see `setOnData`). */
  #handlerReleases = false;
  #onEnd: (() => void) | null = null;
  #onDrain: (() => void) | null = null;
  #onClose: ((error?: Error) => void) | null = null;
  /** What {@linkcode listen} installed: reported to instead of the four callbacks. */
  #handlers: TransportHandlers | null = null;

  // Send side.
  #sendWindow = INITIAL_STREAM_WINDOW;
  #queue = new Fifo<Uint8Array>();
  #queueOffset = 0;
  #queued = 0;
  #needDrain = false;
  #endRequested = false;
  #finSent = false;
  #pendingFlags = 0;
  #synAllowed: boolean;
  #closeNotified = false;
  #readable: ReadableStream<Uint8Array> | undefined;
  #writable: WritableStream<Uint8Array> | undefined;

  /** @internal Created by the session. */
  constructor(
    host: StreamHost,
    id: number,
    state: StreamState,
    pendingFlags: number,
    synAllowed: boolean,
  ) {
    this.#host = host;
    this.id = id;
    this.#state = state;
    this.#pendingFlags = pendingFlags;
    this.#synAllowed = synAllowed;
  }

  /** The current state (see {@linkcode StreamState}). */
  get state(): StreamState {
    return this.#state;
  }

  /** The error that ended the stream, if any. */
  get error(): Error | undefined {
    return this.#error;
  }

  /** Bytes received and not yet consumed by the application. Never more than the window. */
  get bufferedBytes(): number {
    return this.#buffered;
  }

  /** Bytes written and not yet sent. */
  get queuedBytes(): number {
    return this.#queued;
  }

  /** Credit we may still send with. */
  get sendWindow(): number {
    return this.#sendWindow;
  }

  /** The current receive window (grows by auto-tuning). */
  get receiveWindow(): number {
    return this.#windowSize;
  }

  /**
   * The largest chunk a write sends as one frame without copying it, when the chunk's buffer has
   * room for the frame's header in front of it (a socket read): a relay reads no more at once.
   */
  get chunkLimit(): number {
    return this.#host.chunkLimit;
  }

  /** True while reading is paused. */
  get paused(): boolean {
    return this.#paused;
  }

  /** The data handler. Setting it delivers anything already buffered, on the next microtask. */
  get onData(): DataHandler | null {
    return this.#onData;
  }

  set onData(handler: DataHandler | null) {
    this.setOnData(handler, false);
  }

  /**
   * Sets the data handler. With `releases`, the handler follows the claim rules of
   * `util/bytes/buffer_pool.ts` (as `TransportHandlers.releases` says): a chunk may lie in a pooled
   * buffer and carries a claim that the handler gives back, or passes on with a write, and it reads
   * no chunk afterwards. Relays such as `splice` do; any other handler is given memory taken out
   * of its pool and may keep views for as long as it likes.
   */
  setOnData(handler: DataHandler | null, releases: boolean): void {
    this.#handlers = null;
    this.#onData = handler;
    this.#handlerReleases = releases && handler !== null;
    if (handler && (this.#buffered > 0 || this.#remoteEnded)) queueMicrotask(() => this.#deliver());
  }

  /**
   * Reports to `handlers` from now on, as a transport reports to what `Transport.start` takes:
   * each chunk to `data` (under the claim rules when `handlers.releases` is set, as
   * {@linkcode setOnData} says), then `end`, and `drain` and `close`, each called as a method of
   * `handlers`. It takes the place of the four callbacks (cleared; setting one later drops
   * `handlers`): a relay joins a stream to a socket without a closure per callback. Anything
   * already buffered is delivered on the next microtask.
   *
   * @example
   * ```ts ignore
   * stream.listen({
   *   data: (chunk) => socket.write(chunk),
   *   end: () => socket.end(),
   *   drain: () => socket.resume(),
   *   close: (error) => error && socket.close(),
   * });
   * ```
   */
  listen(handlers: TransportHandlers): void {
    this.#onData =
      this.#onEnd =
      this.#onDrain =
      this.#onClose =
        null;
    this.#handlers = handlers;
    this.#handlerReleases = handlers.releases === true;
    if (this.#buffered > 0 || this.#remoteEnded) queueMicrotask(() => this.#deliver());
  }

  /** Called when queued writes fell to half the high-water mark after `write()` returned false. */
  get onDrain(): (() => void) | null {
    return this.#onDrain;
  }

  set onDrain(handler: (() => void) | null) {
    this.#handlers = null;
    this.#onDrain = handler;
  }

  /** Called when the stream is done for good; `error` is set if it was reset or failed. */
  get onClose(): ((error?: Error) => void) | null {
    return this.#onClose;
  }

  set onClose(handler: ((error?: Error) => void) | null) {
    this.#handlers = null;
    this.#onClose = handler;
  }

  /** Called once the peer half-closed and all its data was delivered. */
  get onEnd(): (() => void) | null {
    return this.#onEnd;
  }

  set onEnd(handler: (() => void) | null) {
    this.#handlers = null;
    this.#onEnd = handler;
    if (handler && this.#remoteEnded) queueMicrotask(() => this.#deliver());
  }

  /** The received data as a ReadableStream (created on first use; takes over onData/onEnd). */
  get readable(): ReadableStream<Uint8Array> {
    return this.#readable ??= toReadable(this);
  }

  /** A WritableStream into this stream (created on first use; takes over onDrain). */
  get writable(): WritableStream<Uint8Array> {
    return this.#writable ??= toWritable(this);
  }

  /** Iterates over received chunks (through {@linkcode readable}). */
  [Symbol.asyncIterator](): AsyncIterator<Uint8Array> {
    return this.readable[Symbol.asyncIterator]();
  }

  /**
   * Queues `chunk` for sending and takes ownership of it (do not change it afterwards). A chunk in
   * a pooled buffer brings one claim with it, given back once its bytes are copied into a batch
   * (`util/bytes/buffer_pool.ts`). Returns false once queued bytes reach the high-water mark: wait
   * for `onDrain` before writing more. Throws after `end()`; on a reset or closed stream the bytes
   * are dropped and false returned.
   */
  write(chunk: Uint8Array): boolean {
    if (this.#endRequested) {
      throw new YamuxError("session_closed", `stream ${this.id}: write after end`);
    }
    if (TERMINAL.has(this.#state)) return false;
    if (chunk.length > 0) {
      this.#queue.push(chunk);
      this.#queued += chunk.length;
      this.#host.schedule(this);
    }
    if (this.#queued >= this.#host.config.writeHighWaterMark) {
      this.#needDrain = true;
      return false;
    }
    return true;
  }

  /** Half-closes: queued data is sent, then FIN. The peer may keep sending. Idempotent. */
  end(): void {
    if (this.#endRequested || TERMINAL.has(this.#state)) return;
    this.#endRequested = true;
    this.#host.schedule(this);
  }

  /**
   * Resets the stream at once: buffered and queued data are discarded and the peer gets RST.
   * `code` (default 0) travels in the RST frame's length field, so the peer can learn why (the
   * tunnel layer's reasons are in `reset_reasons.ts`); peers that ignore it lose nothing.
   */
  reset(code = 0): void {
    this._resetWith(undefined, code);
  }

  /** Stops delivering data; it is buffered (up to the window) and the peer's credit runs out. */
  pause(): void {
    this.#paused = true;
    this.#pausedSinceCredit = true;
  }

  /** Resumes delivery after {@linkcode pause}, delivering buffered data first. */
  resume(): void {
    if (!this.#paused) return;
    this.#paused = false;
    this.#deliver();
  }

  // ---- Called by the session's frame handling (internal) ----

  /** @internal A Data header for `length` bytes arrived; false if it exceeds the credit we gave. */
  _expect(length: number): boolean {
    if (length > this.#recvCredit) return false;
    this.#recvCredit -= length;
    return true;
  }

  /** @internal Whether the peer already half-closed (data now is a protocol error). */
  get _remoteEnded(): boolean {
    return this.#remoteEnded;
  }

  /** @internal A piece of payload for this stream. */
  _receive(view: Uint8Array): void {
    this.bytesIn += view.length;
    if (TERMINAL.has(this.#state)) return;
    if (this.#reading() && !this.#paused && this.#buffered === 0 && !this.#delivering) {
      this.#consumed(view.length);
      // The view is a piece of the session's chunk: its holder needs a claim of its own.
      if (this.#handlerReleases) retainBytes(view);
      else forgetBytes(view);
      this.#emitData(view);
      return;
    }
    // Kept as it is: a small view would pin its whole transport chunk while it waits, but only
    // once the chunk is parsed is it known whether the views kept from it add up to most of it (a
    // bulk transfer: every frame of a 512 KiB read of Bun's is one stream's) or not, and only by
    // the next chunk whether the reader took them meanwhile; the session then has those it still
    // keeps copied (_unpin).
    retainBytes(view);
    this.#buffer.push(view);
    this.#buffered += view.length;
    this.#bufferedEver += view.length;
    this.#host.pinned(this, view, this.#bufferedEver);
  }

  /**
   * @internal Whether the view that {@linkcode StreamHost.pinned} reported with `end` still waits
   * here (it was neither read nor dropped with the stream).
   */
  _holds(end: number): boolean {
    return end > this.#bufferedEver - this.#buffered;
  }

  /**
   * @internal Replaces the buffered `view` by a copy, so that it no longer keeps its chunk alive
   * (see {@linkcode StreamHost.pinned}); nothing if it has been read already.
   */
  _unpin(view: Uint8Array): void {
    if (this.#buffer.replace(view, copyView)) releaseBytes(view);
  }

  /** @internal The peer sent ACK. */
  _ack(): void {
    this.#transition("recv_ack");
  }

  /** @internal The peer granted `delta` more credit; false when that overflows 32 bits. */
  _credit(delta: number): boolean {
    if (this.#sendWindow + delta > MAX_UINT32) return false;
    this.#sendWindow += delta;
    if (delta > 0 && this.#queued > 0) this.#host.schedule(this);
    return true;
  }

  /** @internal The peer sent FIN. */
  _remoteFin(): void {
    if (this.#remoteEnded || TERMINAL.has(this.#state)) return;
    this.#remoteEnded = true;
    this.#transition("recv_fin");
    this.#deliver();
    this.#maybeNotifyClose();
  }

  /** @internal The SYN of a queued open may go now (an un-ACKed slot is free). */
  _allowSyn(): void {
    this.#synAllowed = true;
    this.#host.schedule(this);
  }

  /** @internal Whether this outbound stream still waits for a free un-ACKed slot. */
  get _synBlocked(): boolean {
    return !this.#synAllowed;
  }

  /** @internal Resets the stream (RST to the peer if it knows the stream) and fails it with `error`. */
  _resetWith(error: Error | undefined, code = 0): void {
    if (TERMINAL.has(this.#state)) return;
    // A stream whose SYN never left is unknown to the peer: there is nothing to reset there.
    if (this.#state !== StreamState.Init) this.#host.sendReset(this, code);
    this._terminate(error);
  }

  /** @internal Ends the stream with a final state: reset (error or not) or session teardown. */
  _terminate(error: Error | undefined): void {
    if (TERMINAL.has(this.#state)) return;
    this.#state = StreamState.Reset;
    this.#error = error;
    this.#buffer.clear();
    this.#buffered = 0;
    this.#queue.clear();
    this.#queued = 0;
    this.#host.finished(this, this.#windowSize - INITIAL_STREAM_WINDOW);
    this.#notifyClose();
  }

  // ---- Called by the session's writer (internal) ----

  /** @internal SYN/ACK flags still to send (0 while the SYN must wait for a slot). */
  _takeFlags(): number {
    if (!this.#synAllowed || TERMINAL.has(this.#state)) return 0;
    const flags = this.#pendingFlags;
    if (flags === 0) return 0;
    this.#pendingFlags = 0;
    if (flags & 0x1) this.#transition("send_syn");
    if (flags & 0x2) this.#transition("send_ack");
    return flags;
  }

  /** @internal Flags are pending and may be sent now. */
  get _hasFlags(): boolean {
    return this.#pendingFlags !== 0 && this.#synAllowed && !TERMINAL.has(this.#state);
  }

  /** @internal Bytes that may go out now (queued and covered by credit). */
  _sendable(): number {
    if (!this.#synAllowed) return 0;
    return this.#queued < this.#sendWindow ? this.#queued : this.#sendWindow;
  }

  /** @internal FIN may go out now (end requested, queue empty, not yet sent). */
  _finDue(): boolean {
    return this.#endRequested && !this.#finSent && this.#queued === 0 && this.#synAllowed &&
      !TERMINAL.has(this.#state);
  }

  /** @internal Records that FIN went out. */
  _finSent(): void {
    this.#finSent = true;
    this.#transition("send_fin");
    if (this.#state === StreamState.LocalClose) this.#host.halfClosed(this);
    this.#maybeNotifyClose();
  }

  /** @internal Copies `n` queued bytes into `dest` at `offset` and spends the credit. */
  _copyOut(dest: Uint8Array, offset: number, n: number): void {
    this.#sendWindow -= n;
    this.#queued -= n;
    this.bytesOut += n;
    const queue = this.#queue;
    while (n > 0) {
      const head = queue.peek()!;
      const available = head.length - this.#queueOffset;
      if (available <= n) {
        dest.set(
          this.#queueOffset === 0 ? head : head.subarray(this.#queueOffset),
          offset,
        );
        offset += available;
        n -= available;
        queue.shift();
        this.#queueOffset = 0;
        // Copied out whole: the claim its writer passed with it (if pooled) is given back.
        releaseBytes(head);
      } else {
        dest.set(head.subarray(this.#queueOffset, this.#queueOffset + n), offset);
        this.#queueOffset += n;
        n = 0;
      }
    }
  }

  /**
   * @internal Takes the next queued bytes that lie in one chunk, at most `n` of them, when there
   * are at least `least`; spends their credit and returns them as a view, to be written as they
   * lie. The view carries a claim on its pooled buffer: the queue's own when it ends the chunk,
   * one taken for it otherwise. Undefined, and nothing changes, when fewer lie there.
   */
  _takeView(n: number, least: number): Uint8Array | undefined {
    const queue = this.#queue;
    const head = queue.peek();
    if (head === undefined) return undefined;
    const offset = this.#queueOffset;
    const available = head.length - offset;
    if (available < least || n < least) return undefined;
    let view: Uint8Array;
    if (available <= n) {
      view = offset === 0 ? head : head.subarray(offset);
      queue.shift();
      this.#queueOffset = 0;
    } else {
      view = head.subarray(offset, offset + n);
      retainBytes(head);
      this.#queueOffset = offset + n;
    }
    const length = view.length;
    this.#sendWindow -= length;
    this.#queued -= length;
    this.bytesOut += length;
    return view;
  }

  /**
   * @internal What is left of the queue's first chunk when that is less than `least` and the chunk
   * after it holds at least `least` (so that a batch may stop short of it and let it go out as it
   * lies, {@linkcode _takeView}); 0 otherwise.
   */
  _bytesBeforeView(least: number): number {
    const next = this.#queue.peek(1);
    if (next === undefined || next.length < least) return 0;
    const left = this.#queue.peek()!.length - this.#queueOffset;
    return left < least ? left : 0;
  }

  /**
   * @internal When the queue's first chunk, whole, is at most `n` bytes (what may be sent now) and
   * its buffer offers `room` free bytes in front of it (`takeFrontRoom`): takes that chunk off the
   * queue, spends its credit, and returns it widened by the room, for a frame header written
   * there. The chunk's claim goes with it. Otherwise undefined, and nothing changes.
   */
  _takeFramable(n: number, room: number): Uint8Array | undefined {
    const head = this.#queue.peek();
    if (head === undefined || head.length > n || this.#queueOffset !== 0) return undefined;
    n = head.length;
    const framed = takeFrontRoom(head, room);
    if (framed === undefined) return undefined;
    this.#sendWindow -= n;
    this.#queued -= n;
    this.bytesOut += n;
    this.#queue.shift();
    return framed;
  }

  /**
   * @internal As {@linkcode _takeFramable}, but only when the chunk's room begins exactly at `end`
   * of `buffer`: the chunk lies right behind the one taken before it, its old header between.
   */
  _takeAdjacentFramable(
    n: number,
    room: number,
    buffer: ArrayBufferLike,
    end: number,
  ): Uint8Array | undefined {
    const head = this.#queue.peek();
    if (head === undefined || head.buffer !== buffer || head.byteOffset - room !== end) {
      return undefined;
    }
    return this._takeFramable(n, room);
  }

  /**
   * @internal What is left of the queue's first chunk when the chunk after it offers `room` bytes
   * in front of it (so that a batch may stop short of it and let it go out in place); 0 otherwise.
   */
  _bytesBeforeFramable(room: number): number {
    const next = this.#queue.peek(1);
    if (next === undefined || !hasFrontRoom(next, room)) return 0;
    return this.#queue.peek()!.length - this.#queueOffset;
  }

  /** @internal The writer found {@linkcode _drainDue}: tells the handlers or `onDrain`. */
  _emitDrain(): void {
    const handlers = this.#handlers;
    if (handlers !== null) handlers.drain();
    else this.#onDrain?.();
  }

  /** @internal After sending: true if the writer should call `onDrain`. */
  _drainDue(): boolean {
    if (!this.#needDrain || this.#queued > this.#host.config.writeHighWaterMark >>> 1) return false;
    this.#needDrain = false;
    return true;
  }

  /**
   * @internal The window update due now (consumed bytes plus any auto-tuned growth), or 0 when less
   * than half a window is owed. Marks the credit as returned.
   */
  _takeCredit(now: number): number {
    if (this.#owed < this.#windowSize >>> 1 || TERMINAL.has(this.#state)) return 0;
    let growth = 0;
    const config = this.#host.config;
    const rtt = this.#host.rtt;
    if (
      config.autoTuneWindow && !this.#pausedSinceCredit &&
      this.#windowSize < config.maxStreamWindow && rtt > 0 &&
      now - this.#lastCreditAt < 4 * Math.max(rtt, MIN_TUNING_RTT_MS)
    ) {
      // The reader consumed half a window within a few round trips: the window, not the reader,
      // limits throughput. Double it, within the session's memory budget.
      const wanted = Math.min(this.#windowSize, config.maxStreamWindow - this.#windowSize);
      growth = this.#host.reserveWindow(wanted);
      this.#windowSize += growth;
    }
    this.#lastCreditAt = now;
    this.#pausedSinceCredit = this.#paused;
    const delta = this.#owed + growth;
    this.#owed = 0;
    this.#recvCredit += delta;
    return delta;
  }

  /** @internal Whether a window update is due (so the writer should visit this stream). */
  get _creditDue(): boolean {
    return this.#owed >= this.#windowSize >>> 1;
  }

  // ---- Private ----

  #consumed(n: number): void {
    const wasDue = this.#owed >= this.#windowSize >>> 1;
    this.#owed += n;
    if (!wasDue && this.#owed >= this.#windowSize >>> 1 && !this.#remoteEnded) {
      this.#host.schedule(this);
    }
  }

  #deliver(): void {
    if (this.#delivering) return;
    this.#delivering = true;
    try {
      while (!this.#paused && this.#buffered > 0 && this.#reading()) {
        const chunk = this.#buffer.shift()!;
        this.#buffered -= chunk.length;
        this.#consumed(chunk.length);
        // Its claim goes to the handler, or the buffer leaves its pool for one that keeps views.
        if (!this.#handlerReleases) forgetBytes(chunk);
        this.#emitData(chunk);
      }
    } finally {
      this.#delivering = false;
    }
    if (
      this.#remoteEnded && !this.#endDelivered && this.#buffered === 0 && !this.#paused &&
      this.#state !== StreamState.Reset
    ) {
      const handlers = this.#handlers;
      if (handlers === null && this.#onEnd === null && this.#onData === null) return;
      this.#endDelivered = true;
      if (handlers !== null) handlers.end();
      else this.#onEnd?.();
      this.#maybeNotifyClose();
    }
  }

  #transition(event: StreamEvent): void {
    const next = nextStreamState(this.#state, event);
    if (next === undefined) return;
    this.#state = next;
    if (next === StreamState.Closed) {
      this.#host.finished(this, this.#windowSize - INITIAL_STREAM_WINDOW);
    }
  }

  #maybeNotifyClose(): void {
    if (this.#state === StreamState.Closed && this.#endDelivered) this.#notifyClose();
  }

  #notifyClose(): void {
    if (this.#closeNotified) return;
    this.#closeNotified = true;
    const handlers = this.#handlers;
    if (handlers !== null) handlers.close(this.#error);
    else this.#onClose?.(this.#error);
  }

  /** Whether anyone takes the data: {@linkcode listen}'s handlers or an `onData`. */
  #reading(): boolean {
    return this.#handlers !== null || this.#onData !== null;
  }

  #emitData(chunk: Uint8Array): void {
    const handlers = this.#handlers;
    if (handlers !== null) handlers.data(chunk);
    else this.#onData!(chunk);
  }
}
