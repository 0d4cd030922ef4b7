/**
 * {@linkcode Transport} over `node:net` and `node:tls`: the fallback for runtimes without a native
 * adapter, and a second implementation under Deno and Bun (their node compatibility layers) to
 * test against. A `tls.TLSSocket` is a `net.Socket`, so one adapter carries both; with
 * `allowHalfOpen`, `end()` sends close_notify and FIN and the peer may still write back.
 *
 * @module
 */

import * as net from "node:net";
import * as tls from "node:tls";
import type { Transport, TransportHandlers, TransportListener } from "../../protocol/transport.ts";
import { formatHostPort } from "../../util/net/address.ts";
import { EventSink, toError } from "../io/event_sink.ts";
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

/**
 * A connected `net.Socket` (or a `tls.TLSSocket` with its handshake done) adapted to the
 * {@linkcode Transport} contract.
 */
export class NodeTcpTransport implements Transport {
  /** The peer's `host:port`, captured while connected (node clears it after close). */
  readonly remoteAddress: string;
  /** The local `host:port`. */
  readonly localAddress: string;

  #socket: net.Socket;
  #sink: EventSink;
  #gate: WriteGate;
  #peerEnded = false;
  #closeAfterEnd = false;

  /**
   * Wraps a connected socket; it must have been made with `allowHalfOpen: true`. `addresses`
   * replace the socket's own (the visitor's, as a trusted front's PROXY header named them).
   */
  constructor(
    socket: net.Socket,
    options: TcpTuning = {},
    addresses?: { remote: string; local: string },
  ) {
    this.#socket = socket;
    this.#gate = new WriteGate(options.highWaterMark);
    this.remoteAddress = addresses?.remote ??
      formatHostPort(socket.remoteAddress, socket.remotePort);
    this.localAddress = addresses?.local ?? formatHostPort(socket.localAddress, socket.localPort);
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
      if (this.#gate.drainDue(socket.writableLength)) this.#sink.drain();
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
    if (!this.#gate.open(this.#sink.closed)) return false;
    if (chunk.length > 0) this.#socket.write(chunk);
    // Node emits 'drain' when its buffer empties after any false write(), which is the case when
    // we answer false, since our mark is above node's own.
    return this.#gate.underMark(this.#socket.writableLength);
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
    if (!this.#gate.end(this.#sink.closed)) return;
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
  options: TcpTuning = {},
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
 * Connects to `address` with node:tls and completes the handshake, verifying the certificate
 * against `tls.serverName` (default: the hostname). A failed handshake rejects with a
 * {@linkcode TlsHandshakeError}; a failed TCP connect with node's own error.
 */
export function connectNodeTls(
  address: TcpAddress,
  options: TlsConnectOptions = {},
  tuning: TcpTuning = {},
): Promise<Transport> {
  const name = options.serverName ?? address.hostname;
  return new Promise((resolve, reject) => {
    const socket = tls.connect({
      host: address.hostname,
      port: address.port,
      // Honoured by node's tls.connect (passed on to the TLSSocket) but missing from its types.
      ...{ allowHalfOpen: true },
      // `ca` replaces the bundled roots; add them back to match Deno's caCerts semantics.
      ca: options.caCerts ? [...tls.rootCertificates, ...options.caCerts] : undefined,
      // SNI must not carry an IP address (RFC 6066, and node warns), but IPs are still verified.
      servername: net.isIP(name) ? undefined : name,
      checkServerIdentity: (_host, cert) => tls.checkServerIdentity(name, cert),
      rejectUnauthorized: true,
    });
    let tcpConnected = false;
    socket.once("connect", () => tcpConnected = true);
    const onError = (error: Error) => {
      socket.destroy();
      // Errors after the TCP connect belong to the handshake.
      reject(
        tcpConnected
          ? new TlsHandshakeError(formatHostPort(address.hostname, address.port), error)
          : error,
      );
    };
    socket.once("error", onError);
    socket.once("secureConnect", () => {
      socket.off("error", onError);
      resolve(new NodeTcpTransport(socket, tuning));
    });
  });
}

/** Starts `server` listening and resolves with a handle, or rejects if binding fails. */
export function listenOn(server: net.Server, address: TcpAddress): Promise<TransportListener> {
  return new Promise((resolve, reject) => {
    server.once("error", reject);
    server.listen(address.port, address.hostname, () => {
      server.off("error", reject);
      // Later server errors (accept failures) must not crash the process; sockets report their own.
      server.on("error", () => {});
      const bound = server.address() as net.AddressInfo;
      let closed = false;
      let released = Promise.resolve();
      resolve({
        hostname: bound.address,
        port: bound.port,
        close() {
          if (!closed) {
            closed = true;
            // The callback of close() waits for every connection to end; the listening socket
            // itself is gone a turn of the event loop later (on Deno's node:net too).
            server.close();
            released = new Promise((resolve) => setTimeout(resolve, 0));
          }
          return released;
        },
      });
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
  options: TcpTuning = {},
): Promise<TransportListener> {
  const server = net.createServer({ allowHalfOpen: true }, (socket) => {
    handOver(new NodeTcpTransport(socket, options), onTransport);
  });
  return listenOn(server, address);
}

/**
 * Listens for TLS on `address` with node:tls and hands each connection to `onTransport` once its
 * handshake is done. Failed handshakes, and those not finished within
 * {@linkcode TLS_HANDSHAKE_TIMEOUT_MS}, are dropped silently since there is nobody to report to.
 */
export function listenNodeTls(
  address: TcpAddress,
  identity: TlsListenOptions,
  onTransport: (transport: Transport) => void,
  options: TcpTuning = {},
): Promise<TransportListener> {
  const server = tls.createServer({
    cert: identity.cert,
    key: identity.key,
    allowHalfOpen: true,
    handshakeTimeout: TLS_HANDSHAKE_TIMEOUT_MS,
  }, (socket) => {
    handOver(new NodeTcpTransport(socket, options), onTransport);
  });
  // Without a listener node only destroys the socket, which is what we want; this keeps it quiet.
  server.on("tlsClientError", () => {});
  return listenOn(server, address);
}
