/**
 * Our own RFC 6455 WebSocket client, over {@linkcode connectTcp} / {@linkcode connectTls}, on every
 * runtime, instead of the global `WebSocket`. Deno's turns TCP_NODELAY off on its socket (strace
 * shows `setsockopt(TCP_NODELAY, 0)`) with no way to turn it back on: every small yamux exchange
 * then waited on Nagle and delayed ACKs (~47 ms per short tunneled connection, against ~3 ms over
 * TCP). Bun's has no drain event, so a sender had to poll its `bufferedAmount` (a third slower in
 * a bulk transfer, a quarter fewer connections per second). Our transports set noDelay.
 *
 * What it offers: `headers`, `caCerts` for `wss://` (with SNI and name checks from `connectTls`),
 * `maxMessageSize` (→ 1009, refused from the frame header before buffering), text messages → 1003,
 * a refused upgrade → {@linkcode WebSocketConnectError} with `status`. Beyond a WHATWG client:
 * - Close codes go out as they are (1002, 1003, 1009, 1011): there is no WHATWG `close()` in the
 *   way, so no 4xxx stand-ins.
 * - `pause()` stops reading from the TCP socket, so the server feels backpressure.
 * - Backpressure is event-driven: the TCP transport's high-water mark is the WebSocket send limit,
 *   and its `drain` wakes the sender (no polling of `bufferedAmount`).
 * - `localAddress` is known.
 *
 * Framing and the close handshake (with its deadline) are `ws/driver.ts`, shared with our
 * server.
 *
 * @module
 */

import type { Transport } from "../../protocol/transport.ts";
import { formatHostPort, unbracketHost } from "../../util/net/address.ts";
import { concat } from "../../util/bytes/bytes.ts";
import { headEnd } from "../http/head.ts";
import {
  MAX_RESPONSE_HEAD,
  newKey,
  parseResponseHead,
  upgradeProblem,
  upgradeRequest,
} from "./handshake.ts";
import { connectTcp, connectTls } from "../tcp.ts";
import {
  DEFAULT_MAX_MESSAGE_SIZE,
  SOCKET_SEND_LIMIT,
  type WebSocketConnectOptions,
  WebSocketTransport,
} from "./transport.ts";
import { WebSocketConnectError } from "./connect_error.ts";
import { RawSocketDriver, Relay } from "./driver.ts";
import { MESSAGE_LIMIT_HEADER, messageSizeFor } from "./message_size.ts";
import { DEFAULT_HIGH_WATER_MARK } from "../io/chunk_queue.ts";

/** How every HTTP response begins. */
const HTTP_PREFIX = new TextEncoder().encode("HTTP/");

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
 * that followed it (frames the server sent at once) and the size of the messages to send, from
 * what the server said it accepts; rejects with a {@linkcode WebSocketConnectError}, after
 * closing `tcp`.
 */
function handshake(
  tcp: Transport,
  relay: Relay,
  url: string,
  request: Uint8Array,
  key: string,
): Promise<{ rest: Uint8Array; messageSize: number }> {
  return new Promise((resolve, reject) => {
    let pending = new Uint8Array(0);
    let settled = false;
    const fail = (detail: string, status?: number, answer?: Uint8Array) => {
      if (settled) return;
      settled = true;
      tcp.close();
      reject(new WebSocketConnectError(url, detail, status, undefined, answer));
    };
    relay.target = {
      data(chunk) {
        if (settled) return;
        pending = concat([pending, chunk]);
        // Another protocol's port (a yamux listener's frames start with byte 0) is named at
        // once, rather than waited on for a head that never comes.
        const prefix = pending.subarray(0, HTTP_PREFIX.length);
        if (!prefix.every((byte, i) => byte === HTTP_PREFIX[i])) {
          fail(
            "the server answered in a protocol other than HTTP",
            undefined,
            pending.slice(0, 16),
          );
          return;
        }
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
        resolve({
          rest: pending.subarray(end),
          messageSize: messageSizeFor(head.headers.get(MESSAGE_LIMIT_HEADER.toLowerCase())),
        });
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
  const maxMessageSize = options.maxMessageSize ?? DEFAULT_MAX_MESSAGE_SIZE;
  const request = upgradeRequest(parsed, key, {
    ...options.headers,
    [MESSAGE_LIMIT_HEADER]: String(maxMessageSize),
  });
  const highWaterMark = options.highWaterMark ?? DEFAULT_HIGH_WATER_MARK;
  // The TCP transport's mark is the send limit, so a send that fills the socket always gets a
  // drain later (see SocketDriver.signalsWritable); never above our own mark, or a full socket
  // could hold our drain back without the TCP transport owing one.
  const sendLimit = Math.min(SOCKET_SEND_LIMIT, highWaterMark);
  const address = {
    hostname: options.address ?? hostOf(parsed),
    port: portOf(parsed),
    highWaterMark: sendLimit,
  };
  let tcp: Transport;
  try {
    tcp = parsed.protocol === "wss:"
      ? await connectTls({ ...address, caCerts: options.caCerts, serverName: hostOf(parsed) })
      : await connectTcp(address);
  } catch (error) {
    throw new WebSocketConnectError(url, (error as Error).message, undefined, error);
  }
  const relay = new Relay({ data() {}, drain() {}, end() {}, close() {} });
  tcp.start(relay);
  const { rest, messageSize } = await handshake(tcp, relay, url, request, key);
  const driver = new RawSocketDriver(tcp, { role: "client", maxMessageSize });
  const transport = new WebSocketTransport(driver, {
    remoteAddress: formatHostPort(hostOf(parsed), portOf(parsed)),
    localAddress: tcp.localAddress,
    highWaterMark,
    maxMessageSize,
    socketSendLimit: sendLimit,
    messageSize,
  });
  driver.attach(transport);
  relay.target = driver.tcpHandlers;
  // Frames that arrived with the response head; the transport holds them until start().
  if (rest.length > 0) driver.receive(rest);
  return transport;
}
