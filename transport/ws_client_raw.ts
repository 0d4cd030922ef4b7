/**
 * Our own RFC 6455 WebSocket client, over {@linkcode connectTcp} / {@linkcode connectTls}. Used on
 * Deno instead of the global `WebSocket`, which turns TCP_NODELAY off on its socket (strace shows
 * `setsockopt(TCP_NODELAY, 0)`) with no way to turn it back on: every small yamux exchange then
 * waited on Nagle and delayed ACKs (~47 ms per short tunneled connection, against ~3 ms over TCP).
 * Our transports set noDelay. The code is runtime-neutral and also works (and is tested) on Bun.
 *
 * What it keeps of the global-`WebSocket` client (`ws_client.ts`): `headers`, `caCerts` for
 * `wss://` (with SNI and name checks from `connectTls`), `maxMessageSize` (→ 1009, refused from
 * the frame header before buffering), text messages → 1003, a refused upgrade →
 * {@linkcode WebSocketConnectError} with `status`. Differences, all improvements:
 * - Close codes go out as they are (1002, 1003, 1009, 1011): there is no WHATWG `close()` in the
 *   way, so no 4xxx stand-ins.
 * - `pause()` stops reading from the TCP socket, so the server feels backpressure.
 * - Backpressure is event-driven: the TCP transport's high-water mark is the WebSocket send limit,
 *   and its `drain` wakes the sender (no polling of `bufferedAmount`).
 * - `localAddress` is known.
 *
 * Close: either side's close frame is answered; once both went (or the peer's answer arrived) the
 * transport reports the close and the TCP connection is half-closed, the server then closing it.
 * A peer that does not answer our close within {@linkcode CLOSE_REPLY_MS} is cut off.
 *
 * @module
 */

import type { Transport, TransportHandlers } from "../protocol/transport.ts";
import { formatHostPort, unbracketHost } from "../util/address.ts";
import {
  headEnd,
  MAX_RESPONSE_HEAD,
  newKey,
  parseResponseHead,
  upgradeProblem,
  upgradeRequest,
} from "./ws_handshake.ts";
import { connectTcp, connectTls } from "./tcp.ts";
import {
  CLOSE_REPLY_MS,
  CloseCode,
  DEFAULT_MAX_MESSAGE_SIZE,
  type SendResult,
  SOCKET_SEND_LIMIT,
  type SocketDriver,
  WebSocketCloseError,
  WebSocketConnectError,
  type WebSocketConnectOptions,
  WebSocketTransport,
} from "./ws_transport.ts";
import {
  decodeClosePayload,
  encodeClosePayload,
  encodeFrame,
  FrameError,
  MessageDecoder,
  Opcode,
  randomMask,
} from "./ws_frame.ts";
import { DEFAULT_HIGH_WATER_MARK } from "./chunk_queue.ts";

/** Routes the TCP transport's events to whoever handles the current phase (handshake, frames). */
class Relay implements TransportHandlers {
  target: TransportHandlers;

  constructor(target: TransportHandlers) {
    this.target = target;
  }

  data(chunk: Uint8Array): void {
    this.target.data(chunk);
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

/**
 * The {@linkcode SocketDriver} of our client: frames {@linkcode WebSocketTransport}'s messages
 * onto a TCP (or TLS) transport and decodes what comes back.
 */
export class RawClientDriver implements SocketDriver {
  /** The TCP transport drains and orders frames: {@linkcode WebSocketTransport} need not poll. */
  readonly signalsWritable = true;

  #tcp: Transport;
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

  /** The handlers for the TCP transport's events (a separate object: both have a `close`). */
  readonly tcpHandlers: TransportHandlers = {
    data: (chunk) => this.#onTcpData(chunk),
    drain: () => this.#transport?.onWritable(),
    end: () => this.#onTcpEnd(),
    close: (error) => this.#onTcpClose(error),
  };

  /** Drives `tcp`, whose handshake is done; inbound messages above `maxMessageSize` fail 1009. */
  constructor(tcp: Transport, maxMessageSize: number) {
    this.#tcp = tcp;
    this.#decoder = new MessageDecoder({ maxMessageSize, masked: false });
  }

  /** Connects the driver to the transport it serves (which is built around the driver). */
  attach(transport: WebSocketTransport): void {
    this.#transport = transport;
  }

  buffered(): number {
    return this.#tcp.bufferedAmount;
  }

  send(message: Uint8Array): SendResult {
    if (this.#closeSent || this.#tcpClosed) return "closed";
    // The TCP transport queues whatever it is given; its false return is our backpressure, which
    // WebSocketTransport sees through buffered() and resolves on our drain.
    this.#tcp.write(encodeFrame(Opcode.Binary, message, randomMask()));
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

  /** The server closed its side of TCP. */
  #onTcpEnd(): void {
    // After the close handshake the server hangs up as it should; the TCP transport closes itself
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
        this.#transport?.onMessage(payload);
        return;
      case Opcode.Text:
        // WebSocketTransport refuses text with 1003; the content does not matter.
        this.#transport?.onMessage("");
        return;
      case Opcode.Ping:
        if (!this.#closeSent) this.#tcp.write(encodeFrame(Opcode.Pong, payload, randomMask()));
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
    this.#tcp.write(encodeFrame(Opcode.Close, payload, randomMask()));
  }

  /**
   * Both close frames are queued or seen: flush ours and half-close. The server closes the TCP
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

/** The host to dial for `url`: IPv6 literals lose their brackets. */
function hostOf(url: URL): string {
  return unbracketHost(url.hostname);
}

/** The port to dial for `url`: explicit, or the scheme's default. */
function portOf(url: URL): number {
  return url.port ? Number(url.port) : url.protocol === "wss:" ? 443 : 80;
}

/**
 * Sends the upgrade request on `tcp` and waits for the response head. Resolves with the bytes
 * that followed it (frames the server sent at once); rejects with a
 * {@linkcode WebSocketConnectError}, after closing `tcp`.
 */
function handshake(
  tcp: Transport,
  relay: Relay,
  url: string,
  request: Uint8Array,
  key: string,
): Promise<Uint8Array> {
  return new Promise((resolve, reject) => {
    let pending = new Uint8Array(0);
    let settled = false;
    const fail = (detail: string, status?: number) => {
      if (settled) return;
      settled = true;
      tcp.close();
      reject(new WebSocketConnectError(url, detail, status));
    };
    relay.target = {
      data(chunk) {
        if (settled) return;
        const joined = new Uint8Array(pending.length + chunk.length);
        joined.set(pending);
        joined.set(chunk, pending.length);
        pending = joined;
        const end = headEnd(pending);
        if (end < 0) {
          if (pending.length > MAX_RESPONSE_HEAD) fail("upgrade response head too large");
          return;
        }
        let head;
        try {
          head = parseResponseHead(pending.subarray(0, end));
        } catch (error) {
          fail((error as Error).message);
          return;
        }
        if (head.status !== 101) {
          fail(`HTTP ${head.status}`, head.status);
          return;
        }
        const problem = upgradeProblem(head, key);
        if (problem) {
          fail(problem);
          return;
        }
        settled = true;
        // Hold further bytes in the TCP transport until the WebSocket transport is listening.
        tcp.pause();
        resolve(pending.subarray(end));
      },
      drain() {},
      end() {
        fail("connection closed before the upgrade response");
      },
      close(error) {
        fail(error?.message ?? "connection closed before the upgrade response");
      },
    };
    tcp.write(request);
  });
}

/**
 * Connects to `url` (`ws://` or `wss://`) with our own client; see the module notes and
 * {@linkcode connectWebSocket} in ws.ts. Rejects with a {@linkcode WebSocketConnectError} when the
 * connection, the TLS handshake or the upgrade fails (the status set for a non-101 answer), and
 * with a TypeError for a bad URL or header.
 */
export async function connectRawWebSocket(
  url: string,
  options: WebSocketConnectOptions = {},
): Promise<Transport> {
  const parsed = new URL(url);
  if (parsed.protocol !== "ws:" && parsed.protocol !== "wss:") {
    throw new TypeError(`not a ws:// or wss:// URL: ${url}`);
  }
  const key = newKey();
  // Built first, so a bad header throws before anything is dialed.
  const request = upgradeRequest(parsed, key, options.headers);
  const highWaterMark = options.highWaterMark ?? DEFAULT_HIGH_WATER_MARK;
  // The TCP transport's mark is the send limit, so a send that fills the socket always gets a
  // drain later (see SocketDriver.signalsWritable); never above our own mark, or a full socket
  // could hold our drain back without the TCP transport owing one.
  const sendLimit = Math.min(SOCKET_SEND_LIMIT, highWaterMark);
  const address = { hostname: hostOf(parsed), port: portOf(parsed), highWaterMark: sendLimit };
  let tcp: Transport;
  try {
    tcp = parsed.protocol === "wss:"
      ? await connectTls({ ...address, caCerts: options.caCerts })
      : await connectTcp(address);
  } catch (error) {
    throw new WebSocketConnectError(url, (error as Error).message, undefined, error);
  }
  const relay = new Relay({ data() {}, drain() {}, end() {}, close() {} });
  tcp.start(relay);
  const rest = await handshake(tcp, relay, url, request, key);
  const driver = new RawClientDriver(tcp, options.maxMessageSize ?? DEFAULT_MAX_MESSAGE_SIZE);
  const transport = new WebSocketTransport(driver, {
    remoteAddress: formatHostPort(hostOf(parsed), portOf(parsed)),
    localAddress: tcp.localAddress,
    highWaterMark,
    maxMessageSize: options.maxMessageSize,
    socketSendLimit: sendLimit,
  });
  driver.attach(transport);
  relay.target = driver.tcpHandlers;
  // Frames that arrived with the response head; the transport holds them until start().
  if (rest.length > 0) driver.receive(rest);
  return transport;
}
