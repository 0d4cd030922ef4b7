/**
 * The WebSocket server on Deno: `Deno.serve` with `Deno.upgradeWebSocket`.
 *
 * Deno's server-side `WebSocket` has no drain event: its `bufferedAmount` counts bytes whose write
 * has not completed (it grows while the peer does not read), so the transport polls it on a short
 * timer, only while it waits for room. It cannot stop reading either: `pause()` holds messages in
 * memory. Any close code may be sent from here (1003, 1009, 1011 reach the peer as such).
 *
 * @module
 */

import type { Transport, TransportListener } from "../protocol/transport.ts";
import { formatHostPort } from "../util/address.ts";
import { StandardSocketDriver } from "./ws_standard_driver.ts";
import {
  POLLED_SOCKET_SEND_LIMIT,
  screenUpgrade,
  type WebSocketListenOptions,
  WebSocketTransport,
} from "./ws_transport.ts";

/** Listens with `Deno.serve`; see {@linkcode listenWebSocket} in ws.ts. */
export function listenDenoWebSocket(
  options: WebSocketListenOptions,
  onTransport: (transport: Transport, request: Request) => void,
): Promise<TransportListener> {
  let closed = false;
  let localAddress = "unknown";
  const handler = async (request: Request, info: Deno.ServeHandlerInfo<Deno.NetAddr>) => {
    const remoteAddress = formatHostPort(info.remoteAddr.hostname, info.remoteAddr.port);
    const refusal = await screenUpgrade(request, remoteAddress, options);
    if (refusal) return refusal;
    if (closed) return new Response("listener closed\n", { status: 503 });
    // Deno closes the request once the upgrade response is sent (reading its headers in onopen
    // throws "Request closed"), so onTransport gets a copy taken now.
    const upgradeRequest = new Request(request.url, {
      method: request.method,
      headers: request.headers,
    });
    const { socket, response } = Deno.upgradeWebSocket(request);
    socket.binaryType = "arraybuffer";
    let transport: WebSocketTransport | undefined;
    socket.onopen = () => {
      transport = new WebSocketTransport(new StandardSocketDriver(socket), {
        remoteAddress,
        localAddress,
        highWaterMark: options.highWaterMark,
        maxMessageSize: options.maxMessageSize,
        socketSendLimit: POLLED_SOCKET_SEND_LIMIT,
      });
      try {
        onTransport(transport, upgradeRequest);
      } catch {
        transport.close();
      }
    };
    socket.onmessage = (event) => transport?.onMessage(event.data);
    let failure: Error | undefined;
    socket.onerror = (event) => {
      failure = new Error((event as ErrorEvent).message || "WebSocket error");
    };
    socket.onclose = (event) => {
      transport?.onClose(event.code, event.reason, event.wasClean && !failure, failure);
    };
    return response;
  };
  return new Promise((resolve, reject) => {
    let server: Deno.HttpServer<Deno.NetAddr>;
    const serveOptions = {
      hostname: options.hostname,
      port: options.port,
      onListen: (addr: Deno.NetAddr) => {
        localAddress = formatHostPort(addr.hostname, addr.port);
        resolve({
          hostname: addr.hostname,
          port: addr.port,
          close() {
            if (closed) return;
            closed = true;
            // Stops accepting; upgraded sockets are no longer the HTTP server's and stay open.
            void server.shutdown().catch(() => {});
          },
        });
      },
      onError: () => new Response("internal error\n", { status: 500 }),
    };
    try {
      server = options.tls
        ? Deno.serve({ ...serveOptions, cert: options.tls.cert, key: options.tls.key }, handler)
        : Deno.serve(serveOptions, handler);
    } catch (error) {
      reject(error);
    }
  });
}
