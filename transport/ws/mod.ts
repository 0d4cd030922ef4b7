/**
 * WebSocket through the running runtime: the server is our own RFC 6455 server on Deno
 * (`server.ts`) or `Bun.serve` (`server_bun.ts`), the client our own client over the
 * runtime's TCP adapter everywhere (`client.ts`). The one place that picks a WebSocket
 * adapter; what they share is `transport.ts`.
 *
 * @module
 */

import type { Transport, TransportListener } from "../../protocol/transport.ts";
import { currentRuntime } from "../../util/runtime.ts";
import { connectRawWebSocket } from "./client.ts";
import { listenBunWebSocket } from "./server_bun.ts";
import { listenRawWebSocket } from "./server.ts";
import type { WebSocketConnectOptions, WebSocketListenOptions } from "./transport.ts";

export { CloseCode, WebSocketCloseError } from "./transport.ts";
export { WebSocketConnectError } from "./connect_error.ts";
export type { WebSocketConnectOptions, WebSocketListenOptions } from "./transport.ts";

/**
 * Serves WebSocket upgrades on `options.path` with the runtime's HTTP server and hands each
 * accepted connection to `onTransport` once open, with its upgrade request. A callback that throws
 * gets that transport closed. Closing the listener stops accepting; open transports stay.
 */
export function listenWebSocket(
  options: WebSocketListenOptions,
  onTransport: (transport: Transport, request: Request) => void,
): Promise<TransportListener> {
  switch (currentRuntime()) {
    case "deno":
      return listenRawWebSocket(options, onTransport);
    case "bun":
      return listenBunWebSocket(options, onTransport);
    default:
      throw new Error("the WebSocket server needs Deno (Deno.serve) or Bun (Bun.serve)");
  }
}

/**
 * Opens a WebSocket to `url` (`ws://` or `wss://`). Rejects with a
 * {@linkcode WebSocketConnectError} (carrying the HTTP status when the server refused the upgrade).
 *
 * This is our own RFC 6455 client over `connectTcp` / `connectTls` (`ws/client.ts`) on every
 * runtime. Deno's global `WebSocket` turns TCP_NODELAY off on its socket, with no API to turn it
 * back on, which cost each small yamux exchange a Nagle / delayed-ACK stall (~40 ms). Bun's global
 * `WebSocket` reports no drain, so a sender polled its `bufferedAmount`: in tunnel-bench our client
 * took Bun's WebSocket rows from 508 to 676 MB/s (CPU 3.00 to 2.24 s/GiB) and from 3184 to 4018
 * connections per second.
 */
export function connectWebSocket(
  url: string,
  options: WebSocketConnectOptions = {},
): Promise<Transport> {
  return connectRawWebSocket(url, options);
}
