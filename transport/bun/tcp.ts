/**
 * {@linkcode Transport} over Bun's native TCP (`Bun.connect` / `Bun.listen`).
 *
 * Bun's socket API differs from Node's in ways this adapter absorbs:
 * - `socket.write()` is unbuffered: it returns how many bytes the kernel took (possibly fewer, 0,
 *   or -1 once closed) and keeps nothing, so the rest waits here until the `drain` callback.
 * - `socket.end()` closes the whole socket even with `allowHalfOpen` (the `close` callback runs
 *   synchronously inside it); the half-close is `socket.shutdown()`.
 * - Every `pause()` and `resume()` is a system call (`epoll_ctl`), so a new socket is not paused
 *   in case data comes before the transport is started; such data is held, and the socket paused
 *   then. Its addresses are asked of the kernel only when wanted (two `getpeername` or
 *   `getsockname` calls each) unless the dialed or listening address already says them.
 * - The buffer passed to `data` is freshly allocated per call (each has its own ArrayBuffer at
 *   offset 0, and earlier buffers keep their bytes; checked on Bun 1.4.4 by retaining every chunk
 *   of a multi-MiB transfer and comparing them afterwards, see bun/tcp_test.ts), so it is handed
 *   on without a copy, and reads cannot come from `util/bytes/buffer_pool.ts`; a large one is
 *   adopted into its claim accounting instead (`adoptedReads`), so it is freed once read. The
 *   session's write batches can: `write` keeps nothing, so a batch is given back as soon as the
 *   kernel has it and the next one reuses it (`releasesWrites`).
 *
 * Bun's types are declared locally (no `@types/bun`), so `deno check` stays clean.
 *
 * TLS (`tls` option of `Bun.connect` / `Bun.listen`) uses the same socket API, with these
 * differences, checked on Bun 1.4.4:
 * - `open` runs before the handshake, and `Bun.connect` resolves there. Writes before the
 *   `handshake` callback return 0, and a `shutdown()` then aborts the handshake, so transports are
 *   handed out only from `handshake`. Pausing in `open` would stall the handshake (its bytes are
 *   reads too); like a plain socket, a TLS one is paused only once data arrives before the
 *   transport is started.
 * - A failed verification arrives as `handshake(socket, false, error)` followed by a `close`
 *   *without* error; the connect is rejected from there with a {@linkcode TlsHandshakeError}.
 * - `tls: {}` (an empty object) silently means plain TCP; the options below are never empty.
 * - `ca` replaces the bundled roots (as in Node), so the bundled ones are added to match Deno's
 *   "in addition" semantics.
 * - Half-close works as on TCP: `shutdown()` sends close_notify and FIN, the peer gets `end` and
 *   may still write back. `data` buffers are fresh per call as on TCP.
 *
 * @module
 */

import process from "node:process";
import type { Transport, TransportHandlers, TransportListener } from "../../protocol/transport.ts";
import { formatHostPort, formatIp, parseIp, unbracketHost } from "../../util/net/address.ts";
import { EventSink, toError } from "../io/event_sink.ts";
import { ChunkQueue, MAX_BATCH } from "../io/chunk_queue.ts";
import { bunApi, type BunListener, type BunSocket, type BunSocketHandler } from "./types.ts";
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
import { adoptedReads, releaseBytes } from "../../util/bytes/buffer_pool.ts";

/**
 * Reads at least this long are adopted by {@linkcode adoptedReads}; smaller ones (requests, ACKs)
 * are not worth the bookkeeping and are left to the collector.
 */
const ADOPT_READ = 16 * 1024;

/** A Bun TCP socket carrying its transport in `data`. */
type Socket = BunSocket<BunTcpTransport>;

/** Bun's callbacks for such a socket. */
type SocketHandler = BunSocketHandler<BunTcpTransport>;

/** `Bun.connect` and `Bun.listen`. */
function bun() {
  return bunApi("the Bun TCP transport");
}

/**
 * `host:port` when `hostname` is an IP literal other than a wildcard: what the kernel would say
 * for a socket connected to it or accepted on it, known without asking.
 */
function knownAddress(hostname: string, port: number): string | undefined {
  let host = knownHosts.get(hostname);
  if (host === undefined) {
    const ip = parseIp(unbracketHost(hostname));
    host = ip === undefined || ip.bytes.every((byte) => byte === 0) ? null : formatIp(ip);
    // A client dials the same few local services for every visitor: their hosts are parsed once.
    if (knownHosts.size >= KNOWN_HOSTS) knownHosts.clear();
    knownHosts.set(hostname, host);
  }
  return host === null ? undefined : formatHostPort(host, port);
}

/** Hostnames as dialed → their canonical IP text, or null when not a usable IP literal. */
const knownHosts = new Map<string, string | null>();
const KNOWN_HOSTS = 64;

/** A Bun TCP socket adapted to the {@linkcode Transport} contract. */
export class BunTcpTransport implements Transport {
  #socket: Socket;
  #sink: EventSink;
  #queue = new ChunkQueue();
  // Unwritten tail of a batch the kernel took only part of.
  #pending: Uint8Array | undefined;
  #gate: WriteGate;
  #flushScheduled = false;
  readonly #flushCallback = () => {
    this.#flushScheduled = false;
    if (!this.#blocked) this.#flush();
  };
  // The kernel refused bytes; only the drain callback may write again.
  #blocked = false;
  #writeClosed = false;
  #peerEnded = false;
  // Bun already closed the socket cleanly; report close once the held end is delivered.
  #closeAfterEnd = false;
  // Whether Bun was told to stop reading: each pause or resume is a system call, so the socket is
  // paused only once data arrives that nobody takes, and resumed only if it was.
  #socketPaused = false;
  #remote: string | undefined;
  #local: string | undefined;
  // Who waits for the first read (see whenFirstRead).
  #firstRead: (() => void) | undefined;

  /**
   * Wraps an open socket; called from the `open` callback. `addresses` are the peer's and our
   * `host:port` where the caller knows them without asking the kernel (a dialed IP literal, a
   * listener bound to one address).
   */
  constructor(
    socket: Socket,
    options: TcpTuning = {},
    addresses: { remote?: string; local?: string } = {},
  ) {
    this.#socket = socket;
    this.#gate = new WriteGate(options.highWaterMark);
    this.#remote = addresses.remote;
    this.#local = addresses.local;
    this.#sink = new EventSink({
      endDelivered: () => this.#maybeFinish(),
      handlerFailed: (error) => this.#teardown(error),
    });
    // Bun turns Nagle's algorithm off on every socket it opens (seen with strace on Bun 1.4.4:
    // TCP_NODELAY right after accept and connect), so only the opposite wish costs a call.
    if (options.noDelay === false) socket.setNoDelay(false);
  }

  /**
   * The peer's `host:port`. Asked of the kernel on first use (two system calls in Bun), and kept:
   * a closing transport captures it while the socket can still answer.
   */
  get remoteAddress(): string {
    return this.#remote ??= formatHostPort(this.#socket.remoteAddress, this.#socket.remotePort);
  }

  /** The local `host:port`, found as {@linkcode remoteAddress} is. */
  get localAddress(): string {
    return this.#local ??= formatHostPort(this.#socket.localAddress, this.#socket.localPort);
  }

  /** Written chunks' claims are given back once the kernel has their bytes. */
  readonly releasesWrites = true;

  /**
   * Chunks of `JOIN_BELOW` (16 KiB) or more go to `socket.write` alone and whole, as they lie
   * (`ChunkQueue.takeWrite`). Bun's socket has no vectored write, so a frame's header and its
   * large payload cost two system calls here, which is less than copying the payload behind it.
   */
  readonly writesLargeAsIs = true;

  /** Bytes accepted by `write` and not yet taken by the kernel. */
  get bufferedAmount(): number {
    return this.#queue.bytes + (this.#pending?.length ?? 0);
  }

  /**
   * Bun reads a new socket by itself, and its data arrives in the next I/O poll, which a
   * setImmediate scheduled from a setImmediate follows (Bun 1.4.4): so the first bytes, if any
   * were sent at once, come before that second turn.
   */
  whenFirstRead(ready: () => void): void {
    if (this.#socketPaused || this.#sink.closed) return ready();
    this.#firstRead = ready;
    setImmediate(() => setImmediate(() => this.#firstReadDone()));
  }

  #firstReadDone(): void {
    const ready = this.#firstRead;
    this.#firstRead = undefined;
    ready?.();
  }

  start(handlers: TransportHandlers): void {
    this.#sink.start(handlers);
    if (!this.#sink.paused) this.#resumeSocket();
  }

  write(chunk: Uint8Array): boolean {
    if (!this.#gate.open(this.#sink.closed)) return false;
    if (chunk.length > 0) {
      this.#queue.push(chunk);
      this.#scheduleFlush();
    }
    return this.#gate.underMark(this.bufferedAmount);
  }

  pause(): void {
    this.#sink.pause();
    if (!this.#sink.closed && !this.#socketPaused) {
      this.#socketPaused = true;
      this.#socket.pause();
    }
  }

  resume(): void {
    this.#resumeSocket();
    this.#sink.resume();
  }

  #resumeSocket(): void {
    if (this.#socketPaused && !this.#sink.closed) {
      this.#socketPaused = false;
      this.#socket.resume();
    }
  }

  end(): void {
    if (!this.#gate.end(this.#sink.closed)) return;
    this.#scheduleFlush();
  }

  close(): void {
    this.#teardown(undefined);
  }

  /** @internal Bun `data` callback. */
  onData(chunk: Uint8Array): void {
    // A large read is tracked by claims like a pooled one, so it is freed once the session and the
    // streams are done with it, not at the next collection (tens of MiB of reads later).
    if (chunk.length >= ADOPT_READ) adoptedReads.adopt(chunk as Uint8Array<ArrayBuffer>);
    this.#sink.data(chunk);
    // Whoever waited for these bytes starts the transport now, most likely, taking them.
    this.#firstReadDone();
    // Held (not started yet, or paused while Bun's read was under way): one chunk is kept, and the
    // kernel holds the rest back until someone takes it.
    if (this.#sink.holding && !this.#socketPaused && !this.#sink.closed) {
      this.#socketPaused = true;
      this.#socket.pause();
    }
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
    this.#captureAddresses();
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
    queueMicrotask(this.#flushCallback);
  }

  #flush(): void {
    while (!this.#sink.closed && (this.#pending || !this.#queue.empty)) {
      const batch = this.#pending ?? this.#queue.takeWrite(MAX_BATCH);
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
      // The kernel has every byte (Bun keeps nothing): a pooled chunk's claim is given back.
      releaseBytes(batch);
    }
    if (this.#sink.closed) return;
    if (this.#gate.drainDue(this.bufferedAmount)) this.#sink.drain();
    if (this.#gate.ending && !this.#writeClosed && this.bufferedAmount === 0) {
      this.#writeClosed = true;
      this.#socket.shutdown();
      this.#maybeFinish();
    }
  }

  // Addresses not asked for yet, read while Bun may still know them (see remoteAddress).
  #captureAddresses(): void {
    void this.remoteAddress;
    void this.localAddress;
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
    this.#captureAddresses();
    this.#queue.clear();
    this.#pending = undefined;
    this.#sink.close(error);
    // end() closes the fd at once (FIN); after a failure, reset so the peer learns it too.
    if (error) this.#socket.terminate();
    else this.#socket.end();
  }
}

/** Callbacks that give each socket its transport in `data` at open (listeners; TLS builds on them). */
function socketHandler(
  options: TcpTuning,
  onOpen: (transport: BunTcpTransport) => void,
  addresses?: { remote?: string; local?: string },
): SocketHandler {
  return {
    binaryType: "uint8array",
    open(socket) {
      const transport = new BunTcpTransport(socket, options, addresses);
      socket.data = transport;
      onOpen(transport);
    },
    data: (socket, chunk) => socket.data?.onData(chunk),
    drain: (socket) => socket.data?.onDrain(),
    end: (socket) => socket.data?.onEnd(),
    close: (socket, error) => socket.data?.onClose(error),
    error: (socket, error) => socket.data?.onClose(toError(error)),
  };
}

/** The pieces of {@linkcode tlsSocketHandler} that differ between connecting and listening. */
interface TlsSides {
  /** The handshake succeeded: the transport is ready (it holds what arrives until started). */
  ready(transport: BunTcpTransport): void;
  /** The handshake failed or the socket closed before it finished. */
  failed(error: Error): void;
  /** Drop sockets that do not finish their handshake in time (listeners). */
  handshakeTimeout?: number;
}

/**
 * Socket callbacks for TLS: the transport exists from `open` (so nothing that arrives is lost),
 * but is handed out only once the handshake succeeded.
 */
function tlsSocketHandler(options: TcpTuning, sides: TlsSides): SocketHandler {
  const plain = socketHandler(options, () => {});
  // Sockets whose handshake is over, one way or the other; per-socket state, as the handler object
  // is shared by every socket of a listener.
  const settled = new WeakSet<Socket>();
  const timers = new WeakMap<Socket, ReturnType<typeof setTimeout>>();
  const settle = (socket: Socket): boolean => {
    if (settled.has(socket)) return false;
    settled.add(socket);
    clearTimeout(timers.get(socket));
    return true;
  };
  return {
    ...plain,
    open(socket) {
      socket.data = new BunTcpTransport(socket, options);
      if (sides.handshakeTimeout !== undefined) {
        timers.set(socket, setTimeout(() => socket.terminate(), sides.handshakeTimeout));
      }
    },
    handshake(socket, success, error) {
      const transport = socket.data;
      if (!transport || !settle(socket)) return;
      if (success) {
        sides.ready(transport);
        return;
      }
      socket.terminate();
      sides.failed(error ?? new Error("certificate verification failed"));
    },
    close(socket, error) {
      if (settle(socket)) {
        sides.failed(error ?? new Error("connection closed during the handshake"));
      }
      plain.close?.(socket, error);
    },
    error(socket, error) {
      if (settle(socket)) sides.failed(toError(error));
      plain.error?.(socket, error);
    },
  };
}

/**
 * What a plain connect's `open` needs, in the socket's `data` until the transport takes its place
 * there; also the transport's known addresses (the dialed IP literal, if it is one).
 */
class Dial {
  /** The transport, once the socket opened. */
  opened: BunTcpTransport | undefined;
  constructor(readonly options: TcpTuning, readonly remote: string | undefined) {}
}

/** The transport in a socket's `data`, or undefined while it is still its {@linkcode Dial}. */
function transportOf(socket: BunSocket<BunTcpTransport | Dial>): BunTcpTransport | undefined {
  const data = socket.data;
  return data instanceof BunTcpTransport ? data : undefined;
}

// One set of callbacks for every plain connect, its state in `data`: a service dialed for each
// visitor makes no handler object and no closures of its own.
const connectHandler: BunSocketHandler<BunTcpTransport | Dial> = {
  binaryType: "uint8array",
  open(socket) {
    const dial = socket.data as Dial;
    const transport = new BunTcpTransport(socket as Socket, dial.options, dial);
    dial.opened = transport;
    socket.data = transport;
  },
  data: (socket, chunk) => transportOf(socket)?.onData(chunk),
  drain: (socket) => transportOf(socket)?.onDrain(),
  end: (socket) => transportOf(socket)?.onEnd(),
  close: (socket, error) => transportOf(socket)?.onClose(error),
  error: (socket, error) => transportOf(socket)?.onClose(toError(error)),
  // Keeps Bun from also reporting the rejection as unhandled; the await reports it.
  connectError: () => {},
};

/** Connects to `address` over Bun TCP. */
export async function connectBunTcp(
  address: TcpAddress,
  options: TcpTuning = {},
): Promise<Transport> {
  const dial = new Dial(options, knownAddress(address.hostname, address.port));
  const socket = await bun().connect<BunTcpTransport | Dial>({
    hostname: address.hostname,
    port: address.port,
    allowHalfOpen: true,
    data: dial,
    socket: connectHandler,
  });
  return dial.opened ?? transportOf(socket) ??
    new BunTcpTransport(socket as Socket, options, dial);
}

/**
 * Connects to `address` and completes a TLS handshake, verifying the certificate against
 * `tls.serverName` (default: the hostname). A failed handshake rejects with a
 * {@linkcode TlsHandshakeError}; a failed TCP connect with Bun's own error.
 */
export async function connectBunTls(
  address: TcpAddress,
  tls: TlsConnectOptions = {},
  options: TcpTuning = {},
): Promise<Transport> {
  const where = formatHostPort(address.hostname, address.port);
  let sides!: TlsSides;
  const handshaken = new Promise<BunTcpTransport>((resolve, reject) => {
    sides = { ready: resolve, failed: (error) => reject(new TlsHandshakeError(where, error)) };
  });
  // When the TCP connect itself fails, the await below throws and nobody awaits this one.
  handshaken.catch(() => {});
  // node:tls (and node:net under it) loads only for a TLS connection: ~12 ms of Bun's start.
  const { rootCertificates } = process.getBuiltinModule("node:tls");
  await bun().connect({
    hostname: address.hostname,
    port: address.port,
    allowHalfOpen: true,
    tls: {
      ca: tls.caCerts ? [...rootCertificates, ...tls.caCerts] : [...rootCertificates],
      serverName: tls.serverName ?? address.hostname,
      rejectUnauthorized: true,
    },
    socket: { ...tlsSocketHandler(options, sides), connectError: () => {} },
  });
  return handshaken;
}

function listenerHandle(listener: BunListener): TransportListener {
  let closed = false;
  return {
    hostname: listener.hostname,
    port: listener.port,
    close() {
      if (!closed) {
        closed = true;
        // false: established transports stay open, as the contract says. Bun closes the socket
        // at once, so the port is free when this returns.
        listener.stop(false);
      }
      return Promise.resolve();
    },
  };
}

/**
 * Listens on `address` and hands each accepted connection to `onTransport` as a Transport. A
 * callback that throws gets that transport closed rather than leaking it.
 */
export function listenBunTcp(
  address: TcpAddress,
  onTransport: (transport: Transport) => void,
  options: TcpTuning = {},
): Promise<TransportListener> {
  const addresses: { local?: string } = {};
  const listener = bun().listen({
    hostname: address.hostname,
    port: address.port,
    allowHalfOpen: true,
    socket: socketHandler(options, (transport) => handOver(transport, onTransport), addresses),
  });
  // Every connection of a listener bound to one address arrives at that address.
  addresses.local = knownAddress(listener.hostname, listener.port);
  return Promise.resolve(listenerHandle(listener));
}

/**
 * Listens for TLS on `address` and hands each connection to `onTransport` once its handshake is
 * done. A failed handshake, or one not finished within {@linkcode TLS_HANDSHAKE_TIMEOUT_MS}, is
 * dropped silently since there is nobody to report it to.
 */
export function listenBunTls(
  address: TcpAddress,
  tls: TlsListenOptions,
  onTransport: (transport: Transport) => void,
  options: TcpTuning = {},
): Promise<TransportListener> {
  const listener = bun().listen({
    hostname: address.hostname,
    port: address.port,
    allowHalfOpen: true,
    tls: { cert: tls.cert, key: tls.key },
    socket: tlsSocketHandler(options, {
      ready: (transport) => handOver(transport, onTransport),
      failed: () => {},
      handshakeTimeout: TLS_HANDSHAKE_TIMEOUT_MS,
    }),
  });
  return Promise.resolve(listenerHandle(listener));
}
