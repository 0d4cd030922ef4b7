/**
 * Our own RFC 6455 WebSocket server over {@linkcode listenTcp} / {@linkcode listenTls}, used on
 * Deno instead of `Deno.serve` + `Deno.upgradeWebSocket`, which (Deno 2.9) processes unmasked
 * client frames, answers an unknown opcode with a bare TCP close, reads on through a frame that
 * declares more than any limit, keeps a connection that never finishes its request forever, and
 * never forces shut a WebSocket whose peer ignores our close. Here:
 *
 * - the request head must arrive whole within `requestTimeoutMs` (default 10 s; 408 and close)
 *   and within 16 KiB (431), and parse strictly (`http/head.ts`; 400);
 * - anything but a valid upgrade on the path is answered with a short HTTP error and closed;
 * - frames follow `ws/driver.ts`: unmasked or unknown frames fail with 1002, a message above
 *   the limit with 1009 from its header, and every close ends the socket within
 *   {@linkcode CLOSE_REPLY_MS};
 * - `pause()` stops reading the socket, so a client that sends faster than the daemon forwards is
 *   held back by TCP instead of by memory.
 *
 * @module
 */

import type { Transport, TransportListener } from "../../protocol/transport.ts";
import { formatHostPort } from "../../util/net/address.ts";
import { concat } from "../../util/bytes/bytes.ts";
import { DEFAULT_HIGH_WATER_MARK } from "../io/chunk_queue.ts";
import { listenTcp, listenTls } from "../tcp.ts";
import { acceptFor } from "./handshake.ts";
import {
  headEnd,
  MAX_REQUEST_HEAD,
  notHttpRequest,
  parseRequestHead,
  type RequestHead,
  responseHead,
} from "../http/head.ts";
import { RawSocketDriver, Relay } from "./driver.ts";
import {
  CLOSE_REPLY_MS,
  DEFAULT_MAX_MESSAGE_SIZE,
  screenUpgrade,
  SOCKET_SEND_LIMIT,
  type WebSocketListenOptions,
  WebSocketTransport,
} from "./transport.ts";
import { MESSAGE_LIMIT_HEADER, messageSizeFor } from "./message_size.ts";

/** Default deadline for a whole request head, from the connection's accept. */
export const REQUEST_TIMEOUT_MS = 10_000;

/** Largest body of a refusal response we send (the daemon's are short JSON). */
const MAX_REFUSAL_BODY = 16 * 1024;

/** Why `head` is not a WebSocket upgrade we can accept (§4.2.1), or undefined. */
function upgradeRefusal(head: RequestHead): { status: number; message: string } | undefined {
  if (head.method !== "GET") return { status: 405, message: "WebSocket upgrades use GET" };
  if (head.version !== "1.1") return { status: 400, message: "WebSocket upgrades need HTTP/1.1" };
  const h = head.headers;
  if (!h.has("host")) return { status: 400, message: "missing Host" };
  const connection = (h.get("connection") ?? "").toLowerCase().split(",").map((t) => t.trim());
  if (!connection.includes("upgrade")) {
    return { status: 400, message: "missing Connection: Upgrade" };
  }
  if (h.get("sec-websocket-version") !== "13") {
    return { status: 426, message: "WebSocket version 13 required" };
  }
  const key = h.get("sec-websocket-key") ?? "";
  if (!/^[A-Za-z0-9+/]{22}==$/.test(key)) return { status: 400, message: "bad Sec-WebSocket-Key" };
  return undefined;
}

/** The bytes of a short HTTP/1.1 response that closes the connection. */
async function responseBytes(response: Response): Promise<Uint8Array> {
  const body = new Uint8Array(await response.arrayBuffer()).subarray(0, MAX_REFUSAL_BODY);
  const fields: [string, string][] = [];
  response.headers.forEach((value, name) => {
    if (name !== "content-length" && name !== "connection") fields.push([name, value]);
  });
  fields.push(["content-length", String(body.length)], ["connection", "close"]);
  const head = responseHead(response.status, fields);
  const out = new Uint8Array(head.length + body.length);
  out.set(head);
  out.set(body, head.length);
  return out;
}

/** Writes `response`, half-closes, and destroys the socket if the peer has not closed in time. */
async function refuse(tcp: Transport, response: Response): Promise<void> {
  tcp.pause();
  tcp.write(await responseBytes(response));
  tcp.end();
  setTimeout(() => tcp.close(), CLOSE_REPLY_MS);
}

/**
 * Serves WebSocket upgrades on `options.path` over our own TCP (or TLS) listener and hands each
 * accepted connection to `onTransport` with its upgrade request; see the module notes.
 */
export async function listenRawWebSocket(
  options: WebSocketListenOptions,
  onTransport: (transport: Transport, request: Request) => void,
): Promise<TransportListener> {
  const highWaterMark = options.highWaterMark ?? DEFAULT_HIGH_WATER_MARK;
  const sendLimit = Math.min(SOCKET_SEND_LIMIT, highWaterMark);
  const maxMessageSize = options.maxMessageSize ?? DEFAULT_MAX_MESSAGE_SIZE;
  const requestTimeoutMs = options.requestTimeoutMs ?? REQUEST_TIMEOUT_MS;
  let closed = false;
  let localAddress = "unknown";
  const scheme = options.tls ? "https" : "http";

  const accept = (tcp: Transport) => {
    let pending = new Uint8Array(0);
    let done = false;
    const timer = setTimeout(() => {
      if (done) return;
      done = true;
      void refuse(tcp, new Response("request head not complete in time\n", { status: 408 }));
    }, requestTimeoutMs);
    const relay = new Relay({
      data(chunk) {
        if (done) return;
        pending = concat([pending, chunk]);
        const end = headEnd(pending);
        if (end < 0) {
          if (notHttpRequest(pending)) {
            done = true;
            clearTimeout(timer);
            void refuse(tcp, new Response("not an HTTP request\n", { status: 400 }));
          } else if (pending.length > MAX_REQUEST_HEAD) {
            done = true;
            clearTimeout(timer);
            void refuse(tcp, new Response("request head too large\n", { status: 431 }));
          }
          return;
        }
        done = true;
        clearTimeout(timer);
        // Nothing more is read until the upgrade is decided; frames sent early wait in the kernel.
        tcp.pause();
        void upgrade(tcp, relay, pending.subarray(0, end), pending.subarray(end));
      },
      drain() {},
      end() {
        done = true;
        clearTimeout(timer);
        tcp.close();
      },
      close() {
        done = true;
        clearTimeout(timer);
      },
    });
    tcp.start(relay);
  };

  const upgrade = async (tcp: Transport, relay: Relay, headBytes: Uint8Array, rest: Uint8Array) => {
    const head = parseRequestHead(headBytes);
    if (!head) return refuse(tcp, new Response("malformed request\n", { status: 400 }));
    const host = head.headers.get("host") ?? "";
    let request: Request;
    try {
      request = new Request(`${scheme}://${host || "localhost"}${head.target}`, {
        method: head.method,
        headers: head.headers,
      });
    } catch {
      return refuse(tcp, new Response("malformed request target or Host\n", { status: 400 }));
    }
    const screened = await screenUpgrade(request, tcp.remoteAddress, options);
    if (screened) return refuse(tcp, screened);
    const problem = upgradeRefusal(head);
    if (problem) {
      return refuse(tcp, new Response(`${problem.message}\n`, { status: problem.status }));
    }
    if (closed) return refuse(tcp, new Response("listener closed\n", { status: 503 }));
    const key = head.headers.get("sec-websocket-key")!;
    tcp.write(
      new TextEncoder().encode(
        "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" +
          `Sec-WebSocket-Accept: ${acceptFor(key)}\r\n` +
          `${MESSAGE_LIMIT_HEADER}: ${maxMessageSize}\r\n\r\n`,
      ),
    );
    const driver = new RawSocketDriver(tcp, { role: "server", maxMessageSize });
    const transport = new WebSocketTransport(driver, {
      remoteAddress: tcp.remoteAddress,
      localAddress,
      highWaterMark,
      maxMessageSize,
      socketSendLimit: sendLimit,
      messageSize: messageSizeFor(request.headers.get(MESSAGE_LIMIT_HEADER)),
    });
    driver.attach(transport);
    relay.target = driver.tcpHandlers;
    // Frames that came with the request head; the transport holds them until start().
    if (rest.length > 0) driver.receive(rest);
    tcp.resume();
    try {
      onTransport(transport, request);
    } catch {
      transport.close();
    }
  };

  const address = { hostname: options.hostname, port: options.port, highWaterMark: sendLimit };
  const listener = options.tls
    ? await listenTls({ ...address, cert: options.tls.cert, key: options.tls.key }, accept)
    : await listenTcp(address, accept);
  localAddress = formatHostPort(listener.hostname, listener.port);
  return {
    hostname: listener.hostname,
    port: listener.port,
    close() {
      closed = true;
      // Stops accepting; upgraded connections stay open (the daemon drains them).
      return listener.close();
    },
  };
}
