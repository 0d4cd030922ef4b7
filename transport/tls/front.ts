/**
 * The listener under a TLS front that routes by name (the daemon's HTTPS port): it
 * accepts TCP, reads the ClientHello within a deadline ({@linkcode parseClientHello}), and hands
 * the connection over undecided. Its owner looks at the server name and ALPN and then either
 * passes the raw bytes on (the ClientHello first, untouched), terminates TLS with a certificate it
 * chose for that name, or refuses with a TLS alert, without a byte going anywhere else.
 *
 * It uses `node:net` and `node:tls` on every runtime: terminating TLS on a connection that was
 * accepted as plain TCP (after its first bytes were read) needs a server-side `tls.TLSSocket` over
 * it, which Deno's and Bun's native listeners do not offer; both runtimes' node layers do, and
 * pick the certificate per connection as node does.
 *
 * @example
 * ```ts ignore
 * await listenTlsFront({ hostname: "0.0.0.0", port: 443 }, (connection) => {
 *   if (connection.hello.serverName === "app.example.com") {
 *     connection.terminate(identity).then(serveHttp, () => {});
 *   } else connection.refuse(TlsAlert.UnrecognizedName);
 * });
 * ```
 *
 * @module
 */

import * as net from "node:net";
import * as tls from "node:tls";
import type { Transport, TransportListener } from "../../protocol/transport.ts";
import { formatHostPort } from "../../util/net/address.ts";
import { listenOn, NodeTcpTransport } from "../node/tcp.ts";
import { type TcpAddress, type TcpTuning, TLS_HANDSHAKE_TIMEOUT_MS } from "../io/tcp_options.ts";
import { type ClientHelloInfo, MAX_CLIENT_HELLO, parseClientHello } from "./client_hello.ts";

/** A certificate chain and its private key, PEM. */
export interface TlsIdentity {
  /** The certificate chain, leaf first. */
  readonly cert: string;
  /** The private key. */
  readonly key: string;
}

/** TLS alert descriptions a front sends when it refuses (RFC 8446 §6). */
export enum TlsAlert {
  /** Not TLS, or a malformed ClientHello. */
  DecodeError = 50,
  /** No certificate, or nothing acceptable offered. */
  HandshakeFailure = 40,
  /** No tunnel holds the name (RFC 6066 §3), or the hello named none. */
  UnrecognizedName = 112,
  /** Something of ours failed. */
  InternalError = 80,
}

/** A connection whose ClientHello has been read, waiting for its owner's choice. */
export interface HelloConnection {
  /** What the ClientHello asked for. */
  readonly hello: ClientHelloInfo;
  /** The visitor's `host:port`. */
  readonly remoteAddress: string;
  /** The address it reached, `host:port`. */
  readonly localAddress: string;
  /** The raw connection as a transport; its first data are the bytes already read. */
  passthrough(): Transport;
  /**
   * Terminates TLS with `identity`, offering `alpn` (the first of the client's list that is in
   * it wins; none in common: no ALPN). Resolves with the decrypted transport once the handshake is
   * done; rejects, with the socket destroyed, when it fails or takes longer than the handshake
   * deadline.
   */
  terminate(identity: TlsIdentity, alpn?: readonly string[]): Promise<Transport>;
  /** Sends a fatal alert and closes. */
  refuse(alert: TlsAlert): void;
}

/**
 * What comes before a connection's ClientHello, decoded (a trusted front's PROXY header): its
 * length, and the visitor's addresses it names (undefined: the connection's own).
 */
export interface Preamble {
  /** Bytes it takes; the ClientHello starts there. */
  length: number;
  /** The visitor's `host:port`. */
  remoteAddress?: string;
  /** The address the visitor reached, `host:port`. */
  localAddress?: string;
}

/**
 * Decodes a preamble from the bytes read so far: null while more are needed, throws when they
 * cannot be one (the connection is then dropped).
 */
export type PreambleReader = (bytes: Uint8Array) => Preamble | null;

/** How the front listener behaves. */
export interface TlsFrontOptions extends TcpTuning {
  /**
   * Asked at accept with the connection's `host:port`: a reader when a preamble must come before
   * its ClientHello (within `helloTimeoutMs` as well), undefined when none.
   */
  preamble?(remoteAddress: string): PreambleReader | undefined;
  /** The whole ClientHello must arrive within this (default 10 s); else the socket is dropped. */
  helloTimeoutMs?: number;
  /** A termination's handshake must finish within this (default {@linkcode TLS_HANDSHAKE_TIMEOUT_MS}). */
  handshakeTimeoutMs?: number;
  /** Told when a connection is dropped before its hello was handed over (for counters). */
  onDropped?(reason: "timeout" | "not_tls" | "closed" | "limit" | "preamble"): void;
  /**
   * Whether one more connection may be taken, asked at accept; false closes it at once (told to
   * `onDropped` as `limit`). With it, the caller counts what it holds: see `onClosed`.
   */
  admit?(): boolean;
  /** Told once when a connection that `admit` let in has closed, however it went. */
  onClosed?(): void;
}

/** The most bytes held for a preamble (a PROXY v2 header with TLVs is a few hundred). */
const MAX_PREAMBLE = 4096;
/** A refused socket is destroyed if the peer has not closed within this after the alert. */
const CLOSE_DEADLINE_MS = 2_000;

/** Secure contexts by identity: building one parses the key and chain, too slow per connection. */
const contexts = new WeakMap<TlsIdentity, tls.SecureContext>();

function secureContext(identity: TlsIdentity): tls.SecureContext {
  let context = contexts.get(identity);
  if (!context) {
    context = tls.createSecureContext({ cert: identity.cert, key: identity.key });
    contexts.set(identity, context);
  }
  return context;
}

/** A fatal alert record (TLS 1.2 record version, which every client accepts before a ServerHello). */
function alertRecord(alert: TlsAlert): Uint8Array {
  return Uint8Array.of(21, 3, 3, 0, 2, 2, alert);
}

class Hello implements HelloConnection {
  readonly remoteAddress: string;
  readonly localAddress: string;
  #used = false;

  constructor(
    readonly hello: ClientHelloInfo,
    readonly bytes: Uint8Array,
    readonly socket: net.Socket,
    readonly options: TlsFrontOptions,
    preamble: Preamble | undefined,
  ) {
    this.remoteAddress = preamble?.remoteAddress ??
      formatHostPort(socket.remoteAddress, socket.remotePort);
    this.localAddress = preamble?.localAddress ??
      formatHostPort(socket.localAddress, socket.localPort);
  }

  /** The addresses the transports report (the preamble's, when it named any). */
  get #addresses() {
    return { remote: this.remoteAddress, local: this.localAddress };
  }

  #take(): net.Socket {
    if (this.#used) throw new Error("a hello connection is passed on, terminated or refused once");
    this.#used = true;
    return this.socket;
  }

  passthrough(): Transport {
    const socket = this.#take();
    socket.unshift(this.bytes);
    return new NodeTcpTransport(socket, this.options, this.#addresses);
  }

  terminate(identity: TlsIdentity, alpn?: readonly string[]): Promise<Transport> {
    const socket = this.#take();
    let context: tls.SecureContext;
    try {
      context = secureContext(identity);
    } catch (error) {
      refuseSocket(socket, TlsAlert.InternalError);
      return Promise.reject(error);
    }
    socket.unshift(this.bytes);
    // The TLS socket reports the connection's failures; one on the raw socket under it must not
    // be an unhandled 'error' event (which would take the process down).
    socket.on("error", () => socket.destroy());
    const secure = new tls.TLSSocket(socket, {
      isServer: true,
      secureContext: context,
      ALPNProtocols: alpn ? [...alpn] : undefined,
      // Honoured (a half-closed visitor may still read its response) but missing from the types.
      ...{ allowHalfOpen: true },
    });
    return new Promise((resolve, reject) => {
      const fail = (error: Error) => {
        clearTimeout(timer);
        secure.destroy();
        socket.destroy();
        reject(error);
      };
      const timer = setTimeout(
        () => fail(new Error("TLS handshake timed out")),
        this.options.handshakeTimeoutMs ?? TLS_HANDSHAKE_TIMEOUT_MS,
      );
      secure.once("error", fail);
      secure.once("secure", () => {
        clearTimeout(timer);
        secure.off("error", fail);
        resolve(new NodeTcpTransport(secure, this.options, this.#addresses));
      });
    });
  }

  refuse(alert: TlsAlert): void {
    refuseSocket(this.#take(), alert);
  }
}

function refuseSocket(socket: net.Socket, alert: TlsAlert): void {
  const timer = setTimeout(() => socket.destroy(), CLOSE_DEADLINE_MS);
  socket.once("close", () => clearTimeout(timer));
  socket.on("error", () => socket.destroy());
  // Whatever else the peer sends is read and dropped, so our FIN is not turned into a reset.
  socket.on("data", () => {});
  socket.resume();
  socket.end(alertRecord(alert));
}

/** Reads one socket's ClientHello, then hands it over. */
function readHello(
  socket: net.Socket,
  onHello: (connection: HelloConnection) => void,
  options: TlsFrontOptions,
): void {
  let buffered = new Uint8Array(0);
  let reader = options.preamble?.(formatHostPort(socket.remoteAddress, socket.remotePort));
  let preamble: Preamble | undefined;
  const drop = (reason: "timeout" | "not_tls" | "closed" | "preamble") => {
    detach();
    options.onDropped?.(reason);
    if (reason === "not_tls") refuseSocket(socket, TlsAlert.DecodeError);
    else socket.destroy();
  };
  const timer = setTimeout(() => drop("timeout"), options.helloTimeoutMs ?? 10_000);
  const onData = (chunk: Uint8Array) => {
    const joined = new Uint8Array(buffered.length + chunk.length);
    joined.set(buffered);
    joined.set(chunk, buffered.length);
    buffered = joined;
    if (reader) {
      try {
        preamble = reader(buffered) ?? undefined;
      } catch {
        return drop("preamble");
      }
      // A reader that neither decodes nor refuses still holds a bounded number of bytes.
      if (!preamble) return void (buffered.length > MAX_PREAMBLE && drop("preamble"));
      reader = undefined;
      buffered = buffered.subarray(preamble.length);
      if (buffered.length === 0) return;
    }
    let hello: ClientHelloInfo | undefined;
    try {
      hello = parseClientHello(buffered);
    } catch {
      return drop("not_tls");
    }
    if (!hello) {
      // parseClientHello refuses a hello past its bound; this only caps what a stalled one holds.
      if (buffered.length > MAX_CLIENT_HELLO + 1024) drop("not_tls");
      return;
    }
    detach();
    socket.pause();
    const connection = new Hello(hello, buffered, socket, options, preamble);
    try {
      onHello(connection);
    } catch {
      socket.destroy();
    }
  };
  const onEnd = () => drop("closed");
  const onError = () => drop("closed");
  const detach = () => {
    clearTimeout(timer);
    socket.off("data", onData);
    socket.off("end", onEnd);
    socket.off("error", onError);
  };
  socket.on("data", onData);
  socket.once("end", onEnd);
  socket.once("error", onError);
}

/**
 * Listens on `address` and hands each connection to `onHello` once its ClientHello is in. A
 * connection that sends something else gets a `decode_error` alert; one that is silent past
 * `helloTimeoutMs`, or closes first, is dropped. Every connection handed over must be passed on,
 * terminated or refused.
 */
export function listenTlsFront(
  address: TcpAddress,
  onHello: (connection: HelloConnection) => void,
  options: TlsFrontOptions = {},
): Promise<TransportListener> {
  const server = net.createServer({ allowHalfOpen: true }, (socket) => {
    if (options.admit && !options.admit()) {
      options.onDropped?.("limit");
      return void socket.destroy();
    }
    if (options.onClosed) socket.once("close", options.onClosed);
    socket.setNoDelay(options.noDelay ?? true);
    readHello(socket, onHello, options);
  });
  return listenOn(server, address);
}
