/**
 * TCP and TLS through the best adapter of the running runtime: Deno native, Bun native, or
 * node:net / node:tls. The one place that picks a TCP adapter.
 *
 * @module
 */

import type { Transport, TransportListener } from "../protocol/transport.ts";
import { currentRuntime, readEnv, type RuntimeName } from "../util/host/runtime.ts";
import type {
  TcpAddress,
  TcpTuning,
  TlsConnectOptions,
  TlsListenOptions,
} from "./io/tcp_options.ts";

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

/** One runtime's adapter, as the functions below call it. */
interface Adapter {
  connectTcp(address: TcpAddress, tuning: TcpTuning): Promise<Transport>;
  listenTcp(
    address: TcpAddress,
    onTransport: (transport: Transport) => void,
    tuning: TcpTuning,
  ): Promise<TransportListener>;
  connectTls(address: TcpAddress, tls: TlsConnectOptions, tuning: TcpTuning): Promise<Transport>;
  listenTls(
    address: TcpAddress,
    identity: TlsListenOptions,
    onTransport: (transport: Transport) => void,
    tuning: TcpTuning,
  ): Promise<TransportListener>;
}

/**
 * Loads the chosen runtime's adapter on first use, and only that one: the others pull in what
 * only their runtime needs (node:net and node:tls, whose polyfills cost Deno tens of
 * milliseconds at start).
 */
const LOADERS: Record<RuntimeName, () => Promise<Adapter>> = {
  deno: async () => {
    const m = await import("./deno/tcp.ts");
    return {
      connectTcp: m.connectDenoTcp,
      listenTcp: m.listenDenoTcp,
      connectTls: m.connectDenoTls,
      listenTls: m.listenDenoTls,
    };
  },
  bun: async () => {
    const m = await import("./bun/tcp.ts");
    return {
      connectTcp: m.connectBunTcp,
      listenTcp: m.listenBunTcp,
      connectTls: m.connectBunTls,
      listenTls: m.listenBunTls,
    };
  },
  node: async () => {
    const m = await import("./node/tcp.ts");
    return {
      connectTcp: m.connectNodeTcp,
      listenTcp: m.listenNodeTcp,
      connectTls: m.connectNodeTls,
      listenTls: m.listenNodeTls,
    };
  },
};

let loaded: Promise<Adapter> | undefined;
let ready: Adapter | undefined;

function adapter(): Promise<Adapter> {
  return loaded ??= LOADERS[runtimeName()]().then((a) => ready = a);
}

/**
 * Loads the runtime's adapter now; once it is, {@linkcode connectTcp} starts its connect before it
 * returns (a caller that arms a deadline next then arms it while the kernel connects).
 */
export async function loadTcp(): Promise<void> {
  await adapter();
}

/** Opens a TCP connection with the runtime's adapter. */
export function connectTcp(options: ConnectTcpOptions): Promise<Transport> {
  const address = { hostname: options.hostname, port: options.port };
  const tuning = { noDelay: options.noDelay, highWaterMark: options.highWaterMark };
  if (ready) return ready.connectTcp(address, tuning);
  return adapter().then((a) => a.connectTcp(address, tuning));
}

/** Listens for TCP connections with the runtime's adapter, passing each to `onTransport`. */
export async function listenTcp(
  options: ListenTcpOptions,
  onTransport: (transport: Transport) => void,
): Promise<TransportListener> {
  const address = { hostname: options.hostname, port: options.port };
  const tuning = { noDelay: options.noDelay, highWaterMark: options.highWaterMark };
  return (await adapter()).listenTcp(address, onTransport, tuning);
}

/**
 * Opens a TLS connection with the runtime's adapter. Resolves once the handshake is done, so a
 * certificate that is untrusted or not valid for `serverName` rejects here, with a
 * {@linkcode TlsHandshakeError}, rather than on the first read. The handshake has no deadline of
 * its own: bound it as {@linkcode connectTcp} calls are bounded (e.g. `tunnel/dial.ts`).
 */
export async function connectTls(options: ConnectTlsOptions): Promise<Transport> {
  const address = { hostname: options.hostname, port: options.port };
  const tls = { caCerts: options.caCerts, serverName: options.serverName };
  const tuning = { noDelay: options.noDelay, highWaterMark: options.highWaterMark };
  return (await adapter()).connectTls(address, tls, tuning);
}

/**
 * Listens for TLS connections with the runtime's adapter, passing each to `onTransport` once its
 * handshake is done. Failed handshakes never reach `onTransport`, and ones that stall are dropped
 * after {@linkcode TLS_HANDSHAKE_TIMEOUT_MS}. Under Deno, `noDelay` cannot be applied to accepted
 * TLS connections (Deno exposes no way to), so they keep Nagle's algorithm (see deno/tcp.ts).
 */
export async function listenTls(
  options: ListenTlsOptions,
  onTransport: (transport: Transport) => void,
): Promise<TransportListener> {
  const address = { hostname: options.hostname, port: options.port };
  const identity = { cert: options.cert, key: options.key };
  const tuning = { noDelay: options.noDelay, highWaterMark: options.highWaterMark };
  return (await adapter()).listenTls(address, identity, onTransport, tuning);
}
