/**
 * Runtime-neutral entry point for transports: TCP through the best adapter of the running runtime
 * (Deno native, Bun native, or node:net), WebSocket (Deno or Bun server, global `WebSocket`
 * client), plus in-memory pairs for tests.
 *
 * @module
 */

import type { Transport, TransportListener } from "../protocol/transport.ts";
import { connectBunTcp, listenBunTcp } from "./bun_tcp.ts";
import { connectDenoTcp, listenDenoTcp } from "./deno_tcp.ts";
import { connectNodeTcp, listenNodeTcp } from "./node_tcp.ts";

export { memoryPair } from "./memory.ts";
export type { MemoryPairOptions } from "./memory.ts";
export {
  CloseCode,
  connectWebSocket,
  listenWebSocket,
  WebSocketCloseError,
  WebSocketConnectError,
} from "./ws.ts";
export type { WebSocketConnectOptions, WebSocketListenOptions } from "./ws.ts";
export type { Transport, TransportHandlers, TransportListener } from "../protocol/transport.ts";

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

/** Which TCP adapter {@linkcode connectTcp} and {@linkcode listenTcp} use. */
export type RuntimeName = "deno" | "bun" | "node";

function forcedNode(): boolean {
  const name = "TUNNELMUX_TRANSPORT";
  try {
    const deno = (globalThis as { Deno?: typeof Deno }).Deno;
    if (deno) {
      // Ask first: reading an ungranted variable would prompt on a terminal or throw.
      const state = deno.permissions.querySync({ name: "env", variable: name }).state;
      return state === "granted" && deno.env.get(name) === "node";
    }
    const proc = (globalThis as { process?: { env: Record<string, string | undefined> } }).process;
    return proc?.env[name] === "node";
  } catch {
    return false;
  }
}

/**
 * The adapter chosen for this process: the runtime's native sockets, or node:net when neither
 * Deno nor Bun is present or `TUNNELMUX_TRANSPORT=node` forces it (to test the fallback).
 */
export function runtimeName(): RuntimeName {
  if (forcedNode()) return "node";
  // Bun also defines a node-style `process` but never `Deno`, and Deno never defines `Bun`.
  if ("Deno" in globalThis) return "deno";
  if ("Bun" in globalThis) return "bun";
  return "node";
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
