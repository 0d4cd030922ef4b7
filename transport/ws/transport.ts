/**
 * {@linkcode Transport} over WebSocket (RFC 6455): the yamux byte stream travels in binary
 * messages, so tunnels pass through HTTP reverse proxies that forward `Upgrade` headers.
 *
 * This module holds what both ends share: options, close codes, message packing and the transport
 * itself. The ends are `ws/server.ts` and `ws/client.ts`, over the runtime's TCP adapter, each of
 * which drives a {@linkcode WebSocketTransport} through a small {@linkcode SocketDriver}; `mod.ts`
 * picks them.
 *
 * Semantics the byte-stream contract cannot carry over unchanged:
 * - WebSocket has no half-close. `end()` sends what is queued, then closes with 1000; the peer sees
 *   `end()` followed by `close()`. Bytes the peer sends after our close frame are lost, so a yamux
 *   session should end its transport only when it has nothing more to receive (Session does).
 * - `pause()` stops reading from the socket (Bun's server; our server and client, over TCP), so
 *   the peer feels backpressure.
 * - The remote address is the TCP peer's. `X-Forwarded-For` and similar headers are not trusted;
 *   behind a reverse proxy the remote address is the proxy's (`authorize` sees the request and may
 *   read such headers if the deployment trusts its proxy).
 *
 * @module
 */

import type { Transport, TransportHandlers } from "../../protocol/transport.ts";
import { EventSink, toError } from "../io/event_sink.ts";
import { ChunkQueue, JOIN_BELOW } from "../io/chunk_queue.ts";
import { WriteGate } from "../io/write_gate.ts";

/** Options for {@linkcode listenWebSocket}. */
export interface WebSocketListenOptions {
  /** Address to bind, e.g. `127.0.0.1`. */
  hostname: string;
  /** Port to bind; 0 picks a free one (read it back from the listener). */
  port: number;
  /** The only path that upgrades; other paths get 404. Default `/tunnel`. */
  path?: string;
  /** Largest inbound message; a bigger one closes the connection with 1009. Default 1 MiB. */
  maxMessageSize?: number;
  /** Queued outgoing bytes at which `write` returns false. Default 1 MiB. */
  highWaterMark?: number;
  /** PEM certificate chain and key: serve `wss://`. */
  tls?: { cert: string; key: string };
  /**
   * The upgrade request's head must be complete this long after accept, else 408 and close
   * (slowloris). Default 10 s. Bun's server applies its own idle timeout instead.
   */
  requestTimeoutMs?: number;
  /**
   * Called with the upgrade request before accepting; return a Response to refuse it (e.g. 401
   * JSON), or undefined to accept. `remoteAddress` is the TCP peer (the proxy, behind one). A
   * callback that throws refuses with 500.
   */
  authorize?: (
    request: Request,
    remoteAddress: string,
  ) => Response | undefined | Promise<Response | undefined>;
}

/** Options for {@linkcode connectWebSocket}. */
export interface WebSocketConnectOptions {
  /** Extra handshake headers, e.g. `Authorization: Bearer …` (non-standard; Deno and Bun both send them). */
  headers?: Record<string, string>;
  /** Queued outgoing bytes at which `write` returns false. Default 1 MiB. */
  highWaterMark?: number;
  /** Largest inbound message; a bigger one closes the connection with 1009. Default 1 MiB. */
  maxMessageSize?: number;
  /**
   * Extra PEM CA certificates to trust for `wss://` (e.g. a self-signed server certificate). Deno
   * passes them to `connectTls` (our client), Bun through `tls.ca`. Deno (rustls)
   * refuses a self-signed certificate that says `CA:TRUE` when it is the server's own (leaf)
   * certificate: generate it with `basicConstraints=CA:FALSE`.
   */
  caCerts?: string[];
  /**
   * The address to dial instead of resolving the URL's host (one of a name's several addresses);
   * the host still names the server (`Host`, TLS name checks). Given, our own client is used on
   * every runtime (the global `WebSocket` cannot be pointed at an address).
   */
  address?: string;
}

/** The path {@linkcode listenWebSocket} upgrades by default. */
export const DEFAULT_PATH = "/tunnel";
/** Default largest inbound message (1 MiB). */
export const DEFAULT_MAX_MESSAGE_SIZE = 1024 * 1024;
/**
 * Largest outbound message toward a peer that did not say what it accepts (`message_size.ts`):
 * writes are coalesced up to, and split at, the transport's message size.
 */
export const MESSAGE_SIZE = 64 * 1024;
/**
 * Bytes the socket itself may hold before further messages wait in our queue. Below the high-water
 * mark, so `close()` can still drop most of a backlog, and far below Bun's backpressure limit.
 */
export const SOCKET_SEND_LIMIT = 256 * 1024;
/**
 * How often a blocked sender re-checks the socket's `bufferedAmount` where no event reports it;
 * the timer runs only while something waits for room.
 */
const POLL_MS = 1;
/** How long we wait for the peer to answer our close frame before giving up on it. */
export const CLOSE_REPLY_MS = 5000;

/** WebSocket close codes (RFC 6455 §7.4.1) this transport sends or interprets. */
export const CloseCode = {
  /** Normal closure: our `end()` and `close()`. */
  Normal: 1000,
  /** The peer is going away (server shutdown, page left); treated like 1000. */
  GoingAway: 1001,
  /** The peer broke the framing rules (sent by our own client, `ws/client.ts`). */
  ProtocolError: 1002,
  /** A text message arrived; the tunnel is binary only. */
  UnsupportedData: 1003,
  /** A close frame without a code (reported, never sent); treated like 1000. */
  NoStatus: 1005,
  /** The connection dropped without a close frame (reported, never sent). */
  Abnormal: 1006,
  /** A message above `maxMessageSize` arrived. */
  MessageTooBig: 1009,
  /** A handler of ours threw. */
  InternalError: 1011,
} as const;

/**
 * The application-range stand-in for `code` (4000 + code − 1000: 1003 → 4003, 1009 → 4009,
 * 1011 → 4011). WHATWG `WebSocket.close()` accepts only 1000 and 3000–4999, and Deno's client
 * enforces it; peers see the stand-in there.
 */
export function applicationCloseCode(code: number): number {
  return code === CloseCode.Normal || code >= 3000 ? code : 4000 + (code - 1000);
}

/** True for a close the peer meant: 1000, 1001, a close frame without code, and no error. */
export function isCleanClose(code: number, wasClean: boolean): boolean {
  return wasClean &&
    (code === CloseCode.Normal || code === CloseCode.GoingAway || code === CloseCode.NoStatus);
}

/** The WebSocket ended with a code or failure other than a clean close. */
export class WebSocketCloseError extends Error {
  /** The close code seen (1006 or 0 for a lost connection). */
  readonly code: number;
  /** The peer's close reason, if any. */
  readonly reason: string;

  /** Describes a close with `code` and `reason`; `detail` replaces the generic message. */
  constructor(code: number, reason: string, detail?: string) {
    const what = detail ??
      (code === CloseCode.Abnormal || code === 0
        ? "WebSocket connection lost without a close frame"
        : `WebSocket closed by the peer with code ${code}`);
    super(reason ? `${what}: ${reason}` : what);
    this.name = "WebSocketCloseError";
    this.code = code;
    this.reason = reason;
  }
}

/** What a socket did with a message. */
export type SendResult = "sent" | "dropped" | "closed";

/** The runtime-specific socket beneath a {@linkcode WebSocketTransport}. */
export interface SocketDriver {
  /** Bytes sent to the socket that it has not yet handed to the OS. */
  buffered(): number;
  /** Sends one binary message: `sent` (taken, maybe queued), `dropped` (retry later), `closed`. */
  send(message: Uint8Array): SendResult;
  /** Starts the closing handshake with `code`. */
  close(code: number, reason: string): void;
  /** Drops the connection without a handshake (when the peer never answers our close). */
  terminate(): void;
  /** Stops reading from the peer, where the socket can. */
  pause?(): void;
  /** Resumes reading after {@linkcode pause}. */
  resume?(): void;
  /** Bytes `sendFramable` needs free in front of a message (see `Transport.headroom`). */
  readonly headroom?: number;
  /**
   * Sends a message as `send` does, writing the frame header into the `headroom` bytes in front
   * of it and changing it in place (a client masks it), instead of copying it into a frame.
   */
  sendFramable?(message: Uint8Array): SendResult;
  /**
   * A message given to {@linkcode sendFramable} reaches a socket that gives written chunks back
   * (`Transport.releasesWrites`), claim and all.
   */
  readonly releasesWrites?: boolean;
  /**
   * The socket beneath writes large chunks as they are (`Transport.writesLargeAsIs`), and
   * {@linkcode sendApart} is there.
   */
  readonly writesLargeAsIs?: boolean;
  /**
   * Sends a large message (16 KiB or more), `prefix` (a few bytes, default none) in front of it in
   * the same message, as `send` does, without copying the message into a frame: the frame header
   * and the prefix go to the socket apart and the message after them as it lies (a server's), or
   * header, prefix and masked message are written into one pooled buffer in one pass over the
   * message (a client's). Claims, if any, go with them or are given back.
   */
  sendApart?(message: Uint8Array, prefix?: Uint8Array): SendResult;
  /**
   * True when the driver calls {@linkcode WebSocketTransport.onWritable} whenever its buffer falls
   * below the send limit after a send filled it, and when a close frame queues behind the messages
   * already sent: the transport then never polls `buffered()` (our own client, over TCP).
   */
  readonly signalsWritable?: boolean;
}

/** Tuning shared by every {@linkcode WebSocketTransport}. */
export interface WebSocketTransportOptions {
  /** The peer's `host:port`. */
  remoteAddress: string;
  /** The local `host:port`, or "unknown" where the socket does not say. */
  localAddress: string;
  /** Queued outgoing bytes at which `write` returns false. */
  highWaterMark?: number;
  /** Largest inbound message. */
  maxMessageSize?: number;
  /** Bytes the socket may hold before we stop handing it messages. */
  socketSendLimit?: number;
  /** Largest outbound message, what the peer accepts (`message_size.ts`). Default {@linkcode MESSAGE_SIZE}. */
  messageSize?: number;
}

/**
 * A WebSocket adapted to the {@linkcode Transport} contract. Built by the runtime adapters, which
 * forward the socket's events to the `on*` methods.
 */
export class WebSocketTransport implements Transport {
  /** The peer's `host:port`. */
  readonly remoteAddress: string;
  /** The local `host:port`, or "unknown". */
  readonly localAddress: string;

  #driver: SocketDriver;
  #sink: EventSink;
  #queue = new ChunkQueue();
  #gate: WriteGate;
  #maxMessageSize: number;
  #messageSize: number;
  #sendLimit: number;
  #flushScheduled = false;
  #pollTimer: ReturnType<typeof setTimeout> | undefined;
  #closeTimer: ReturnType<typeof setTimeout> | undefined;
  // Our close frame went out (after end()): the peer's answer reports end and close.
  #closeSent = false;
  // The peer closed cleanly; close is reported once the handler has seen the end.
  #closeAfterEnd = false;
  #onClosed: (() => void) | undefined;
  /** Chunks written with `writeFramable`: the driver may frame them in place. */
  readonly #framable = new WeakSet<Uint8Array>();

  /** Wraps an open socket; `onClosed` runs once when the transport is finished (cleanup). */
  constructor(driver: SocketDriver, options: WebSocketTransportOptions, onClosed?: () => void) {
    this.#driver = driver;
    this.remoteAddress = options.remoteAddress;
    this.localAddress = options.localAddress;
    this.#gate = new WriteGate(options.highWaterMark);
    this.#maxMessageSize = options.maxMessageSize ?? DEFAULT_MAX_MESSAGE_SIZE;
    this.#sendLimit = options.socketSendLimit ?? SOCKET_SEND_LIMIT;
    this.#messageSize = options.messageSize ?? MESSAGE_SIZE;
    this.#onClosed = onClosed;
    this.#sink = new EventSink({
      endDelivered: () => {
        if (this.#closeAfterEnd) this.#finish(undefined);
      },
      handlerFailed: (error) => this.#fail(error, CloseCode.InternalError),
    });
    // Hold the socket until someone listens (where it can be held).
    driver.pause?.();
  }

  /** Bytes accepted by `write` that the OS has not taken yet (our queue plus the socket's). */
  get bufferedAmount(): number {
    if (this.#sink.closed) return 0;
    return this.#queue.bytes + this.#driver.buffered();
  }

  start(handlers: TransportHandlers): void {
    this.#sink.start(handlers);
    if (!this.#sink.paused && !this.#sink.closed) this.#driver.resume?.();
  }

  /** Room the driver frames in (see `Transport.headroom`); 0 where it copies. */
  get headroom(): number {
    return this.#driver.sendFramable ? this.#driver.headroom ?? 0 : 0;
  }

  /**
   * Chunks framed in place go to a socket that gives them back once written (our own framing on
   * Deno TCP), so writers may build them in pooled buffers (see `Transport.releasesWrites`). Other
   * chunks' claims, if any, are never given back: pooled memory is simply not reused then.
   */
  get releasesWrites(): boolean {
    return this.#driver.sendFramable !== undefined && this.#driver.releasesWrites === true;
  }

  /**
   * A chunk of 16 KiB or more, up to the message size, goes out as a message of its own without
   * being copied into it where the driver can (`SocketDriver.sendApart`): see
   * `Transport.writesLargeAsIs`.
   */
  get writesLargeAsIs(): boolean {
    return this.#driver.writesLargeAsIs === true && this.#driver.sendApart !== undefined;
  }

  /** Messages are at most the message size (`messageSize`); a chunk up to it is framed in place. */
  get framableSize(): number {
    return this.#messageSize;
  }

  writeFramable(chunk: Uint8Array): boolean {
    // Only a chunk that reaches the driver whole is framed in place: `#flush` sends it as its own
    // message when it fits one (a chunk split by a partial take is a new array, not in the set).
    this.#framable.add(chunk);
    return this.write(chunk);
  }

  write(chunk: Uint8Array): boolean {
    if (!this.#gate.open(this.#sink.closed)) return false;
    if (chunk.length > 0) {
      this.#queue.push(chunk);
      this.#scheduleFlush();
    }
    return this.#gate.underMark(this.bufferedAmount);
  }

  pause(): void {
    this.#sink.pause();
    if (!this.#sink.closed) this.#driver.pause?.();
  }

  resume(): void {
    if (!this.#sink.closed) this.#driver.resume?.();
    this.#sink.resume();
  }

  end(): void {
    if (!this.#gate.end(this.#sink.closed)) return;
    this.#scheduleFlush();
  }

  close(): void {
    if (this.#sink.closed) return;
    this.#finish(undefined);
    this.#driver.close(CloseCode.Normal, "");
  }

  /** @internal A message arrived: binary bytes, or a string for a text message. */
  onMessage(data: ArrayBuffer | Uint8Array | string): void {
    if (this.#sink.closed) return;
    if (typeof data === "string") {
      this.#fail(
        new WebSocketCloseError(CloseCode.UnsupportedData, "", "peer sent a text message"),
        CloseCode.UnsupportedData,
      );
      return;
    }
    // Both runtimes allocate each message afresh, so the bytes are handed on without a copy.
    const bytes = data instanceof Uint8Array ? data : new Uint8Array(data);
    if (bytes.length > this.#maxMessageSize) {
      this.#fail(
        new WebSocketCloseError(
          CloseCode.MessageTooBig,
          "",
          `peer sent a ${bytes.length}-byte message, above maxMessageSize ${this.#maxMessageSize}`,
        ),
        CloseCode.MessageTooBig,
      );
      return;
    }
    this.#sink.data(bytes);
  }

  /** @internal The socket has room again (Bun's `drain`). */
  onWritable(): void {
    this.#flush();
  }

  /** @internal The socket closed; `error` describes a failure the runtime reported. */
  onClose(code: number, reason: string, wasClean: boolean, error?: Error): void {
    this.#clearTimers();
    if (!this.#sink.closed) {
      if (!error && isCleanClose(code, wasClean)) {
        // No half-close in WebSocket: the peer's close is its end, and nothing more can be sent.
        this.#queue.clear();
        // A writer waiting for a drain would wait forever (nothing more goes out), and if it
        // paused our reading meanwhile, as a relay does, it would never see this end: it gets
        // its drain now. Whatever happens, the close is reported within CLOSE_REPLY_MS.
        const drainOwed = this.#gate.drainOwed;
        this.#gate.end(false);
        this.#closeSent = true;
        this.#closeAfterEnd = true;
        this.#sink.end();
        if (drainOwed) this.#sink.drain();
        if (!this.#sink.closed) {
          this.#closeTimer = setTimeout(() => this.#finish(undefined), CLOSE_REPLY_MS);
        }
      } else {
        this.#finish(error ?? new WebSocketCloseError(code, reason));
      }
    }
    const onClosed = this.#onClosed;
    this.#onClosed = undefined;
    onClosed?.();
  }

  #scheduleFlush(): void {
    if (this.#flushScheduled) return;
    this.#flushScheduled = true;
    // Writes made in the same tick (a yamux header and its body) go out in one message.
    queueMicrotask(() => {
      this.#flushScheduled = false;
      this.#flush();
    });
  }

  #flush(): void {
    if (this.#sink.closed || this.#closeSent) return;
    while (!this.#queue.empty && this.#driver.buffered() < this.#sendLimit) {
      // A chunk written for framing in place goes out as its own message, not joined with the
      // next (which would copy it); anything else is joined up to the message size.
      const head = this.#queue.peek()!;
      const size = this.#messageSize;
      // A small chunk (a session's frame headers) before a large one that goes as it lies goes in
      // the large one's message, in front: one message and (a client's) one write for both. If
      // both do not fit in a message, it is a message of its own, not joined with a copied part.
      const next = head.length < JOIN_BELOW && this.writesLargeAsIs
        ? this.#queue.peek(1)
        : undefined;
      const nextApart = next !== undefined && next.length >= JOIN_BELOW && next.length <= size;
      if (nextApart && head.length + next.length <= size) {
        this.#queue.shift();
        this.#queue.shift();
        const result = this.#driver.sendApart!(next, head);
        if (result === "dropped") {
          this.#queue.unshift(next);
          this.#queue.unshift(head);
          break;
        }
        if (result === "closed") return;
        continue;
      }
      const inPlace = this.#framable.has(head) && head.length <= size &&
        this.#driver.sendFramable !== undefined;
      const apart = !inPlace && head.length >= JOIN_BELOW && head.length <= size &&
        this.writesLargeAsIs;
      const message = inPlace || apart || nextApart ? this.#queue.shift() : this.#queue.take(size);
      const result = inPlace
        ? this.#driver.sendFramable!(message)
        : apart
        ? this.#driver.sendApart!(message)
        : this.#driver.send(message);
      if (result === "dropped") {
        // Bun's socket is over its backpressure limit and did not take it: retry on drain.
        this.#queue.unshift(message);
        break;
      }
      // The close event follows and reports how the connection ended.
      if (result === "closed") return;
    }
    if (this.#gate.drainDue(this.bufferedAmount)) {
      this.#sink.drain();
      if (this.#sink.closed || this.#closeSent) return;
    }
    // A driver that keeps frames in order can take the close frame behind unsent messages.
    const socketDone = this.#driver.signalsWritable || this.#driver.buffered() === 0;
    if (this.#gate.ending && this.#queue.empty && socketDone) {
      // Everything is out: the close frame follows it.
      this.#closeSent = true;
      this.#driver.close(CloseCode.Normal, "");
      this.#closeTimer = setTimeout(() => {
        this.#closeTimer = undefined;
        if (this.#sink.closed) return;
        this.#finish(
          new WebSocketCloseError(CloseCode.Abnormal, "", "peer did not answer our close frame"),
        );
        this.#driver.terminate();
      }, CLOSE_REPLY_MS);
      return;
    }
    // The driver's drain brings us back here: nothing to poll.
    if (this.#driver.signalsWritable) return;
    // Nothing reports when the socket's own buffer shrinks on Deno or in a client: check again
    // shortly, only while something waits on it. (Bun's drain event also calls onWritable.)
    if (!this.#queue.empty || this.#gate.drainOwed || this.#gate.ending) this.#poll();
  }

  #poll(): void {
    if (this.#pollTimer !== undefined) return;
    this.#pollTimer = setTimeout(() => {
      this.#pollTimer = undefined;
      this.#flush();
    }, POLL_MS);
  }

  #fail(error: Error, code: number): void {
    if (this.#sink.closed) return;
    this.#finish(toError(error));
    this.#driver.close(code, error.message.slice(0, 120));
  }

  #finish(error: Error | undefined): void {
    if (this.#sink.closed) return;
    this.#queue.clear();
    this.#clearTimers();
    this.#sink.close(error);
  }

  #clearTimers(): void {
    clearTimeout(this.#pollTimer);
    this.#pollTimer = undefined;
    clearTimeout(this.#closeTimer);
    this.#closeTimer = undefined;
  }
}

/**
 * The HTTP side of an upgrade, shared by both servers: 404 off `path`, 426 without a WebSocket
 * upgrade, then `authorize`. Returns the refusal, or undefined to upgrade.
 */
export async function screenUpgrade(
  request: Request,
  remoteAddress: string,
  options: WebSocketListenOptions,
): Promise<Response | undefined> {
  if (new URL(request.url).pathname !== (options.path ?? DEFAULT_PATH)) {
    return new Response("not found\n", { status: 404 });
  }
  if (request.headers.get("upgrade")?.toLowerCase() !== "websocket") {
    return new Response("WebSocket upgrade required\n", {
      status: 426,
      headers: { upgrade: "websocket" },
    });
  }
  if (!options.authorize) return undefined;
  try {
    return await options.authorize(request, remoteAddress);
  } catch {
    return new Response("authorization failed\n", { status: 500 });
  }
}
