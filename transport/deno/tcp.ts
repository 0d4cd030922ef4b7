/**
 * {@linkcode Transport} over Deno's native TCP (`Deno.connect` / `Deno.listen`) and TLS over TCP
 * (`Deno.startTls` / `Deno.listenTls`): a `Deno.TlsConn` is a `Deno.Conn` like a `Deno.TcpConn`,
 * so one adapter carries both.
 *
 * TLS notes, checked on Deno 2.9.6 (rustls):
 * - Half-close works as on TCP: `closeWrite()` on a `TlsConn` sends close_notify and shuts the
 *   socket's write side down; the peer reads end of data and can still write back, and we keep
 *   reading it (TLS 1.3 allows this, RFC 8446 §6.1).
 * - A `TlsConn` has no `setNoDelay`. The client sets it on the TCP socket before `Deno.startTls`
 *   (the option lives on the socket, so it survives the upgrade); accepted `Deno.listenTls`
 *   connections keep Nagle's algorithm on, and Deno offers no way to change that. Seen in
 *   practice: the first yamux round trip on a fresh connection stalls ~40 ms (the server's reply
 *   waits behind its unacknowledged session ticket for a delayed ACK); later ones did not.
 * - The handshake is lazy (it runs on first read or write), so certificate errors would surface as
 *   read errors of an already returned transport. Connect and accept therefore finish the
 *   handshake first, and connect reports its failure as a {@linkcode TlsHandshakeError}.
 * - `Deno.connectTls` has no server-name option (it verifies `hostname`), hence `Deno.connect` +
 *   `Deno.startTls`, whose `hostname` is the name to verify.
 *
 * @module
 */

import type { Transport, TransportHandlers, TransportListener } from "../../protocol/transport.ts";
import { formatHostPort } from "../../util/net/address.ts";
import { EventSink, toError } from "../io/event_sink.ts";
import { ChunkQueue, MAX_BATCH } from "../io/chunk_queue.ts";
import {
  handOver,
  type TcpAddress,
  type TcpTuning,
  TLS_HANDSHAKE_TIMEOUT_MS,
  type TlsConnectOptions,
  TlsHandshakeError,
  type TlsListenOptions,
} from "../io/tcp_options.ts";
import { WriteGate } from "../io/write_gate.ts";
import {
  bulkBuffers,
  offerFrontRoom,
  relayBuffers,
  releaseBytes,
} from "../../util/bytes/buffer_pool.ts";
import { allocUnsafe } from "../../util/bytes/alloc_unsafe.ts";

/**
 * Largest buffer of its own a connection reads into: it grows to it while its reads keep filling
 * it, and from then on reads go into pooled buffers ({@linkcode relayBuffers}, then
 * {@linkcode bulkBuffers} while full reads keep coming).
 */
export const READ_SIZE = 64 * 1024;

/** Reads shorter than this are copied out of the read buffer; longer ones are handed over. */
const SMALL_READ = 8 * 1024;

/** Reads into a bulk buffer shorter than this move to a relay buffer (see `#takeRead`). */
const SMALL_BULK_READ = 32 * 1024;

/**
 * Where a full-size read starts in its pooled buffer. The bytes in front stay free and are offered
 * (`offerFrontRoom`) to whoever frames the chunk whole: a session writes a yamux header (12 bytes)
 * there, and our WebSocket its frame header (up to 16) in front of that, and the read goes out as
 * it lies instead of being copied into a batch.
 */
export const READ_FRONT_ROOM = 32;

/**
 * A full-size read in a {@linkcode relayBuffers} buffer: with the front room, 64 KiB, so that the
 * read in a yamux frame is one WebSocket message (64 KiB).
 */
const POOLED_READ_SIZE = 64 * 1024 - READ_FRONT_ROOM;

/**
 * A read once full-size reads keep coming, in a {@linkcode bulkBuffers} buffer: with the front
 * room, 256 KiB, one yamux data frame (`maxDataFrameSize`). On Deno every read and write is an
 * operation of the runtime's, dearer than the bytes it moves: a quarter as many cut a bulk
 * transfer's CPU by a fifth.
 */
const BULK_READ_SIZE = 256 * 1024 - READ_FRONT_ROOM;

/** The most a read takes into a relay buffer, behind its front room. */
const RELAY_CAPACITY = relayBuffers.size - READ_FRONT_ROOM;

/** The most a read takes into a bulk buffer, behind its front room. */
const BULK_CAPACITY = bulkBuffers.size - READ_FRONT_ROOM;

/**
 * A new connection's read buffer. Most connections carry little (a request and a reply, or an idle
 * session's keepalive pings), and Deno keeps a pending read's whole buffer resident: 8 KiB here
 * cost 11 KiB of RSS per idle connection, 64 KiB cost 62 KiB. A read that fills the buffer makes
 * the next one twice as large, up to {@linkcode READ_SIZE}.
 */
const FIRST_READ_SIZE = 2 * 1024;

/**
 * A copy of `n` bytes of `buffer` from `start`, cut from a shared slab (`allocUnsafe`): a small
 * read is copied once per round trip, and a slab cut costs a quarter of `slice`, which gives every
 * copy an ArrayBuffer of its own.
 */
function copyOut(buffer: Uint8Array, start: number, n: number): Uint8Array {
  const out = allocUnsafe(n);
  out.set(buffer.subarray(start, start + n));
  return out;
}

function netAddress(addr: Deno.Addr): string {
  // Tested by shape, not `transport`: the TlsConn of Deno.startTls reports addresses without a
  // `transport` field (Deno 2.9.6).
  return "hostname" in addr ? formatHostPort(addr.hostname, addr.port) : addr.transport;
}

/** A `Deno.TcpConn` or `Deno.TlsConn` adapted to the {@linkcode Transport} contract. */
export class DenoTcpTransport implements Transport {
  /** The peer's `host:port`. Captured up front: the conn's fields are unusable after close. */
  readonly remoteAddress: string;
  /** The local `host:port`. */
  readonly localAddress: string;
  /** Written chunks' claims are given back once the kernel has their bytes. */
  readonly releasesWrites = true;

  #conn: Deno.Conn;
  #sink: EventSink;
  #queue = new ChunkQueue();
  #gate: WriteGate;
  // Bytes passed to conn.write whose completion has not been reported yet.
  #inFlight = 0;
  #writing = false;
  #writeClosed = false;
  #started = false;
  #wake: (() => void) | undefined;
  // Undefined between pooled reads: the next one's size picks its pool (see #readTarget).
  #readBuffer: Uint8Array | undefined = new Uint8Array(FIRST_READ_SIZE);
  // Reads go into pooled buffers, behind their front room.
  #readPooled = false;
  // Pooled reads come full: the next ones are bulk-sized.
  #readBulk = false;
  // The size of the pooled read in flight.
  #readWanted = 0;

  /**
   * Wraps an established connection (a TLS one with its handshake done). Reading starts at
   * {@linkcode start}.
   */
  constructor(conn: Deno.Conn, options: TcpTuning = {}) {
    this.#conn = conn;
    this.#gate = new WriteGate(options.highWaterMark);
    this.remoteAddress = netAddress(conn.remoteAddr);
    this.localAddress = netAddress(conn.localAddr);
    this.#sink = new EventSink({
      endDelivered: () => this.#maybeFinish(),
      handlerFailed: (error) => this.#fail(error),
    });
    // A TlsConn has no setNoDelay: see the module notes.
    if ("setNoDelay" in conn) {
      try {
        (conn as Deno.TcpConn).setNoDelay(options.noDelay ?? true);
      } catch {
        // Only fails on a conn that is already gone; the read loop reports that.
      }
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
    if (!this.#gate.open(this.#sink.closed)) return false;
    if (chunk.length > 0) {
      this.#queue.push(chunk);
      // Started a microtask later, so everything written in this turn (the pieces of one read,
      // relayed) goes out joined in the first write.
      if (!this.#writing) {
        this.#writing = true;
        queueMicrotask(this.#startPump);
      }
    }
    return this.#gate.underMark(this.bufferedAmount);
  }

  pause(): void {
    this.#sink.pause();
  }

  resume(): void {
    this.#sink.resume();
    this.#wakeReader();
  }

  end(): void {
    if (!this.#gate.end(this.#sink.closed)) return;
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
   * fresh zero-filled 64 KiB buffer per small read cost about 15 µs per round trip. A read that
   * filled the buffer says more is waiting, so the next buffer is twice as large, up to
   * {@linkcode READ_SIZE}; from then on reads go into pooled buffers (see `#readTarget`), so a
   * chunk handed over carries our claim on it to the receiver, which gives it back once it is done
   * (`util/bytes/buffer_pool.ts`; a receiver that does not is handed memory taken out of the pool).
   * Such a read lies {@linkcode READ_FRONT_ROOM} bytes into its buffer, the room offered to a
   * writer that frames it whole.
   */
  #takeRead(n: number): Uint8Array {
    const buffer = this.#readBuffer!;
    if (this.#readPooled) {
      // A full read says more is waiting; a short one that the bulk is over (or the sender slow).
      if (n >= POOLED_READ_SIZE) this.#readBulk ||= n === this.#readWanted;
      else this.#readBulk = false;
      const start = READ_FRONT_ROOM;
      if (n < SMALL_READ) return copyOut(buffer, start, n);
      // A bulk buffer that a short read used an eighth of or less (a TLS record, a slow sender)
      // stays for the next read, and the bytes move to a relay buffer: a buffer handed over is
      // at most eight times what it holds, as with relay buffers and SMALL_READ.
      if (buffer.length === bulkBuffers.size && n < SMALL_BULK_READ) {
        const relay = relayBuffers.acquire();
        relay.set(buffer.subarray(start, start + n), start);
        const moved = relay.subarray(start, start + n);
        offerFrontRoom(moved, READ_FRONT_ROOM);
        return moved;
      }
      // Handed over with its front room; the next read takes a new pooled buffer.
      const chunk = buffer.subarray(start, start + n);
      offerFrontRoom(chunk, READ_FRONT_ROOM);
      this.#readBuffer = undefined;
      return chunk;
    }
    const filled = n === buffer.length;
    if (n < SMALL_READ) {
      if (filled) this.#readBuffer = new Uint8Array(2 * n);
      return copyOut(buffer, 0, n);
    }
    const next = filled ? Math.min(2 * n, READ_SIZE) : buffer.length;
    if (next >= READ_SIZE) {
      this.#readBuffer = undefined;
      this.#readPooled = true;
    } else {
      this.#readBuffer = new Uint8Array(next);
    }
    return buffer.subarray(0, n);
  }

  /**
   * Where the next read goes: the whole small buffer, or a pooled one behind its front room. A
   * pooled read takes {@linkcode POOLED_READ_SIZE} bytes, {@linkcode BULK_READ_SIZE} while full
   * reads keep coming, or what the handler asks for (`readLimit`): a framing, reads that end where
   * its frames do (a frame is its header and a full read of the sender's); a relay, no more than
   * its writer sends whole. The size picks the pool, so that a buffer held with a chunk is not
   * much larger than the chunk.
   */
  #readTarget(): Uint8Array {
    let buffer = this.#readBuffer;
    if (!this.#readPooled) return buffer!;
    const preferred = this.#readBulk ? BULK_READ_SIZE : POOLED_READ_SIZE;
    const wish = this.#sink.readLimit(preferred, BULK_CAPACITY);
    const size = wish > 0 ? Math.min(wish, BULK_CAPACITY) : preferred;
    const pool = size > RELAY_CAPACITY ? bulkBuffers : relayBuffers;
    // The buffer kept after a small read (copied out) serves again if it is of the right pool.
    if (buffer === undefined || buffer.length !== pool.size) {
      if (buffer !== undefined) releaseBytes(buffer);
      buffer = this.#readBuffer = pool.acquire();
    }
    this.#readWanted = size;
    return buffer.subarray(READ_FRONT_ROOM, READ_FRONT_ROOM + size);
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
        const n = await this.#conn.read(this.#readTarget());
        if (n === null) {
          this.#sink.end();
          return;
        }
        this.#sink.data(this.#takeRead(n));
      }
    } catch (error) {
      this.#fail(error);
    } finally {
      // No read is in flight any more: the buffer may go back to its pool.
      if (this.#readBuffer !== undefined) releaseBytes(this.#readBuffer);
    }
  }

  readonly #startPump = () => this.#nextWrite();
  // The chunk being written (given back whole once written) and its part not yet taken.
  #chunk: Uint8Array | undefined;
  #rest: Uint8Array | undefined;

  /**
   * Writes the queue out, one `conn.write` at a time; `#writing` is set by whoever started it.
   * Callbacks bound once, not an async loop: an async function started for every burst of writes
   * allocated its frame and promises each time, most of a round trip's garbage.
   */
  #nextWrite(): void {
    if (this.#queue.empty || this.#sink.closed) {
      this.#writing = false;
      if (this.#gate.ending && !this.#sink.closed) void this.#shutdownWrite();
      return;
    }
    // Chunks queued during the previous write go out joined in one, when any is small: a write is
    // an op and a system call, dearer than copying its bytes.
    const chunk = this.#queue.takeJoined(MAX_BATCH);
    this.#chunk = chunk;
    this.#inFlight = chunk.length;
    this.#write(chunk);
  }

  #write(pending: Uint8Array): void {
    this.#rest = pending;
    this.#conn.write(pending).then(this.#written, this.#writeFailed);
  }

  readonly #written = (n: number): void => {
    try {
      if (this.#sink.closed) {
        this.#writing = false;
        return;
      }
      this.#inFlight -= n;
      const rest = this.#rest!;
      if (this.#gate.drainDue(this.bufferedAmount)) this.#sink.drain();
      // conn.write may take only part of the buffer: write the rest until the kernel has it all.
      if (n < rest.length) return this.#write(rest.subarray(n));
      // Written whole: the claim the writer passed with the chunk, if pooled, is given back.
      releaseBytes(this.#chunk!);
      this.#chunk = this.#rest = undefined;
      this.#nextWrite();
    } catch (error) {
      this.#writeFailed(error);
    }
  };

  readonly #writeFailed = (error: unknown): void => {
    this.#writing = false;
    this.#fail(error);
  };

  async #shutdownWrite(): Promise<void> {
    try {
      // On a TlsConn this sends close_notify before the FIN (see the module notes).
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
export function connectDenoTcp(
  address: TcpAddress,
  options: TcpTuning = {},
): Promise<Transport> {
  // A callback, not an async function: one promise and frame less per connection.
  return Deno.connect({ hostname: address.hostname, port: address.port, transport: "tcp" })
    .then((conn) => new DenoTcpTransport(conn, options));
}

/**
 * Connects to `address` and completes a TLS handshake, verifying the certificate against
 * `tls.serverName` (default: the hostname). A failed handshake rejects with a
 * {@linkcode TlsHandshakeError}; a failed TCP connect with Deno's own error.
 */
export async function connectDenoTls(
  address: TcpAddress,
  tls: TlsConnectOptions = {},
  options: TcpTuning = {},
): Promise<Transport> {
  const tcp = await Deno.connect({
    hostname: address.hostname,
    port: address.port,
    transport: "tcp",
  });
  let conn: Deno.TlsConn;
  try {
    // Set on the socket before the upgrade: the TlsConn that replaces `tcp` cannot.
    tcp.setNoDelay(options.noDelay ?? true);
    conn = await Deno.startTls(tcp, {
      hostname: tls.serverName ?? address.hostname,
      caCerts: tls.caCerts,
    });
  } catch (error) {
    try {
      tcp.close();
    } catch {
      // startTls consumed it.
    }
    throw error;
  }
  try {
    await conn.handshake();
  } catch (error) {
    conn.close();
    throw new TlsHandshakeError(formatHostPort(address.hostname, address.port), error);
  }
  return new DenoTcpTransport(conn, options);
}

/**
 * Accepts from `listener` until closed, handing each connection to `accepted`. Transient accept
 * failures (EMFILE) must not stop the listener. Resolves when the loop has ended: Deno frees the
 * port only once the pending accept has been rejected, a turn of the event loop after `close()`.
 */
function acceptLoop<C extends Deno.Conn>(
  listener: Deno.Listener<C>,
  isClosed: () => boolean,
  accepted: (conn: C) => void,
): Promise<void> {
  const loop = async () => {
    while (!isClosed()) {
      let conn: C;
      try {
        conn = await listener.accept();
      } catch (error) {
        if (isClosed() || error instanceof Deno.errors.BadResource) return;
        await new Promise((resolve) => setTimeout(resolve, 50));
        continue;
      }
      accepted(conn);
    }
  };
  return loop();
}

function listenerHandle(
  listener: Deno.Listener,
  onClose: () => void,
  loopEnded: Promise<void>,
): TransportListener {
  const bound = listener.addr as Deno.NetAddr;
  let closed = false;
  return {
    hostname: bound.hostname,
    port: bound.port,
    close() {
      if (!closed) {
        closed = true;
        onClose();
        try {
          listener.close();
        } catch {
          // Already closed.
        }
      }
      return loopEnded;
    },
  };
}

/**
 * Listens on `address` and hands each accepted connection to `onTransport` as a Transport. A
 * callback that throws gets that transport closed rather than leaking it.
 */
export function listenDenoTcp(
  address: TcpAddress,
  onTransport: (transport: Transport) => void,
  options: TcpTuning = {},
): Promise<TransportListener> {
  const listener = Deno.listen({
    hostname: address.hostname,
    port: address.port,
    transport: "tcp",
  });
  let closed = false;
  const loopEnded = acceptLoop(listener, () => closed, (conn) => {
    handOver(new DenoTcpTransport(conn, options), onTransport);
  });
  return Promise.resolve(listenerHandle(listener, () => closed = true, loopEnded));
}

/**
 * Listens for TLS on `address` and hands each connection to `onTransport` once its handshake is
 * done. Handshakes run concurrently (one slow client does not hold up the others); a failed one,
 * or one not finished within {@linkcode TLS_HANDSHAKE_TIMEOUT_MS}, is dropped silently since there
 * is nobody to report it to.
 */
export function listenDenoTls(
  address: TcpAddress,
  tls: TlsListenOptions,
  onTransport: (transport: Transport) => void,
  options: TcpTuning = {},
): Promise<TransportListener> {
  const listener = Deno.listenTls({
    hostname: address.hostname,
    port: address.port,
    transport: "tcp",
    cert: tls.cert,
    key: tls.key,
  });
  let closed = false;
  const loopEnded = acceptLoop(listener, () => closed, (conn) => {
    // Closing the conn makes a stalled handshake reject, which drops it below.
    const timer = setTimeout(() => conn.close(), TLS_HANDSHAKE_TIMEOUT_MS);
    conn.handshake().then(
      () => {
        clearTimeout(timer);
        handOver(new DenoTcpTransport(conn, options), onTransport);
      },
      () => {
        clearTimeout(timer);
        try {
          conn.close();
        } catch {
          // The timer closed it already.
        }
      },
    );
  });
  return Promise.resolve(listenerHandle(listener, () => closed = true, loopEnded));
}
