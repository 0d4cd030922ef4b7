/**
 * {@linkcode Transport} over `node:net`: the fallback for runtimes without a native adapter, and a
 * second implementation under Deno and Bun (their node:net layers) to test against.
 *
 * @module
 */

import * as net from "node:net";
import type { Transport, TransportHandlers, TransportListener } from "../protocol/transport.ts";
import { formatAddress } from "./_address.ts";
import { EventSink, toError } from "./_sink.ts";
import { DEFAULT_HIGH_WATER_MARK } from "./_write_queue.ts";
import type { TcpAddress } from "./deno_tcp.ts";

/** Tuning for node:net transports. */
export interface NodeTcpOptions {
  /** Queued outgoing bytes at which `write` returns false. Default 1 MiB. */
  highWaterMark?: number;
  /** Disables Nagle's algorithm; yamux frames are small and latency-bound. Default true. */
  noDelay?: boolean;
}

/** A connected `net.Socket` adapted to the {@linkcode Transport} contract. */
export class NodeTcpTransport implements Transport {
  /** The peer's `host:port`, captured while connected (node clears it after close). */
  readonly remoteAddress: string;
  /** The local `host:port`. */
  readonly localAddress: string;

  #socket: net.Socket;
  #sink: EventSink;
  #highWaterMark: number;
  #needDrain = false;
  #ending = false;
  #peerEnded = false;
  #closeAfterEnd = false;

  /** Wraps a connected socket; it must have been made with `allowHalfOpen: true`. */
  constructor(socket: net.Socket, options: NodeTcpOptions = {}) {
    this.#socket = socket;
    this.#highWaterMark = options.highWaterMark ?? DEFAULT_HIGH_WATER_MARK;
    this.remoteAddress = formatAddress(socket.remoteAddress, socket.remotePort);
    this.localAddress = formatAddress(socket.localAddress, socket.localPort);
    this.#sink = new EventSink({
      endDelivered: () => {
        if (this.#closeAfterEnd) this.#sink.close();
      },
      handlerFailed: (error) => this.#teardown(error),
    });
    socket.setNoDelay(options.noDelay ?? true);
    // Node would start flowing with the data listener; wait for start() instead.
    socket.pause();
    socket.on("data", (chunk: Uint8Array) => this.#sink.data(chunk));
    socket.on("end", () => {
      this.#peerEnded = true;
      this.#sink.end();
    });
    socket.on("drain", () => {
      if (this.#needDrain && socket.writableLength < this.#highWaterMark) {
        this.#needDrain = false;
        this.#sink.drain();
      }
    });
    // An 'error' listener is mandatory: without one node throws it as an uncaught exception.
    socket.on("error", (error) => this.#teardown(toError(error)));
    socket.on("close", () => {
      // Node closes a half-open socket once both sides ended; if our handler has not seen the
      // end yet (it is paused), report close only after it has.
      if (this.#peerEnded && !this.#sink.endDelivered && !this.#sink.closed) {
        this.#closeAfterEnd = true;
        return;
      }
      this.#sink.close();
    });
  }

  /** Bytes accepted by `write` and not yet taken by the kernel. */
  get bufferedAmount(): number {
    return this.#sink.closed ? 0 : this.#socket.writableLength;
  }

  start(handlers: TransportHandlers): void {
    this.#sink.start(handlers);
    if (!this.#sink.paused && !this.#sink.closed) this.#socket.resume();
  }

  write(chunk: Uint8Array): boolean {
    // Dropped writes answer false without a later drain: there is nothing left to wait for.
    if (this.#sink.closed || this.#ending) return false;
    if (chunk.length > 0) this.#socket.write(chunk);
    if (this.#socket.writableLength < this.#highWaterMark) return true;
    // Node emits 'drain' when its buffer empties after any false write(), which is the case here
    // since our mark is above node's own.
    this.#needDrain = true;
    return false;
  }

  pause(): void {
    this.#sink.pause();
    this.#socket.pause();
  }

  resume(): void {
    this.#socket.resume();
    this.#sink.resume();
  }

  end(): void {
    if (this.#ending || this.#sink.closed) return;
    this.#ending = true;
    this.#socket.end();
  }

  close(): void {
    this.#teardown(undefined);
  }

  #teardown(error: Error | undefined): void {
    if (this.#sink.closed) return;
    this.#sink.close(error);
    this.#socket.destroy();
  }
}

/** Connects to `address` with node:net. */
export function connectNodeTcp(
  address: TcpAddress,
  options: NodeTcpOptions = {},
): Promise<Transport> {
  return new Promise((resolve, reject) => {
    const socket = net.connect({ host: address.hostname, port: address.port, allowHalfOpen: true });
    const onError = (error: Error) => {
      socket.destroy();
      reject(error);
    };
    socket.once("error", onError);
    socket.once("connect", () => {
      socket.off("error", onError);
      resolve(new NodeTcpTransport(socket, options));
    });
  });
}

/**
 * Listens on `address` and hands each accepted connection to `onTransport` as a Transport. A
 * callback that throws gets that transport closed rather than leaking it.
 */
export function listenNodeTcp(
  address: TcpAddress,
  onTransport: (transport: Transport) => void,
  options: NodeTcpOptions = {},
): Promise<TransportListener> {
  return new Promise((resolve, reject) => {
    const server = net.createServer({ allowHalfOpen: true }, (socket) => {
      const transport = new NodeTcpTransport(socket, options);
      try {
        onTransport(transport);
      } catch {
        transport.close();
      }
    });
    server.once("error", reject);
    server.listen(address.port, address.hostname, () => {
      server.off("error", reject);
      // Later server errors (accept failures) must not crash the process; sockets report their own.
      server.on("error", () => {});
      const bound = server.address() as net.AddressInfo;
      let closed = false;
      resolve({
        hostname: bound.address,
        port: bound.port,
        close() {
          if (closed) return;
          closed = true;
          server.close();
        },
      });
    });
  });
}
