/**
 * One RFC 6455 endpoint over a TCP (or TLS) transport, after the opening handshake: our client on
 * Deno (`ws/client.ts`) and our server on Deno (`ws/server.ts`). Runtime-neutral.
 *
 * Close: either side's close frame is answered; once both went (or the peer's answer arrived) the
 * transport reports the close and the TCP connection is half-closed. A peer that does not answer
 * our close, or does not close TCP after the close handshake, is cut off after
 * {@linkcode CLOSE_REPLY_MS}: no socket outlives its close by more than that.
 *
 * @module
 */

import type { Transport, TransportHandlers } from "../../protocol/transport.ts";
import {
  CLOSE_REPLY_MS,
  CloseCode,
  type SendResult,
  type SocketDriver,
  WebSocketCloseError,
  type WebSocketTransport,
} from "./transport.ts";
import {
  decodeClosePayload,
  encodeClosePayload,
  encodeFrame,
  encodeFrameInPlace,
  encodeHeader,
  encodeMaskedInto,
  FrameError,
  MAX_HEADER_SIZE,
  MessageDecoder,
  Opcode,
  randomMask,
} from "./frame.ts";
import { acquireAtLeast, releaseBytes, retainBytes } from "../../util/bytes/buffer_pool.ts";

/** Routes a TCP transport's events to whoever handles the current phase (handshake, frames). */
export class Relay implements TransportHandlers {
  target: TransportHandlers;

  /** Starts by routing to `target`. */
  constructor(target: TransportHandlers) {
    this.target = target;
  }

  /** Whether the current phase's handler follows the claim rules (the frame phase does). */
  get releases(): boolean {
    return this.target.releases === true;
  }

  data(chunk: Uint8Array): void {
    this.target.data(chunk);
  }
  readLimit(preferred: number, capacity: number): number {
    return this.target.readLimit?.(preferred, capacity) ?? 0;
  }
  drain(): void {
    this.target.drain();
  }
  end(): void {
    this.target.end();
  }
  close(error?: Error): void {
    this.target.close(error);
  }
}

/** Options of {@linkcode RawSocketDriver}. */
export interface RawSocketDriverOptions {
  /**
   * `client` masks what it sends and refuses masked frames; `server` sends unmasked frames and
   * refuses unmasked ones (RFC 6455 §5.1: 1002).
   */
  role: "client" | "server";
  /** Largest inbound message; a bigger one fails 1009 from its frame header, before buffering. */
  maxMessageSize: number;
}

/**
 * Our own RFC 6455 endpoint after the opening handshake, client or server: frames
 * {@linkcode WebSocketTransport}'s messages onto a TCP (or TLS) transport and decodes what comes
 * back, with the framing rules enforced by {@linkcode MessageDecoder}.
 */
export class RawSocketDriver implements SocketDriver {
  /** The TCP transport drains and orders frames: {@linkcode WebSocketTransport} need not poll. */
  readonly signalsWritable = true;

  #tcp: Transport;
  readonly #client: boolean;
  #decoder: MessageDecoder;
  #transport: WebSocketTransport | undefined;
  // Our close frame is queued; nothing else may follow it.
  #closeSent = false;
  // The peer's close frame, once it came; input after it is ignored.
  #peerClose: { code: number; reason: string } | undefined;
  // The transport was told how the connection ended.
  #reported = false;
  #tcpClosed = false;
  #timer: ReturnType<typeof setTimeout> | undefined;

  /**
   * The handlers for the TCP transport's events (a separate object: both have a `close`). They
   * follow the claim rules of `util/bytes/buffer_pool.ts`: the decoder runs in pooled mode, a
   * binary message handed on takes a claim of its own, and the chunk's claim ends once it is
   * decoded.
   */
  readonly tcpHandlers: TransportHandlers = {
    releases: true,
    data: (chunk) => {
      this.#onTcpData(chunk);
      releaseBytes(chunk);
    },
    readLimit: (_preferred, capacity) => this.#decoder.readLimit(capacity),
    drain: () => this.#transport?.onWritable(),
    end: () => this.#onTcpEnd(),
    close: (error) => this.#onTcpClose(error),
  };

  /** Drives `tcp`, whose opening handshake is done. */
  constructor(tcp: Transport, options: RawSocketDriverOptions) {
    this.#tcp = tcp;
    this.#client = options.role === "client";
    this.#decoder = new MessageDecoder({
      maxMessageSize: options.maxMessageSize,
      masked: !this.#client,
      pooled: true,
    });
  }

  /** A fresh mask for each frame a client sends; none from a server. */
  #mask(): Uint8Array | undefined {
    return this.#client ? randomMask() : undefined;
  }

  /** Connects the driver to the transport it serves (which is built around the driver). */
  attach(transport: WebSocketTransport): void {
    this.#transport = transport;
  }

  buffered(): number {
    return this.#tcp.bufferedAmount;
  }

  /** The TCP transport gives written chunks back, and messages framed in place reach it whole. */
  get releasesWrites(): boolean {
    return this.#tcp.releasesWrites === true;
  }

  /** Room for the largest frame header, rounded up so a payload after it stays 8-aligned. */
  readonly headroom = MAX_HEADER_SIZE + 2;

  /** Like `send`, framing `message` in place in the `headroom` bytes in front of it. */
  sendFramable(message: Uint8Array): SendResult {
    if (this.#closeSent || this.#tcpClosed) return "closed";
    this.#tcp.write(encodeFrameInPlace(Opcode.Binary, message, this.#mask()));
    return "sent";
  }

  /** The TCP transport writes large chunks as they are: {@linkcode sendApart} saves a copy. */
  get writesLargeAsIs(): boolean {
    return this.#tcp.writesLargeAsIs === true;
  }

  /**
   * A large message without a copy of its own, `prefix` (a few bytes) in front of it in the same
   * message: a server writes the header and the prefix apart and the message as it lies; a client
   * masks both into a pooled buffer behind the header (a copy it makes anyway, as the message is
   * not ours to change), in one pass, and gives their claims back.
   */
  sendApart(message: Uint8Array, prefix?: Uint8Array): SendResult {
    if (this.#closeSent || this.#tcpClosed) return "closed";
    const p = prefix === undefined ? 0 : prefix.length;
    if (!this.#client) {
      this.#tcp.write(encodeHeader(Opcode.Binary, p + message.length));
      if (p > 0) this.#tcp.write(prefix!);
      this.#tcp.write(message);
      return "sent";
    }
    const size = p + message.length + MAX_HEADER_SIZE + 7;
    const into = acquireAtLeast(size) ?? new Uint8Array(size);
    this.#tcp.write(encodeMaskedInto(Opcode.Binary, message, randomMask(), into, prefix));
    if (p > 0) releaseBytes(prefix!);
    releaseBytes(message);
    return "sent";
  }

  send(message: Uint8Array): SendResult {
    if (this.#closeSent || this.#tcpClosed) return "closed";
    // The TCP transport queues whatever it is given; its false return is our backpressure, which
    // WebSocketTransport sees through buffered() and resolves on our drain.
    this.#tcp.write(encodeFrame(Opcode.Binary, message, this.#mask()));
    return "sent";
  }

  close(code: number, reason: string): void {
    if (this.#closeSent || this.#tcpClosed) return;
    // The peer's answer must be read even if the owner paused us; what data comes before it is
    // held by the transport or dropped once it is closed.
    this.#tcp.resume();
    this.#sendClose(code, reason);
    if (this.#peerClose) {
      // This was the answer to the peer's close: the handshake is complete.
      this.#finishTcp();
      return;
    }
    this.#timer = setTimeout(() => {
      this.#timer = undefined;
      this.#report(
        CloseCode.Abnormal,
        "",
        false,
        new WebSocketCloseError(
          CloseCode.Abnormal,
          "",
          "peer did not answer our close frame",
        ),
      );
      this.#tcp.close();
    }, CLOSE_REPLY_MS);
  }

  terminate(): void {
    this.#tcp.close();
  }

  pause(): void {
    this.#tcp.pause();
  }

  resume(): void {
    this.#tcp.resume();
  }

  /** Bytes from TCP (or left over from the handshake): frames to decode. */
  receive(chunk: Uint8Array): void {
    this.#onTcpData(chunk);
  }

  #onTcpData(chunk: Uint8Array): void {
    if (this.#peerClose || this.#reported) return;
    try {
      this.#decoder.push(chunk, (opcode, payload) => this.#onFrame(opcode, payload));
    } catch (error) {
      if (!(error instanceof FrameError)) throw error;
      const failure = new WebSocketCloseError(error.code, "", error.message);
      this.#report(error.code, "", false, failure);
      if (!this.#closeSent) this.#sendClose(error.code, error.message);
      this.#finishTcp();
    }
  }

  /** The peer closed its side of TCP. */
  #onTcpEnd(): void {
    // After the close handshake the peer hangs up as it should; the TCP transport closes itself
    // once our half-close (#finishTcp) is out too.
    if (this.#peerClose) return;
    // No close frame first: the connection was lost (1006), as the WebSocket API reports it.
    this.#report(CloseCode.Abnormal, "", false);
    this.#tcp.close();
  }

  /** The TCP transport is finished. */
  #onTcpClose(error?: Error): void {
    this.#tcpClosed = true;
    clearTimeout(this.#timer);
    this.#timer = undefined;
    if (this.#peerClose) {
      this.#report(this.#peerClose.code, this.#peerClose.reason, true);
    } else {
      this.#report(CloseCode.Abnormal, "", false, error);
    }
  }

  #onFrame(opcode: number, payload: Uint8Array): void {
    if (this.#peerClose || this.#reported) return;
    switch (opcode) {
      case Opcode.Binary:
        // It may be a view of the TCP chunk or a pooled buffer: the message takes a claim along.
        retainBytes(payload);
        this.#transport?.onMessage(payload);
        return;
      case Opcode.Text:
        // WebSocketTransport refuses text with 1003; the content does not matter.
        this.#transport?.onMessage("");
        return;
      case Opcode.Ping:
        if (!this.#closeSent) this.#tcp.write(encodeFrame(Opcode.Pong, payload, this.#mask()));
        return;
      case Opcode.Pong:
        return;
      case Opcode.Close: {
        // Throws a FrameError for a malformed close, which #onTcpData turns into 1002.
        const close = decodeClosePayload(payload);
        this.#peerClose = close;
        if (this.#closeSent) {
          // The answer to our close: done.
          this.#report(close.code, close.reason, true);
          this.#finishTcp();
          return;
        }
        // The peer's close is its end (WebSocketTransport delivers end, then close), answered
        // right away with the same code, as RFC 6455 §5.5.1 suggests.
        this.#report(close.code, close.reason, true);
        this.#sendClose(close.code === 1005 ? undefined : close.code, "");
        this.#finishTcp();
        return;
      }
    }
  }

  /** Queues a close frame (an empty one for `code` undefined). */
  #sendClose(code: number | undefined, reason: string): void {
    this.#closeSent = true;
    const payload = code === undefined ? new Uint8Array(0) : encodeClosePayload(code, reason);
    this.#tcp.write(encodeFrame(Opcode.Close, payload, this.#mask()));
  }

  /**
   * Both close frames are queued or seen: flush ours and half-close. The peer closes the TCP
   * connection then (§7.1.1); one that does not is cut off after {@linkcode CLOSE_REPLY_MS}.
   */
  #finishTcp(): void {
    if (this.#tcpClosed) return;
    this.#tcp.end();
    clearTimeout(this.#timer);
    this.#timer = setTimeout(() => {
      this.#timer = undefined;
      this.#tcp.close();
    }, CLOSE_REPLY_MS);
  }

  /** Tells the transport, once, how the connection ended. */
  #report(code: number, reason: string, wasClean: boolean, error?: Error): void {
    if (this.#reported) return;
    this.#reported = true;
    this.#transport?.onClose(code, reason, wasClean, error);
  }
}
