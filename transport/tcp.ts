/**
 * TCP and TLS through the best adapter of the running runtime: Deno native, Bun native, or
 * node:net / node:tls. The one place that picks a TCP adapter.
 *
 * @module
 */

import type { Transport, TransportListener } from "../protocol/transport.ts";
import { currentRuntime, readEnv, type RuntimeName } from "../util/runtime.ts";
import { connectBunTcp, connectBunTls, listenBunTcp, listenBunTls } from "./bun_tcp.ts";
import { connectDenoTcp, connectDenoTls, listenDenoTcp, listenDenoTls } from "./deno_tcp.ts";
import { connectNodeTcp, connectNodeTls, listenNodeTcp, listenNodeTls } from "./node_tcp.ts";

export type { RuntimeName };

/** Options for {@linkcode connectTcp}. */
export interface ConnectTcpOptions {
  /** Host name or IP literal. */
  hostname: string;
  /** Port to connect to. */
  port: number;
  /** Disables Nagle's algorithm. Default true: yamux frames are small and latency-bound. */
  noDelay?: boolean;
  /** Queued outgoing bytes at which `write` returns false. Default 1 MiB. */
  highWaterMark?: number;
}

/** Options for {@linkcode listenTcp}. */
export interface ListenTcpOptions {
  /** Address to bind, e.g. `127.0.0.1` or `::`. */
  hostname: string;
  /** Port to bind; 0 picks a free one (read it back from the listener). */
  port: number;
  /** Disables Nagle's algorithm on accepted connections. Default true. */
  noDelay?: boolean;
  /** Queued outgoing bytes at which `write` returns false. Default 1 MiB. */
  highWaterMark?: number;
}

/** Options for {@linkcode connectTls}. */
export interface ConnectTlsOptions extends ConnectTcpOptions {
  /**
   * PEM certificates to trust in addition to the runtime's bundled roots, e.g. a private CA or a
   * self-signed server certificate.
   */
  caCerts?: string[];
  /** The name the server certificate must be valid for. Default: `hostname`. */
  serverName?: string;
}

/** Options for {@linkcode listenTls}. */
export interface ListenTlsOptions extends ListenTcpOptions {
  /** PEM certificate chain (the contents, not a path). */
  cert: string;
  /** PEM private key (the contents, not a path). */
  key: string;
}

let chosen: RuntimeName | undefined;

/**
 * The adapter chosen for this process: the runtime's native sockets, or node:net when neither
 * Deno nor Bun is present or `TUNNELMUX_TRANSPORT=node` forces it (to test the fallback). Decided
 * on first use and kept: asking Deno for the variable's permission on every connect cost a
 * measurable share of a short tunneled connection.
 */
export function runtimeName(): RuntimeName {
  chosen ??= detectRuntime();
  return chosen;
}

function detectRuntime(): RuntimeName {
  return readEnv("TUNNELMUX_TRANSPORT") === "node" ? "node" : currentRuntime();
}

/** Opens a TCP connection with the runtime's adapter. */
export function connectTcp(options: ConnectTcpOptions): Promise<Transport> {
  const address = { hostname: options.hostname, port: options.port };
  const tuning = { noDelay: options.noDelay, highWaterMark: options.highWaterMark };
  switch (runtimeName()) {
    case "deno":
      return connectDenoTcp(address, tuning);
    case "bun":
      return connectBunTcp(address, tuning);
    default:
      return connectNodeTcp(address, tuning);
  }
}

/** Listens for TCP connections with the runtime's adapter, passing each to `onTransport`. */
export function listenTcp(
  options: ListenTcpOptions,
  onTransport: (transport: Transport) => void,
): Promise<TransportListener> {
  const address = { hostname: options.hostname, port: options.port };
  const tuning = { noDelay: options.noDelay, highWaterMark: options.highWaterMark };
  switch (runtimeName()) {
    case "deno":
      return listenDenoTcp(address, onTransport, tuning);
    case "bun":
      return listenBunTcp(address, onTransport, tuning);
    default:
      return listenNodeTcp(address, onTransport, tuning);
  }
}

/**
 * Opens a TLS connection with the runtime's adapter. Resolves once the handshake is done, so a
 * certificate that is untrusted or not valid for `serverName` rejects here, with a
 * {@linkcode TlsHandshakeError}, rather than on the first read. The handshake has no deadline of
 * its own: bound it as {@linkcode connectTcp} calls are bounded (e.g. `tunnel/dial.ts`).
 */
export function connectTls(options: ConnectTlsOptions): Promise<Transport> {
  const address = { hostname: options.hostname, port: options.port };
  const tls = { caCerts: options.caCerts, serverName: options.serverName };
  const tuning = { noDelay: options.noDelay, highWaterMark: options.highWaterMark };
  switch (runtimeName()) {
    case "deno":
      return connectDenoTls(address, tls, tuning);
    case "bun":
      return connectBunTls(address, tls, tuning);
    default:
      return connectNodeTls(address, tls, tuning);
  }
}

/**
 * Listens for TLS connections with the runtime's adapter, passing each to `onTransport` once its
 * handshake is done. Failed handshakes never reach `onTransport`, and ones that stall are dropped
 * after {@linkcode TLS_HANDSHAKE_TIMEOUT_MS}. Under Deno, `noDelay` cannot be applied to accepted
 * TLS connections (Deno exposes no way to), so they keep Nagle's algorithm (see deno_tcp.ts).
 */
export function listenTls(
  options: ListenTlsOptions,
  onTransport: (transport: Transport) => void,
): Promise<TransportListener> {
  const address = { hostname: options.hostname, port: options.port };
  const identity = { cert: options.cert, key: options.key };
  const tuning = { noDelay: options.noDelay, highWaterMark: options.highWaterMark };
  switch (runtimeName()) {
    case "deno":
      return listenDenoTls(address, identity, onTransport, tuning);
    case "bun":
      return listenBunTls(address, identity, onTransport, tuning);
    default:
      return listenNodeTls(address, identity, onTransport, tuning);
  }
}
