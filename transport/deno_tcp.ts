/**
 * {@linkcode Transport} over Deno's native TCP (`Deno.connect` / `Deno.listen`).
 *
 * @module
 */

import type { Transport, TransportHandlers, TransportListener } from "../protocol/transport.ts";
import { formatAddress } from "./_address.ts";
import { EventSink, toError } from "./_sink.ts";
import { DEFAULT_HIGH_WATER_MARK, WriteQueue } from "./_write_queue.ts";

/** Size of the read buffer. */
export const READ_SIZE = 64 * 1024;

/** Reads shorter than this are copied out of the read buffer; longer ones are handed over. */
const SMALL_READ = 8 * 1024;

/** Tuning for Deno TCP transports. */
export interface DenoTcpOptions {
  /** Queued outgoing bytes at which `write` returns false. Default 1 MiB. */
  highWaterMark?: number;
  /** Disables Nagle's algorithm; yamux frames are small and latency-bound. Default true. */
  noDelay?: boolean;
}

/** Where to connect or listen. */
export interface TcpAddress {
  /** Host name or IP literal. */
  hostname: string;
  /** Port; 0 asks the OS for a free one when listening. */
  port: number;
}

function netAddress(addr: Deno.Addr): string {
  return addr.transport === "tcp" || addr.transport === "udp"
    ? formatAddress(addr.hostname, addr.port)
    : addr.transport;
}

/** A `Deno.TcpConn` adapted to the {@linkcode Transport} contract. */
export class DenoTcpTransport implements Transport {
  /** The peer's `host:port`. Captured up front: the conn's fields are unusable after close. */
  readonly remoteAddress: string;
  /** The local `host:port`. */
  readonly localAddress: string;

  #conn: Deno.TcpConn;
  #sink: EventSink;
  #queue = new WriteQueue();
  #highWaterMark: number;
  // Bytes passed to conn.write whose completion has not been reported yet.
  #inFlight = 0;
  #writing = false;
  #needDrain = false;
  #ending = false;
  #writeClosed = false;
  #started = false;
  #wake: (() => void) | undefined;
  #readBuffer = new Uint8Array(READ_SIZE);

  /** Wraps an established connection. Reading starts at {@linkcode start}. */
  constructor(conn: Deno.TcpConn, options: DenoTcpOptions = {}) {
    this.#conn = conn;
    this.#highWaterMark = options.highWaterMark ?? DEFAULT_HIGH_WATER_MARK;
    this.remoteAddress = netAddress(conn.remoteAddr);
    this.localAddress = netAddress(conn.localAddr);
    this.#sink = new EventSink({
      endDelivered: () => this.#maybeFinish(),
      handlerFailed: (error) => this.#fail(error),
    });
    try {
      conn.setNoDelay(options.noDelay ?? true);
    } catch {
      // Only fails on a conn that is already gone; the read loop reports that.
    }
  }

  /** Bytes accepted by `write` and not yet taken by the kernel. */
  get bufferedAmount(): number {
    return this.#queue.bytes + this.#inFlight;
  }

  start(handlers: TransportHandlers): void {
    this.#sink.start(handlers);
    if (this.#started) return;
    this.#started = true;
    // The loop catches everything itself, so the floating promise never rejects.
    void this.#readLoop();
  }

  write(chunk: Uint8Array): boolean {
    // Dropped writes answer false without a later drain: there is nothing left to wait for.
    if (this.#sink.closed || this.#ending) return false;
    if (chunk.length > 0) {
      this.#queue.push(chunk);
      if (!this.#writing) void this.#pump();
    }
    if (this.bufferedAmount < this.#highWaterMark) return true;
    this.#needDrain = true;
    return false;
  }

  pause(): void {
    this.#sink.pause();
  }

  resume(): void {
    this.#sink.resume();
    this.#wakeReader();
  }

  end(): void {
    if (this.#ending || this.#sink.closed) return;
    this.#ending = true;
    // With a pump running, it shuts the write side down once the queue is empty.
    if (!this.#writing) void this.#shutdownWrite();
  }

  close(): void {
    this.#teardown(undefined);
  }

  /**
   * Hands out what the last read put in the read buffer. Receivers keep views, so the buffer can
   * never be reused once handed out: a large read is handed over whole (zero-copy) and a new buffer
   * takes its place, while a small read (a request, an ACK) is copied out so the buffer stays. A
   * fresh zero-filled 64 KiB buffer per small read cost about 15 µs per round trip.
   */
  #takeRead(n: number): Uint8Array {
    if (n < SMALL_READ) return this.#readBuffer.slice(0, n);
    const chunk = this.#readBuffer.subarray(0, n);
    this.#readBuffer = new Uint8Array(READ_SIZE);
    return chunk;
  }

  async #readLoop(): Promise<void> {
    try {
      while (!this.#sink.closed) {
        if (this.#sink.paused) {
          // Stop issuing reads so the kernel buffer fills and TCP pushes back on the peer.
          await new Promise<void>((resolve) => this.#wake = resolve);
          continue;
        }
        // Fresh memory every read: the handler may keep views of earlier chunks.
        const n = await this.#conn.read(this.#readBuffer);
        if (n === null) {
          this.#sink.end();
          return;
        }
        this.#sink.data(this.#takeRead(n));
      }
    } catch (error) {
      this.#fail(error);
    }
  }

  async #pump(): Promise<void> {
    this.#writing = true;
    try {
      while (!this.#queue.empty && !this.#sink.closed) {
        // Chunks queued during the previous syscall go out joined in one.
        let pending = this.#queue.take();
        this.#inFlight = pending.length;
        while (pending.length > 0) {
          // conn.write may take only part of the buffer; loop until the kernel has all of it.
          const n = await this.#conn.write(pending);
          if (this.#sink.closed) return;
          this.#inFlight -= n;
          pending = pending.subarray(n);
          if (this.#needDrain && this.bufferedAmount < this.#highWaterMark) {
            this.#needDrain = false;
            this.#sink.drain();
          }
        }
      }
    } catch (error) {
      this.#fail(error);
      return;
    } finally {
      this.#writing = false;
    }
    if (this.#ending && !this.#sink.closed) await this.#shutdownWrite();
  }

  async #shutdownWrite(): Promise<void> {
    try {
      await this.#conn.closeWrite();
    } catch (error) {
      this.#fail(error);
      return;
    }
    this.#writeClosed = true;
    this.#maybeFinish();
  }

  // Both directions finished cleanly: release the conn and report a clean close, as TCP does.
  #maybeFinish(): void {
    if (this.#writeClosed && this.#sink.endDelivered) this.#teardown(undefined);
  }

  #fail(error: unknown): void {
    // Errors after close (BadResource, Interrupted, BrokenPipe...) are its echo, not news.
    if (this.#sink.closed) return;
    this.#teardown(toError(error));
  }

  #teardown(error: Error | undefined): void {
    if (this.#sink.closed) return;
    this.#queue.clear();
    this.#inFlight = 0;
    this.#sink.close(error);
    try {
      this.#conn.close();
    } catch {
      // Already closed by the runtime.
    }
    this.#wakeReader();
  }

  #wakeReader(): void {
    const wake = this.#wake;
    this.#wake = undefined;
    wake?.();
  }
}

/** Connects to `address` over Deno TCP. */
export async function connectDenoTcp(
  address: TcpAddress,
  options: DenoTcpOptions = {},
): Promise<Transport> {
  const conn = await Deno.connect({
    hostname: address.hostname,
    port: address.port,
    transport: "tcp",
  });
  return new DenoTcpTransport(conn, options);
}

/**
 * Listens on `address` and hands each accepted connection to `onTransport` as a Transport. A
 * callback that throws gets that transport closed rather than leaking it.
 */
export function listenDenoTcp(
  address: TcpAddress,
  onTransport: (transport: Transport) => void,
  options: DenoTcpOptions = {},
): Promise<TransportListener> {
  const listener = Deno.listen({
    hostname: address.hostname,
    port: address.port,
    transport: "tcp",
  });
  const bound = listener.addr as Deno.NetAddr;
  let closed = false;
  const acceptLoop = async () => {
    while (!closed) {
      let conn: Deno.TcpConn;
      try {
        conn = await listener.accept();
      } catch (error) {
        if (closed || error instanceof Deno.errors.BadResource) return;
        // Transient accept failures (EMFILE, aborted handshakes) must not stop the listener.
        await new Promise((resolve) => setTimeout(resolve, 50));
        continue;
      }
      const transport = new DenoTcpTransport(conn, options);
      try {
        onTransport(transport);
      } catch {
        transport.close();
      }
    }
  };
  void acceptLoop();
  return Promise.resolve({
    hostname: bound.hostname,
    port: bound.port,
    close() {
      if (closed) return;
      closed = true;
      try {
        listener.close();
      } catch {
        // Already closed.
      }
    },
  });
}
