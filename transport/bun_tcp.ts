/**
 * {@linkcode Transport} over Bun's native TCP (`Bun.connect` / `Bun.listen`).
 *
 * Bun's socket API differs from Node's in ways this adapter absorbs:
 * - `socket.write()` is unbuffered: it returns how many bytes the kernel took (possibly fewer, 0,
 *   or -1 once closed) and keeps nothing, so the rest waits here until the `drain` callback.
 * - `socket.end()` closes the whole socket even with `allowHalfOpen` (the `close` callback runs
 *   synchronously inside it); the half-close is `socket.shutdown()`.
 * - The buffer passed to `data` is freshly allocated per call (each has its own ArrayBuffer at
 *   offset 0, and earlier buffers keep their bytes; checked on Bun 1.4.4 by retaining every chunk
 *   of a multi-MiB transfer and comparing them afterwards, see bun_tcp_test.ts), so it is handed
 *   on without a copy.
 *
 * Bun's types are declared locally (no `@types/bun`), so `deno check` stays clean.
 *
 * @module
 */

import type { Transport, TransportHandlers, TransportListener } from "../protocol/transport.ts";
import { formatAddress } from "./_address.ts";
import { EventSink, toError } from "./_sink.ts";
import { DEFAULT_HIGH_WATER_MARK, WriteQueue } from "./_write_queue.ts";
import type { TcpAddress } from "./deno_tcp.ts";

/** The part of Bun's `Socket` this adapter uses. */
interface BunSocket {
  data: BunTcpTransport | undefined;
  readonly readyState: number;
  readonly remoteAddress: string;
  readonly remotePort: number;
  readonly localAddress: string;
  readonly localPort: number;
  write(data: Uint8Array): number;
  shutdown(halfClose?: boolean): void;
  end(): void;
  terminate(): void;
  pause(): void;
  resume(): void;
  setNoDelay(noDelay?: boolean): boolean;
}

/** Bun's socket callbacks. */
interface BunSocketHandler {
  binaryType?: "uint8array";
  open?(socket: BunSocket): void;
  data?(socket: BunSocket, data: Uint8Array): void;
  drain?(socket: BunSocket): void;
  end?(socket: BunSocket): void;
  close?(socket: BunSocket, error?: Error): void;
  error?(socket: BunSocket, error: Error): void;
  connectError?(socket: BunSocket, error: Error): void;
}

interface BunListener {
  readonly hostname: string;
  readonly port: number;
  stop(closeActiveConnections?: boolean): void;
}

/** The part of the `Bun` global this adapter uses. */
interface BunApi {
  connect(options: {
    hostname: string;
    port: number;
    allowHalfOpen: boolean;
    socket: BunSocketHandler;
  }): Promise<BunSocket>;
  listen(options: {
    hostname: string;
    port: number;
    allowHalfOpen: boolean;
    socket: BunSocketHandler;
  }): BunListener;
}

function bun(): BunApi {
  const api = (globalThis as unknown as { Bun?: BunApi }).Bun;
  if (!api) throw new Error("the Bun TCP transport needs the Bun runtime");
  return api;
}

/** Tuning for Bun TCP transports. */
export interface BunTcpOptions {
  /** Queued outgoing bytes at which `write` returns false. Default 1 MiB. */
  highWaterMark?: number;
  /** Disables Nagle's algorithm; yamux frames are small and latency-bound. Default true. */
  noDelay?: boolean;
}

/** A Bun TCP socket adapted to the {@linkcode Transport} contract. */
export class BunTcpTransport implements Transport {
  /** The peer's `host:port`, captured while the socket is open. */
  readonly remoteAddress: string;
  /** The local `host:port`. */
  readonly localAddress: string;

  #socket: BunSocket;
  #sink: EventSink;
  #queue = new WriteQueue();
  // Unwritten tail of a batch the kernel took only part of.
  #pending: Uint8Array | undefined;
  #highWaterMark: number;
  #flushScheduled = false;
  // The kernel refused bytes; only the drain callback may write again.
  #blocked = false;
  #needDrain = false;
  #ending = false;
  #writeClosed = false;
  #peerEnded = false;
  // Bun already closed the socket cleanly; report close once the held end is delivered.
  #closeAfterEnd = false;

  /** Wraps an open socket; called from the `open` callback. */
  constructor(socket: BunSocket, options: BunTcpOptions = {}) {
    this.#socket = socket;
    this.#highWaterMark = options.highWaterMark ?? DEFAULT_HIGH_WATER_MARK;
    this.remoteAddress = formatAddress(socket.remoteAddress, socket.remotePort);
    this.localAddress = formatAddress(socket.localAddress, socket.localPort);
    this.#sink = new EventSink({
      endDelivered: () => this.#maybeFinish(),
      handlerFailed: (error) => this.#teardown(error),
    });
    socket.setNoDelay(options.noDelay ?? true);
    // Bun reads as soon as the socket opens; hold the kernel back until someone listens.
    socket.pause();
  }

  /** Bytes accepted by `write` and not yet taken by the kernel. */
  get bufferedAmount(): number {
    return this.#queue.bytes + (this.#pending?.length ?? 0);
  }

  start(handlers: TransportHandlers): void {
    this.#sink.start(handlers);
    if (!this.#sink.paused && !this.#sink.closed) this.#socket.resume();
  }

  write(chunk: Uint8Array): boolean {
    // Dropped writes answer false without a later drain: there is nothing left to wait for.
    if (this.#sink.closed || this.#ending) return false;
    if (chunk.length > 0) {
      this.#queue.push(chunk);
      this.#scheduleFlush();
    }
    if (this.bufferedAmount < this.#highWaterMark) return true;
    this.#needDrain = true;
    return false;
  }

  pause(): void {
    this.#sink.pause();
    if (!this.#sink.closed) this.#socket.pause();
  }

  resume(): void {
    if (!this.#sink.closed) this.#socket.resume();
    this.#sink.resume();
  }

  end(): void {
    if (this.#ending || this.#sink.closed) return;
    this.#ending = true;
    this.#scheduleFlush();
  }

  close(): void {
    this.#teardown(undefined);
  }

  /** @internal Bun `data` callback. */
  onData(chunk: Uint8Array): void {
    this.#sink.data(chunk);
  }

  /** @internal Bun `end` callback: the peer sent FIN. */
  onEnd(): void {
    this.#peerEnded = true;
    this.#sink.end();
  }

  /** @internal Bun `drain` callback: the kernel has room again. */
  onDrain(): void {
    this.#blocked = false;
    this.#flush();
  }

  /** @internal Bun `close` / `error` callbacks. */
  onClose(error?: Error): void {
    if (this.#sink.closed) return;
    if (!error) {
      // Once our write side is shut down, Bun reports the peer's FIN as `close` alone, without
      // `end`. A clean close is therefore also the end of data: report end first, then close
      // after the handler has seen it (it may be paused).
      if (!this.#peerEnded) this.onEnd();
      if (!this.#sink.endDelivered) {
        this.#closeAfterEnd = true;
        return;
      }
    }
    this.#queue.clear();
    this.#pending = undefined;
    this.#sink.close(error);
  }

  // Writes made in the same tick (a yamux header and its body) go out in one syscall.
  #scheduleFlush(): void {
    if (this.#flushScheduled || this.#blocked) return;
    this.#flushScheduled = true;
    queueMicrotask(() => {
      this.#flushScheduled = false;
      if (!this.#blocked) this.#flush();
    });
  }

  #flush(): void {
    while (!this.#sink.closed && (this.#pending || !this.#queue.empty)) {
      const batch = this.#pending ?? this.#queue.take();
      const written = this.#socket.write(batch);
      if (written < 0) {
        // Bun says the socket is closed or shutting down: these bytes can no longer be sent.
        this.#teardown(new Error("write on a closed Bun socket"));
        return;
      }
      if (written < batch.length) {
        this.#pending = batch.subarray(written);
        this.#blocked = true;
        break;
      }
      this.#pending = undefined;
    }
    if (this.#sink.closed) return;
    if (this.#needDrain && this.bufferedAmount < this.#highWaterMark) {
      this.#needDrain = false;
      this.#sink.drain();
    }
    if (this.#ending && !this.#writeClosed && this.bufferedAmount === 0) {
      this.#writeClosed = true;
      this.#socket.shutdown();
      this.#maybeFinish();
    }
  }

  // Both directions finished cleanly: release the socket and report a clean close, as TCP does.
  #maybeFinish(): void {
    if (this.#closeAfterEnd && this.#sink.endDelivered) {
      this.#queue.clear();
      this.#pending = undefined;
      this.#sink.close();
      return;
    }
    if (this.#writeClosed && this.#sink.endDelivered) this.#teardown(undefined);
  }

  #teardown(error: Error | undefined): void {
    if (this.#sink.closed) return;
    this.#queue.clear();
    this.#pending = undefined;
    this.#sink.close(error);
    // end() closes the fd at once (FIN); after a failure, reset so the peer learns it too.
    if (error) this.#socket.terminate();
    else this.#socket.end();
  }
}

function socketHandler(
  options: BunTcpOptions,
  onOpen: (transport: BunTcpTransport) => void,
  onConnectError?: (error: Error) => void,
): BunSocketHandler {
  return {
    binaryType: "uint8array",
    open(socket) {
      const transport = new BunTcpTransport(socket, options);
      socket.data = transport;
      onOpen(transport);
    },
    data: (socket, chunk) => socket.data?.onData(chunk),
    drain: (socket) => socket.data?.onDrain(),
    end: (socket) => socket.data?.onEnd(),
    close: (socket, error) => socket.data?.onClose(error),
    error: (socket, error) => socket.data?.onClose(toError(error)),
    connectError: (_socket, error) => onConnectError?.(toError(error)),
  };
}

/** Connects to `address` over Bun TCP. */
export async function connectBunTcp(
  address: TcpAddress,
  options: BunTcpOptions = {},
): Promise<Transport> {
  let opened: BunTcpTransport | undefined;
  // connectError keeps Bun from also reporting the rejection as unhandled; the await reports it.
  const socket = await bun().connect({
    hostname: address.hostname,
    port: address.port,
    allowHalfOpen: true,
    socket: socketHandler(options, (transport) => opened = transport, () => {}),
  });
  return opened ?? socket.data ?? new BunTcpTransport(socket, options);
}

/**
 * Listens on `address` and hands each accepted connection to `onTransport` as a Transport. A
 * callback that throws gets that transport closed rather than leaking it.
 */
export function listenBunTcp(
  address: TcpAddress,
  onTransport: (transport: Transport) => void,
  options: BunTcpOptions = {},
): Promise<TransportListener> {
  const listener = bun().listen({
    hostname: address.hostname,
    port: address.port,
    allowHalfOpen: true,
    socket: socketHandler(options, (transport) => {
      try {
        onTransport(transport);
      } catch {
        transport.close();
      }
    }),
  });
  let closed = false;
  return Promise.resolve({
    hostname: listener.hostname,
    port: listener.port,
    close() {
      if (closed) return;
      closed = true;
      // false: established transports stay open, as the contract says.
      listener.stop(false);
    },
  });
}
