/**
 * The global-`WebSocket` client, used on Bun. (It works on Deno too, but Deno's turns TCP_NODELAY
 * off on its socket, so {@linkcode connectWebSocket} uses our own client there:
 * `ws_client_raw.ts`.)
 *
 * - Handshake headers: both runtimes accept the non-standard `new WebSocket(url, { headers })`,
 *   which carries `Authorization: Bearer …`.
 * - Trusting a private CA for `wss://`: Deno through `{ client: Deno.createHttpClient({ caCerts }) }`
 *   (the client is closed with the socket), Bun through `{ tls: { ca } }`.
 * - Backpressure: `bufferedAmount` counts bytes not yet written (it grows while the peer does not
 *   read); neither runtime has a drain event, so the transport polls it while it waits.
 * - Reading: Bun's client `WebSocket` has non-standard `pause()` / `resume()`, used when present;
 *   Deno's cannot stop reading, so `pause()` holds messages in memory.
 * - Close codes: WHATWG `close()` accepts only 1000 and 3000–4999 and Deno enforces it, so there
 *   1003 / 1009 / 1011 go out as 4003 / 4009 / 4011 ({@linkcode applicationCloseCode}); Bun sends
 *   them as they are.
 * - A refused upgrade: both runtimes put the HTTP status in the error message ("Invalid status
 *   code: 401" on Deno, "Expected 101 status code: 401" on Bun), from which
 *   {@linkcode WebSocketConnectError.status} is taken. The response body is not available.
 *
 * @module
 */

import type { Transport } from "../protocol/transport.ts";
import { formatHostPort, unbracketHost } from "../util/address.ts";
import { StandardSocketDriver } from "./ws_standard_driver.ts";
import {
  POLLED_SOCKET_SEND_LIMIT,
  WebSocketConnectError,
  type WebSocketConnectOptions,
  WebSocketTransport,
} from "./ws_transport.ts";

function remoteOf(url: URL): string {
  const port = url.port ? Number(url.port) : url.protocol === "wss:" ? 443 : 80;
  return formatHostPort(unbracketHost(url.hostname), port);
}

/** Connects with the global `WebSocket`; see {@linkcode connectWebSocket} in ws.ts. */
export function connectWebSocketClient(
  url: string,
  options: WebSocketConnectOptions = {},
): Promise<Transport> {
  return new Promise((resolve, reject) => {
    let parsed: URL;
    try {
      parsed = new URL(url);
      if (parsed.protocol !== "ws:" && parsed.protocol !== "wss:") {
        throw new Error(`not a ws:// or wss:// URL: ${url}`);
      }
    } catch (error) {
      reject(error);
      return;
    }
    const init: Record<string, unknown> = { headers: options.headers ?? {} };
    let httpClient: { close(): void } | undefined;
    const deno = (globalThis as { Deno?: typeof Deno }).Deno;
    if (options.caCerts?.length) {
      if (deno) {
        httpClient = deno.createHttpClient({ caCerts: options.caCerts });
        init.client = httpClient;
      } else {
        init.tls = { ca: options.caCerts };
      }
    }
    const release = () => {
      try {
        httpClient?.close();
      } catch {
        // Already closed.
      }
      httpClient = undefined;
    };
    let socket: WebSocket;
    try {
      // The options object is non-standard (Deno and Bun); the DOM typings know only protocols.
      socket = new WebSocket(url, init as unknown as string[]);
    } catch (error) {
      release();
      reject(error);
      return;
    }
    socket.binaryType = "arraybuffer";
    let transport: WebSocketTransport | undefined;
    let failure: string | undefined;
    socket.onopen = () => {
      transport = new WebSocketTransport(new StandardSocketDriver(socket), {
        remoteAddress: remoteOf(parsed),
        localAddress: "unknown",
        highWaterMark: options.highWaterMark,
        maxMessageSize: options.maxMessageSize,
        socketSendLimit: POLLED_SOCKET_SEND_LIMIT,
      }, release);
      resolve(transport);
    };
    socket.onmessage = (event) => transport?.onMessage(event.data);
    socket.onerror = (event) => {
      failure = (event as ErrorEvent).message || "WebSocket error";
    };
    socket.onclose = (event) => {
      if (!transport) {
        release();
        const detail = failure ?? `closed with code ${event.code}`;
        const status = /status code:? (\d{3})\b/i.exec(detail);
        reject(new WebSocketConnectError(url, detail, status ? Number(status[1]) : undefined));
        return;
      }
      const error = failure ? new Error(`WebSocket to ${url} failed: ${failure}`) : undefined;
      transport.onClose(event.code, event.reason, event.wasClean && !failure, error);
    };
  });
}
