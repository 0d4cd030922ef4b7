/**
 * A yamux session over one transport: stream ids, frame handling, flow-control bookkeeping,
 * keepalive, pings and GoAway. Pure logic: it only sees the {@linkcode Transport} interface.
 *
 * Every check on peer input happens on the 12-byte header, before any payload is buffered. A broken
 * peer gets GoAway(protocol error); a fault confined to one stream resets only that stream; frames
 * for unknown or closed streams are drained and ignored.
 *
 * @module
 */

import { Flag, FrameType, GoAwayCode, MAX_UINT32 } from "./constants.ts";
import { resolveSessionConfig, type SessionConfig } from "./config.ts";
import { YamuxError, type YamuxErrorCode } from "./errors.ts";
import { FrameDecoder, type FrameSink } from "./frame_decoder.ts";
import { releaseBytes } from "../util/bytes/buffer_pool.ts";
import { sharedDeadlines } from "../util/timing/deadlines.ts";
import { Lifecycle } from "../util/lifecycle.ts";
import { Outbound } from "./outbound.ts";
import {
  bump,
  countFrame,
  createSessionStats,
  goAwayCodeName,
  type SessionStats,
} from "./stats.ts";
import { Stream, type StreamHost } from "./stream.ts";
import { StreamState } from "./stream_state.ts";
import type { Transport } from "./transport.ts";

/** How long a session that said its last words waits for the peer to close before closing itself. */
const LINGER_MS = 2_000;

/** Marks a pin {@linkcode Session} has settled already (see `#settlePins`). */
const SETTLED = new Uint8Array(0);

/** Session lifecycle states. */
export type SessionState = "open" | "draining" | "closed";

/** What moves a session between lifecycle states. */
export type SessionEvent = "go_away" | "close";

/** The session lifecycle: GoAway (sent or received) drains, close ends. */
export const SESSION_TRANSITIONS = {
  open: { go_away: "draining", close: "closed" },
  draining: { close: "closed" },
  closed: {},
} as const satisfies Record<SessionState, Partial<Record<SessionEvent, SessionState>>>;

/** Why an incoming stream was refused: we sent GoAway, the stream limit, or a full backlog. */
export type StreamRefusal = "going_away" | "too_many_streams" | "backlog_full";

/** How to create a session. */
export interface SessionOptions {
  /** True on the side that dialed: it opens odd stream ids, the other side even ones. */
  client: boolean;
  /** Overrides of {@linkcode SessionConfig} defaults. */
  config?: Partial<SessionConfig>;
  /** Takes each stream the peer opens; without it streams wait for {@linkcode Session.accept}. */
  onStream?: (stream: Stream) => void;
  /** Told about every protocol, stream and timeout error, for logging. */
  onError?: (error: YamuxError, reason: string) => void;
  /**
   * The reset code sent with a refused incoming stream (default 0), so the peer can learn why;
   * the tunnel layer maps these to its reset reasons.
   */
  refusalCode?: (reason: StreamRefusal) => number;
  /**
   * The error a stream closes with when the peer resets it with `code` (default a
   * {@linkcode YamuxError} `stream_reset` carrying `resetCode`): lets a layer above name the
   * reason in its own error type. It should carry `resetCode` too.
   */
  resetError?: (streamId: number, code: number) => Error;
  /**
   * The first stream id this side opens (default 1 for the client, 2 for the server); it must
   * have this side's parity. Lets tests reach stream-id exhaustion without 2^31 opens.
   */
  firstStreamId?: number;
}

interface PendingPing {
  sentAt: number;
  resolve?: (rtt: number) => void;
  reject?: (error: Error) => void;
}

/**
 * One end of a yamux connection.
 *
 * @example A client opening a stream over an in-memory transport pair
 * ```ts ignore
 * import { Session } from "./session.ts";
 * const client = new Session(transportA, { client: true });
 * const server = new Session(transportB, { client: false, onStream: (s) => s.end() });
 * const stream = client.open();
 * stream.write(new TextEncoder().encode("hello"));
 * stream.end();
 * ```
 */
export class Session implements FrameSink, StreamHost {
  /** The validated configuration. */
  readonly config: SessionConfig;
  /** Live counters. */
  readonly stats: SessionStats = createSessionStats();
  /** Whether this is the dialing side (odd stream ids). */
  readonly client: boolean;
  /** Resolves when the session has closed: with the error that ended it, or undefined. */
  readonly closed: Promise<Error | undefined>;
  /**
   * Resolves once the transport itself has closed, after `closed`: by then the last frames and,
   * over WebSocket, the close handshake are done. Wait for it before a process exits.
   */
  readonly transportClosed: Promise<void>;
  /** Takes each stream the peer opens (see {@linkcode SessionOptions.onStream}). */
  onStream: ((stream: Stream) => void) | null;
  /** Told about errors, for logging (see {@linkcode SessionOptions.onError}). */
  onError: ((error: YamuxError, reason: string) => void) | null;

  readonly #transport: Transport;
  readonly #outbound: Outbound;
  readonly #decoder: FrameDecoder;
  /**
   * Streams, the views they kept from the chunk being parsed and where each ends in its stream's
   * count, in threes (see `#settlePins`); the same from the chunk before, settled after this one.
   */
  #pins: (Stream | Uint8Array | number)[] = [];
  #earlierPins: (Stream | Uint8Array | number)[] = [];
  readonly #refusalCode: ((reason: StreamRefusal) => number) | undefined;
  readonly #resetError: ((streamId: number, code: number) => Error) | undefined;
  readonly #lifecycle = new Lifecycle<SessionState, SessionEvent>(SESSION_TRANSITIONS, "open");
  readonly #streams = new Map<number, Stream>();
  #resolveClosed!: (error: Error | undefined) => void;
  #nextStreamId: number;
  #localGoAway = false;
  #remoteGoAway = false;
  #closeRequested = false;
  #closeError: Error | undefined;

  #backlog: Stream[] = [];
  #acceptWaiters: { resolve: (stream: Stream) => void; reject: (error: Error) => void }[] = [];
  /** Outbound streams not yet ACKed, with their open deadline, oldest first. */
  #awaitingAck = new Map<Stream, number>();
  #synSlotsUsed = 0;
  #waitingForSyn: Stream[] = [];
  /** Streams we half-closed, with the deadline for the peer's FIN, oldest first. */
  #awaitingFin = new Map<Stream, number>();
  #timeoutTimer: ReturnType<typeof setTimeout> | undefined;

  #windowGrowth = 0;
  #rtt = 0;
  #pings = new Map<number, PendingPing>();
  #nextPingId = 1;
  #lastInbound = performance.now();
  #keepAliveTimer: ReturnType<typeof setTimeout> | undefined;
  #keepAlivePingAt = 0;
  #lingerTimer: ReturnType<typeof setTimeout> | undefined;

  /** The stream the current Data frame's payload goes to (null: drain it). */
  #target: Stream | null = null;
  #targetFlags = 0;

  /** Starts a session on `transport` at once. */
  constructor(transport: Transport, options: SessionOptions) {
    this.config = resolveSessionConfig(options.config);
    this.client = options.client;
    this.onStream = options.onStream ?? null;
    this.onError = options.onError ?? null;
    this.#refusalCode = options.refusalCode;
    this.#resetError = options.resetError;
    this.#nextStreamId = options.firstStreamId ?? (options.client ? 1 : 2);
    if ((this.#nextStreamId & 1) !== (options.client ? 1 : 0) || this.#nextStreamId < 1) {
      throw new RangeError(
        `firstStreamId ${this.#nextStreamId} has the wrong parity for this side`,
      );
    }
    this.closed = new Promise((resolve) => this.#resolveClosed = resolve);
    let transportClosed!: () => void;
    this.transportClosed = new Promise((resolve) => transportClosed = resolve);
    this.#transport = transport;
    this.#outbound = new Outbound(transport, this.config, this.stats);
    this.#decoder = new FrameDecoder(this);
    transport.start({
      // Payload views handed to streams take claims of their own; the decoder keeps none past
      // push() except while held (it takes one then). So the chunk's own claim ends here.
      releases: true,
      data: (chunk) => {
        this.#lastInbound = performance.now();
        this.stats.bytesIn += chunk.length;
        this.#decoder.push(chunk);
        this.#settlePins();
        releaseBytes(chunk);
      },
      readLimit: (_preferred, capacity) => this.#decoder.readLimit(capacity),
      drain: () => {
        this.#outbound.drained();
        if (this.#decoder.held) this.#resumeReading();
      },
      end: () => this.#onTransportGone(undefined),
      close: (error) => {
        this.#onTransportGone(error);
        transportClosed();
      },
    });
    if (this.config.enableKeepAlive) this.#armKeepAlive();
    // One ping at the start measures the round trip that window auto-tuning compares against.
    if (this.config.autoTuneWindow) this.#sendPing();
  }

  /** The lifecycle state: open, draining (GoAway sent or received) or closed. */
  get state(): SessionState {
    return this.#lifecycle.state;
  }

  /** The largest chunk a stream's write sends as one frame without copying it. */
  get chunkLimit(): number {
    return this.#outbound.chunkLimit;
  }

  /** Smoothed round-trip time in milliseconds, from pings; 0 until measured. */
  get rtt(): number {
    return this.#rtt;
  }

  /** Number of open streams (both directions, including those waiting to be accepted). */
  get streamCount(): number {
    return this.#streams.size;
  }

  /** True once we sent GoAway. */
  get localGoAway(): boolean {
    return this.#localGoAway;
  }

  /** True once the peer sent GoAway. */
  get remoteGoAway(): boolean {
    return this.#remoteGoAway;
  }

  /** The transport's peer address. */
  get remoteAddress(): string {
    return this.#transport.remoteAddress;
  }

  /** The open streams. */
  streams(): IterableIterator<Stream> {
    return this.#streams.values();
  }

  /** The open stream with `id`, if any. */
  stream(id: number): Stream | undefined {
    return this.#streams.get(id);
  }

  /**
   * Opens a stream. It is usable at once: its SYN goes out with the first data written in the same
   * tick (or alone). Throws a {@linkcode YamuxError} when the session is closed or going away, the
   * stream limit is reached, or stream ids are exhausted.
   */
  open(): Stream {
    if (this.#lifecycle.state === "closed") {
      throw this.#error("session_closed", "session is closed");
    }
    if (this.#remoteGoAway) throw this.#error("remote_goaway", "peer sent GoAway");
    if (this.#localGoAway) throw this.#error("session_closed", "session is going away");
    if (this.#streams.size >= this.config.maxStreams) {
      throw this.#error("too_many_streams", `stream limit ${this.config.maxStreams} reached`);
    }
    const id = this.#nextStreamId;
    if (id > MAX_UINT32) {
      this.goAway(GoAwayCode.Normal);
      throw this.#error("streams_exhausted", "stream ids exhausted");
    }
    this.#nextStreamId += 2;
    const synAllowed = this.#synSlotsUsed < this.config.maxUnackedOpens;
    const stream = new Stream(this, id, StreamState.Init, Flag.SYN, synAllowed);
    this.#streams.set(id, stream);
    this.#awaitingAck.set(stream, performance.now() + this.config.openTimeout);
    this.#armTimeouts();
    if (synAllowed) {
      this.#synSlotsUsed++;
      this.#outbound.schedule(stream);
    } else {
      this.#waitingForSyn.push(stream);
    }
    this.stats.streamsOpened++;
    return stream;
  }

  /** Waits for the next stream the peer opens (only when no `onStream` handler is set). */
  accept(): Promise<Stream> {
    const stream = this.#backlog.shift();
    if (stream) return Promise.resolve(this.#acknowledge(stream));
    if (this.#lifecycle.state === "closed") {
      return Promise.reject(this.#closeError ?? this.#error("session_closed", "session is closed"));
    }
    return new Promise((resolve, reject) => this.#acceptWaiters.push({ resolve, reject }));
  }

  /** Sends a ping and resolves with the round-trip time in milliseconds. */
  ping(): Promise<number> {
    if (this.#lifecycle.state === "closed") {
      return Promise.reject(this.#error("session_closed", "session is closed"));
    }
    if (this.#pings.size >= this.config.maxOutstandingPings) {
      return Promise.reject(new RangeError("too many outstanding pings"));
    }
    return new Promise((resolve, reject) => {
      const id = this.#sendPing();
      const pending = this.#pings.get(id)!;
      pending.resolve = resolve;
      pending.reject = reject;
    });
  }

  /** Sends GoAway: the peer may open no more streams; existing ones continue. Idempotent. */
  goAway(code: GoAwayCode = GoAwayCode.Normal): void {
    if (this.#localGoAway || this.#lifecycle.state === "closed") return;
    this.#localGoAway = true;
    this.#outbound.control(FrameType.GoAway, 0, 0, code);
    bump(this.stats.goAwaySent, goAwayCodeName(code));
    this.#lifecycle.fire("go_away");
  }

  /** Graceful close: GoAway, then the transport closes once every stream has finished. */
  close(): Promise<Error | undefined> {
    this.#closeRequested = true;
    this.goAway(GoAwayCode.Normal);
    if (this.#streams.size === 0) this.#shutdown(undefined, true);
    return this.closed;
  }

  /**
   * Closes at once: streams fail with `error` (or "session closed"). Control frames already queued
   * (a GoAway just sent, resets) still go out before the transport ends; stream data does not.
   */
  destroy(error?: Error): void {
    this.#shutdown(error, true);
  }

  // ---- FrameSink: called by the decoder for each frame ----

  /** @internal */
  frame(type: number, flags: number, streamId: number, length: number): void {
    countFrame(this.stats.framesIn, type);
    if (type === FrameType.Data || type === FrameType.WindowUpdate) {
      this.#target = null;
      if (streamId === 0) {
        return this.#fail("bad_stream_id", "data or window update on stream 0");
      }
      if (type === FrameType.Data && length > this.config.maxFrameLength) {
        return this.#fail(
          "frame_too_large",
          `frame length ${length} above ${this.config.maxFrameLength}`,
        );
      }
      let stream = this.#streams.get(streamId);
      if (flags & Flag.SYN) {
        if (stream !== undefined) {
          return this.#fail("duplicate_syn", `SYN on open stream ${streamId}`);
        }
        if ((streamId & 1) === (this.client ? 1 : 0)) {
          return this.#fail("syn_parity", `peer opened stream ${streamId} with our parity`);
        }
        stream = this.#incoming(streamId);
        if (stream === undefined) return;
      }
      if (stream === undefined) {
        this.stats.framesForUnknownStreams++;
        return;
      }
      if (flags & Flag.ACK) this.#acked(stream);
      if (type === FrameType.WindowUpdate) {
        // With RST the length is a reason code (go-yamux), not credit for a stream that is gone.
        if (flags & Flag.RST) return this.#applyEndFlags(stream, flags, length);
        if (!stream._credit(length)) {
          return this.#resetStream(stream, "window_overflow", "send window would exceed 2^32-1");
        }
        this.#applyEndFlags(stream, flags);
        return;
      }
      if (length > 0 && stream._remoteEnded) {
        return this.#resetStream(stream, "data_after_fin", "data after FIN");
      }
      if (!stream._expect(length)) {
        return this.#fail(
          "window_exceeded",
          `stream ${streamId} sent ${length} bytes beyond its window`,
        );
      }
      this.#target = stream;
      this.#targetFlags = flags;
      return;
    }
    if (streamId !== 0) return this.#fail("bad_stream_id", `ping or GoAway on stream ${streamId}`);
    if (type === FrameType.Ping) {
      if (flags & Flag.SYN) {
        if (!this.#outbound.pingReply(length)) this.stats.pingRepliesDropped++;
      } else if (flags & Flag.ACK) {
        this.#pong(length);
      }
      return;
    }
    this.#onGoAway(length);
  }

  /** @internal */
  payload(view: Uint8Array): void {
    if (this.#target !== null) this.#target._receive(view);
  }

  /** @internal */
  payloadEnd(): void {
    const stream = this.#target;
    if (stream === null) return;
    this.#target = null;
    this.#applyEndFlags(stream, this.#targetFlags);
  }

  /** @internal */
  malformed(reason: string, detail: string): void {
    this.#fail(reason, detail);
  }

  // ---- StreamHost: called by streams ----

  /** @internal */
  schedule(stream: Stream): void {
    this.#outbound.schedule(stream);
  }

  /** @internal */
  sendReset(stream: Stream, code = 0): void {
    this.stats.resetsSent++;
    if (!this.#outbound.control(FrameType.WindowUpdate, Flag.RST, stream.id, code)) {
      this.#pauseReading();
    }
  }

  /** @internal */
  pinned(stream: Stream, view: Uint8Array, end: number): void {
    this.#pins.push(stream, view, end);
  }

  /**
   * After a chunk is parsed: the views that paused streams kept from the chunk before and still
   * keep are copied if together they hold less than half of their buffer, which they would
   * otherwise keep alive whole. This chunk's views wait for the next one: a reader that paused
   * itself mid-chunk and resumes meanwhile (the echo of a bulk stream, whose writes fill up)
   * costs no copy. A bulk transfer keeps every view of a read; a small frame among others' that
   * stays buffered is copied. What waits uncopied is at most one chunk a session.
   */
  #settlePins(): void {
    const pins = this.#earlierPins;
    this.#earlierPins = this.#pins;
    this.#pins = pins;
    if (pins.length === 0) return;
    for (let i = 0; i < pins.length; i += 3) {
      // Read by now, or dropped with its stream: nothing to copy, nor to count.
      if (!(pins[i] as Stream)._holds(pins[i + 2] as number)) pins[i + 1] = SETTLED;
    }
    for (let i = 1; i < pins.length; i += 3) {
      if (pins[i] === SETTLED) continue;
      const buffer = (pins[i] as Uint8Array).buffer;
      let kept = 0;
      for (let j = i; j < pins.length; j += 3) {
        if ((pins[j] as Uint8Array).buffer === buffer) kept += (pins[j] as Uint8Array).byteLength;
      }
      const copy = kept * 2 < buffer.byteLength;
      for (let j = i; j < pins.length; j += 3) {
        const view = pins[j] as Uint8Array;
        if (view.buffer !== buffer) continue;
        if (copy) (pins[j - 1] as Stream)._unpin(view);
        // Settled: later rounds of the outer loop skip it.
        pins[j] = SETTLED;
      }
    }
    pins.length = 0;
  }

  /** @internal */
  reserveWindow(bytes: number): number {
    const granted = Math.max(
      0,
      Math.min(bytes, this.config.sessionReceiveBudget - this.#windowGrowth),
    );
    this.#windowGrowth += granted;
    return granted;
  }

  /** @internal */
  halfClosed(stream: Stream): void {
    this.#awaitingFin.set(stream, performance.now() + this.config.closeTimeout);
    this.#armTimeouts();
  }

  /** @internal */
  finished(stream: Stream, windowGrowth: number): void {
    if (this.#streams.get(stream.id) !== stream) return;
    this.#streams.delete(stream.id);
    this.#windowGrowth -= windowGrowth;
    this.#awaitingFin.delete(stream);
    if (this.#awaitingAck.delete(stream) && !stream._synBlocked) this.#releaseSynSlot();
    if (stream.state === StreamState.Reset) {
      const waiting = this.#backlog.indexOf(stream);
      if (waiting >= 0) this.#backlog.splice(waiting, 1);
    }
    if (this.#closeRequested && this.#streams.size === 0) {
      // This may run inside the writer (our last FIN just went into a batch): let that batch reach
      // the transport before it is ended.
      queueMicrotask(() => this.#shutdown(undefined, true));
    }
  }

  // ---- Private ----

  #incoming(streamId: number): Stream | undefined {
    let reason: StreamRefusal | undefined;
    if (this.#localGoAway) reason = "going_away";
    else if (this.#streams.size >= this.config.maxStreams) reason = "too_many_streams";
    else if (this.onStream === null && this.#backlog.length >= this.config.acceptBacklog) {
      reason = "backlog_full";
    }
    if (reason !== undefined) {
      this.stats.streamsRefused++;
      this.#count(reason);
      this.stats.resetsSent++;
      const code = this.#refusalCode?.(reason) ?? 0;
      if (!this.#outbound.control(FrameType.WindowUpdate, Flag.RST, streamId, code)) {
        this.#pauseReading();
      }
      return undefined;
    }
    const stream = new Stream(this, streamId, StreamState.SynReceived, Flag.ACK, true);
    this.#streams.set(streamId, stream);
    this.stats.streamsAccepted++;
    if (this.onStream !== null) {
      this.onStream(this.#acknowledge(stream));
    } else {
      const waiter = this.#acceptWaiters.shift();
      if (waiter) waiter.resolve(this.#acknowledge(stream));
      else this.#backlog.push(stream);
    }
    return stream;
  }

  /**
   * Hands a stream to the application. Its ACK goes out with the next write, or with the stream's
   * first frame if that comes within `ackDelay` (the flag waits on the stream until a frame takes
   * it; the deadline only makes the writer visit the stream, which finds nothing to do if the
   * flag is gone).
   */
  #acknowledge(stream: Stream): Stream {
    if (this.config.ackDelay === 0) this.#outbound.schedule(stream);
    else sharedDeadlines.add(this.config.ackDelay, () => this.#outbound.schedule(stream));
    return stream;
  }

  #acked(stream: Stream): void {
    stream._ack();
    if (this.#awaitingAck.delete(stream)) this.#releaseSynSlot();
  }

  #releaseSynSlot(): void {
    this.#synSlotsUsed--;
    while (this.#waitingForSyn.length > 0 && this.#synSlotsUsed < this.config.maxUnackedOpens) {
      const next = this.#waitingForSyn.shift()!;
      if (next.state !== StreamState.Init) continue;
      this.#synSlotsUsed++;
      next._allowSyn();
    }
  }

  #applyEndFlags(stream: Stream, flags: number, resetCode = 0): void {
    if (flags & Flag.FIN) stream._remoteFin();
    if (flags & Flag.RST) {
      this.stats.resetsReceived++;
      const because = resetCode === 0 ? "" : ` (reason ${resetCode})`;
      stream._terminate(
        this.#resetError?.(stream.id, resetCode) ??
          new YamuxError("stream_reset", `stream ${stream.id} reset by peer${because}`, {
            resetCode,
          }),
      );
    }
  }

  #resetStream(
    stream: Stream,
    reason: string,
    detail: string,
    code: YamuxErrorCode = "stream_reset",
  ): void {
    this.#count(reason);
    const error = new YamuxError(code, `stream ${stream.id}: ${detail}`);
    this.onError?.(error, reason);
    stream._resetWith(error);
  }

  #onGoAway(code: number): void {
    this.#remoteGoAway = true;
    bump(this.stats.goAwayReceived, goAwayCodeName(code));
    if (code !== GoAwayCode.Normal) {
      const name = code === GoAwayCode.ProtocolError
        ? "protocol error"
        : code === GoAwayCode.InternalError
        ? "internal error"
        : `code ${code}`;
      const error = new YamuxError("remote_goaway", `peer sent GoAway (${name})`);
      this.#count(`remote_goaway_${code <= 2 ? code : "unknown"}`);
      this.onError?.(error, "remote_goaway");
      return this.#shutdown(error, false);
    }
    this.#lifecycle.fire("go_away");
    // Streams that never got to send their SYN cannot be opened any more.
    for (const stream of this.#waitingForSyn) {
      stream._terminate(
        new YamuxError("remote_goaway", "peer sent GoAway before the stream opened"),
      );
    }
    this.#waitingForSyn = [];
  }

  #sendPing(): number {
    const id = this.#nextPingId;
    this.#nextPingId = id === MAX_UINT32 ? 1 : id + 1;
    this.#pings.set(id, { sentAt: performance.now() });
    if (!this.#outbound.control(FrameType.Ping, Flag.SYN, 0, id)) this.#pauseReading();
    return id;
  }

  #pong(id: number): void {
    const pending = this.#pings.get(id);
    if (pending === undefined) return;
    this.#pings.delete(id);
    // A clock coarser than the round trip reads 0; keep the sample positive so the RTT counts as known.
    const sample = Math.max(performance.now() - pending.sentAt, 0.001);
    this.#rtt = this.#rtt === 0 ? sample : this.#rtt * 0.875 + sample * 0.125;
    pending.resolve?.(sample);
  }

  /**
   * Schedules the next keepalive check for when something is due (the idle interval running out,
   * or an unanswered ping's timeout) instead of polling at a quarter of the interval: an idle
   * session costs two timer callbacks and no new closure per ping, which is what 10,000 idle
   * sessions on one daemon add up.
   */
  #armKeepAlive(delay: number = this.config.keepAliveInterval): void {
    this.#keepAliveTimer = setTimeout(this.#keepAliveTick, Math.max(5, delay));
  }

  readonly #keepAliveTick = (): void => {
    const now = performance.now();
    const { keepAliveInterval, keepAliveTimeout } = this.config;
    if (this.#keepAlivePingAt > 0) {
      if (this.#lastInbound >= this.#keepAlivePingAt) this.#keepAlivePingAt = 0;
      else if (now - this.#keepAlivePingAt >= keepAliveTimeout) {
        this.#count("keepalive_timeout");
        const error = new YamuxError(
          "keepalive_timeout",
          "no frame from the peer within the keepalive timeout",
        );
        this.onError?.(error, "keepalive_timeout");
        return this.#shutdown(error, false);
      } else return this.#armKeepAlive(this.#keepAlivePingAt + keepAliveTimeout - now);
    }
    // The accepting side waits a little longer (a quarter, at most a second), so the two ends'
    // timers do not fire together and ping each other: the dialer's ping arrives first.
    const due = this.client
      ? keepAliveInterval
      : keepAliveInterval + Math.min(keepAliveInterval / 4, 1000);
    const idle = now - this.#lastInbound;
    if (idle < due) return this.#armKeepAlive(due - idle);
    this.#keepAlivePingAt = now;
    this.#sendPing();
    // Checked again after the interval (or the timeout, if shorter): answered by then, the next
    // ping is due a round trip later; unanswered, the check moves to the ping's timeout.
    this.#armKeepAlive(Math.min(keepAliveInterval, keepAliveTimeout));
  };

  /** Runs the open/close timeout sweep while any stream waits for an ACK or a FIN. */
  #armTimeouts(): void {
    if (this.#timeoutTimer !== undefined) return;
    const tick = Math.max(5, Math.min(this.config.openTimeout, this.config.closeTimeout) / 4);
    this.#timeoutTimer = setTimeout(() => {
      this.#timeoutTimer = undefined;
      const now = performance.now();
      this.#expire(this.#awaitingAck, now, "open_timeout", "no ACK within the open timeout");
      this.#expire(this.#awaitingFin, now, "close_timeout", "no FIN within the close timeout");
      if (this.#awaitingAck.size > 0 || this.#awaitingFin.size > 0) this.#armTimeouts();
    }, tick);
  }

  #expire(waiting: Map<Stream, number>, now: number, code: YamuxErrorCode, detail: string): void {
    for (const [stream, deadline] of waiting) {
      if (deadline > now) break;
      this.#resetStream(stream, code, detail, code); // finished() removes it from `waiting`
    }
  }

  /**
   * Our control frames back up because the peer does not read them: stop reading its frames (each
   * may need an answer) until the transport drains. A burst of opens past our limits is refused
   * at the pace the peer reads the refusals; memory stays bounded, and the session stays up.
   */
  #pauseReading(): void {
    if (this.#decoder.held) return;
    this.stats.readPauses++;
    this.#decoder.hold();
    this.#transport.pause();
  }

  #resumeReading(): void {
    this.#outbound.flush();
    if (this.#outbound.backlogged || this.#lifecycle.state === "closed") return;
    this.#decoder.release();
    this.#settlePins();
    if (!this.#decoder.held) this.#transport.resume();
  }

  /** Ends the session because the peer broke the protocol: GoAway, reason logged, transport closed. */
  #fail(reason: string, detail: string, code: GoAwayCode = GoAwayCode.ProtocolError): void {
    if (this.#lifecycle.state === "closed") return;
    this.#decoder.stop();
    this.#count(reason);
    const error = new YamuxError("protocol_error", detail);
    this.onError?.(error, reason);
    this.#localGoAway = true;
    this.#outbound.close();
    // Bypass the (possibly full) queue: the GoAway is the last thing this session says.
    const goAway = new Uint8Array(12);
    goAway[1] = FrameType.GoAway;
    goAway[11] = code;
    countFrame(this.stats.framesOut, FrameType.GoAway);
    bump(this.stats.goAwaySent, goAwayCodeName(code));
    this.#transport.write(goAway);
    this.#shutdown(error, true);
  }

  #onTransportGone(error: Error | undefined): void {
    if (this.#lifecycle.state === "closed") {
      // The peer answered our last words by closing (or hit an error): stop lingering.
      if (this.#lingerTimer !== undefined) {
        clearTimeout(this.#lingerTimer);
        this.#lingerTimer = undefined;
        this.#transport.close();
      }
      return;
    }
    const clean = error === undefined && (this.#localGoAway || this.#remoteGoAway) &&
      this.#streams.size === 0;
    this.#shutdown(
      clean ? undefined : new YamuxError(
        "session_closed",
        error ? `transport failed: ${error.message}` : "connection closed by peer",
        { cause: error },
      ),
      false,
    );
  }

  /** Closes everything once. `flushFirst` lets queued bytes reach the peer before the transport closes. */
  #shutdown(error: Error | undefined, flushFirst: boolean): void {
    if (!this.#lifecycle.fire("close")) return;
    this.#closeError = error;
    clearTimeout(this.#keepAliveTimer);
    clearTimeout(this.#timeoutTimer);
    this.#decoder.stop();
    // Streams go first: their queued data is dropped, so a flush below carries control frames only.
    const streamError = error ?? new YamuxError("session_closed", "session closed");
    for (const stream of Array.from(this.#streams.values())) stream._terminate(streamError);
    if (flushFirst) {
      this.#outbound.flush();
      this.#transport.end();
      // The peer should close in answer to our end; if it does not, close anyway.
      this.#lingerTimer = setTimeout(() => {
        this.#lingerTimer = undefined;
        this.#transport.close();
      }, LINGER_MS);
    } else {
      this.#transport.close();
    }
    this.#outbound.close();
    this.#backlog = [];
    for (const waiter of this.#acceptWaiters) waiter.reject(streamError);
    this.#acceptWaiters = [];
    for (const ping of this.#pings.values()) ping.reject?.(streamError);
    this.#pings.clear();
    this.#resolveClosed(error);
  }

  #count(reason: string): void {
    bump(this.stats.errors, reason);
  }

  #error(code: YamuxErrorCode, message: string): YamuxError {
    return new YamuxError(code, message);
  }
}
