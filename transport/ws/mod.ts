/**
 * WebSocket over the running runtime's TCP adapter: our own RFC 6455 server (`server.ts`) and
 * client (`client.ts`) on Deno and Bun alike, so both keep the same deadlines, limits and close
 * codes. The one place the WebSocket endpoints are chosen; what they share is `transport.ts`.
 *
 * @module
 */

import type { Transport, TransportListener } from "../../protocol/transport.ts";
import { currentRuntime } from "../../util/host/runtime.ts";
import { connectRawWebSocket } from "./client.ts";
import { listenRawWebSocket } from "./server.ts";
import type { WebSocketConnectOptions, WebSocketListenOptions } from "./transport.ts";

export { CloseCode, WebSocketCloseError } from "./transport.ts";
export { WebSocketConnectError } from "./connect_error.ts";
export type { WebSocketConnectOptions, WebSocketListenOptions } from "./transport.ts";

/**
 * Serves WebSocket upgrades on `options.path` with our own server over the runtime's TCP (or TLS)
 * listener and hands each accepted connection to `onTransport` once open, with its upgrade
 * request. A callback that throws gets that transport closed. Closing the listener stops
 * accepting; open transports stay.
 *
 * Not `Bun.serve` on Bun: with it, a 1 GiB download over WebSocket ran 20–28 % slower and cost the
 * daemon 16–25 % more CPU (its unmasking loop was a fifth of the daemon's samples), and an
 * unfinished request head was dropped after Bun's own 10–12 s rather than `requestTimeoutMs`.
 */
export function listenWebSocket(
  options: WebSocketListenOptions,
  onTransport: (transport: Transport, request: Request) => void,
): Promise<TransportListener> {
  switch (currentRuntime()) {
    case "deno":
    case "bun":
      return listenRawWebSocket(options, onTransport);
    default:
      throw new Error("the WebSocket server runs on Deno or Bun");
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
