/**
 * What the TCP and TLS adapters share: where to connect or listen, tuning, TLS options, and the
 * TLS handshake's error and deadline. Kept apart from the adapters and from the runtime picker
 * (`tcp.ts`) so that neither imports the other's runtime.
 *
 * @module
 */

import type { Transport } from "../../protocol/transport.ts";

/** Tuning every TCP adapter takes. */
export interface TcpTuning {
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

/** How a TLS client verifies the server. */
export interface TlsConnectOptions {
  /**
   * PEM certificates trusted in addition to the runtime's bundled roots (Deno's `caCerts`
   * semantics; the Bun and node:tls adapters add the bundled roots explicitly to match).
   */
  caCerts?: string[];
  /** The name the certificate must be valid for (and the SNI name). Default: the hostname. */
  serverName?: string;
}

/** A TLS server's identity. */
export interface TlsListenOptions {
  /** PEM certificate chain. */
  cert: string;
  /** PEM private key. */
  key: string;
}

/**
 * How long an accepted connection may take to finish its TLS handshake before it is dropped, so
 * clients that connect and stall cannot pile up half-open handshakes.
 */
export const TLS_HANDSHAKE_TIMEOUT_MS = 10_000;

/**
 * The TCP connection was made but the TLS handshake failed: an untrusted certificate, a name the
 * certificate does not cover, no common protocol version, or the server hanging up. The runtime's
 * own error is the `cause`.
 */
export class TlsHandshakeError extends Error {
  /** The `host:port` that was dialed. */
  readonly address: string;

  /** Creates the error; `cause` is the runtime's error, whose text ends the message. */
  constructor(address: string, cause: unknown) {
    const detail = cause instanceof Error ? cause.message : String(cause);
    super(`TLS handshake with ${address} failed: ${detail}`, { cause });
    this.name = "TlsHandshakeError";
    this.address = address;
  }
}

/**
 * Runs a listener's `onTransport` for a new `transport`, closing it if the callback throws
 * rather than leaking it.
 */
export function handOver(transport: Transport, onTransport: (transport: Transport) => void): void {
  try {
    onTransport(transport);
  } catch {
    transport.close();
  }
}
