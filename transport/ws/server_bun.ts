/**
 * The WebSocket server on Bun: `Bun.serve` with its own `websocket` handlers
 * (`open` / `message` / `drain` / `close`).
 *
 * What Bun's `ServerWebSocket` does under backpressure (checked on Bun 1.4.4):
 * - `send()` returns the bytes written when the kernel took the whole message, `-1` when it queued
 *   (part of) it in its own buffer, and `0` when it DROPPED it: that happens once
 *   `getBufferedAmount()` is above `backpressureLimit` when sending (and after close). So messages
 *   go out only while the buffer is under {@linkcode SOCKET_SEND_LIMIT} (far below the limit set
 *   here), a dropped one is put back in front of the queue, and `drain` resumes sending.
 * - `pause()` / `resume()` stop and restart reading from the TCP socket, so `pause()` pushes back
 *   on the peer for real.
 * - `maxPayloadLength` refuses a bigger inbound message itself: the peer sees close 1009 ("Received
 *   too big message") while our `close` handler gets 1006 with that reason.
 *
 * Bun's types are declared locally (no `@types/bun`), so `deno check` stays clean.
 *
 * @module
 */

import type { Transport, TransportListener } from "../../protocol/transport.ts";
import { formatHostPort } from "../../util/address.ts";
import { bunApi, type BunServerWebSocket } from "../bun/types.ts";
import {
  CloseCode,
  DEFAULT_MAX_MESSAGE_SIZE,
  MESSAGE_SIZE,
  screenUpgrade,
  type SendResult,
  type SocketDriver,
  WebSocketCloseError,
  type WebSocketListenOptions,
  WebSocketTransport,
} from "./transport.ts";
import { MESSAGE_LIMIT_HEADER, messageSizeFor } from "./message_size.ts";

/** Per-connection state kept in `ws.data`. */
interface ConnectionData {
  request: Request;
  remoteAddress: string;
  transport?: WebSocketTransport;
}

/** A Bun server WebSocket carrying its connection state in `data`. */
type ServerWebSocket = BunServerWebSocket<ConnectionData>;

/** `Bun.serve`. */
function bun() {
  return bunApi("the Bun WebSocket server");
}

/** Bun's `readyState` for an open socket. */
const OPEN = 1;
/** Bun's buffer size at which `send()` starts dropping. Well above what we hand it. */
const DEFAULT_BACKPRESSURE_LIMIT = 1024 * 1024;

/** Test and tuning knobs beyond {@linkcode WebSocketListenOptions}. */
export interface BunWebSocketTuning {
  /** Bun's `backpressureLimit` (default 1 MiB); tests make it tiny to force `-1` and `0`. */
  backpressureLimit?: number;
  /** Counts what `send()` returned, by kind (tests). */
  sendResults?: { sent: number; queued: number; dropped: number };
}

/** Drives one Bun `ServerWebSocket`. */
class BunServerDriver implements SocketDriver {
  #ws: ServerWebSocket;
  #results: BunWebSocketTuning["sendResults"];

  constructor(ws: ServerWebSocket, results: BunWebSocketTuning["sendResults"]) {
    this.#ws = ws;
    this.#results = results;
  }

  buffered(): number {
    return this.#ws.readyState === OPEN ? this.#ws.getBufferedAmount() : 0;
  }

  send(message: Uint8Array): SendResult {
    if (this.#ws.readyState !== OPEN) return "closed";
    const result = this.#ws.send(message);
    if (result === 0) {
      if (this.#results) this.#results.dropped++;
      return this.#ws.readyState === OPEN ? "dropped" : "closed";
    }
    if (this.#results) this.#results[result < 0 ? "queued" : "sent"]++;
    return "sent";
  }

  close(code: number, reason: string): void {
    if (this.#ws.readyState === OPEN) this.#ws.close(code, reason);
  }

  terminate(): void {
    this.#ws.terminate();
  }

  pause(): void {
    if (this.#ws.readyState === OPEN) this.#ws.pause();
  }

  resume(): void {
    if (this.#ws.readyState === OPEN) this.#ws.resume();
  }
}

/** Listens with `Bun.serve`; see {@linkcode listenWebSocket} in ws.ts. */
export function listenBunWebSocket(
  options: WebSocketListenOptions,
  onTransport: (transport: Transport, request: Request) => void,
  tuning: BunWebSocketTuning = {},
): Promise<TransportListener> {
  const maxMessageSize = options.maxMessageSize ?? DEFAULT_MAX_MESSAGE_SIZE;
  let closed = false;
  let localAddress = "unknown";
  const server = bun().serve<ConnectionData>({
    hostname: options.hostname,
    port: options.port,
    tls: options.tls ? { cert: options.tls.cert, key: options.tls.key } : undefined,
    async fetch(request, server) {
      const ip = server.requestIP(request);
      const remoteAddress = formatHostPort(ip?.address, ip?.port);
      const refusal = await screenUpgrade(request, remoteAddress, options);
      if (refusal) return refusal;
      if (closed) return new Response("listener closed\n", { status: 503 });
      // Messages of 64 KiB: Bun's server took a fifth more CPU per GiB to receive them at 256 KiB.
      const wanted = Math.min(maxMessageSize, MESSAGE_SIZE);
      const headers = { [MESSAGE_LIMIT_HEADER]: String(wanted) };
      if (server.upgrade(request, { headers, data: { request, remoteAddress } })) return undefined;
      return new Response("WebSocket upgrade failed\n", { status: 400 });
    },
    error: () => new Response("internal error\n", { status: 500 }),
    websocket: {
      maxPayloadLength: maxMessageSize,
      backpressureLimit: tuning.backpressureLimit ?? DEFAULT_BACKPRESSURE_LIMIT,
      closeOnBackpressureLimit: false,
      open(ws) {
        ws.binaryType = "uint8array";
        const transport = new WebSocketTransport(new BunServerDriver(ws, tuning.sendResults), {
          remoteAddress: ws.data.remoteAddress,
          localAddress,
          highWaterMark: options.highWaterMark,
          maxMessageSize,
          messageSize: messageSizeFor(ws.data.request.headers.get(MESSAGE_LIMIT_HEADER)),
        });
        ws.data.transport = transport;
        try {
          onTransport(transport, ws.data.request);
        } catch {
          transport.close();
        }
      },
      message: (ws, message) => ws.data.transport?.onMessage(message),
      drain: (ws) => ws.data.transport?.onWritable(),
      close(ws, code, reason) {
        const transport = ws.data.transport;
        if (!transport) return;
        if (code === CloseCode.Abnormal && /too big/i.test(reason)) {
          // Bun refused an inbound message over maxPayloadLength (the peer got 1009).
          transport.onClose(
            code,
            reason,
            false,
            new WebSocketCloseError(
              CloseCode.MessageTooBig,
              "",
              `peer sent a message above maxMessageSize ${maxMessageSize}`,
            ),
          );
          return;
        }
        // Bun reports a lost connection as 1006 and every close frame with its code.
        transport.onClose(code, reason, code !== CloseCode.Abnormal);
      },
    },
  });
  localAddress = formatHostPort(server.hostname, server.port);
  return Promise.resolve({
    hostname: server.hostname,
    port: server.port,
    close() {
      if (!closed) {
        closed = true;
        // false: established transports stay open, as the contract says. Bun closes the socket
        // at once, so the port is free when this returns.
        void server.stop(false);
      }
      return Promise.resolve();
    },
  });
}
