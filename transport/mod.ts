/**
 * Runtime-neutral entry point for transports: TCP, and TLS over TCP, through the best adapter of
 * the running runtime (Deno native, Bun native, or node:net / node:tls), WebSocket (Deno or Bun
 * server; our own client over TCP everywhere), plus in-memory pairs for tests.
 *
 * @module
 */

export { connectTcp, connectTls, listenTcp, listenTls, runtimeName } from "./tcp.ts";
export type {
  ConnectTcpOptions,
  ConnectTlsOptions,
  ListenTcpOptions,
  ListenTlsOptions,
  RuntimeName,
} from "./tcp.ts";
export { TLS_HANDSHAKE_TIMEOUT_MS, TlsHandshakeError } from "./io/tcp_options.ts";

export { memoryPair } from "./memory.ts";
export type { MemoryPairOptions } from "./memory.ts";
export {
  CloseCode,
  connectWebSocket,
  listenWebSocket,
  WebSocketCloseError,
  WebSocketConnectError,
} from "./ws/mod.ts";
export type { WebSocketConnectOptions, WebSocketListenOptions } from "./ws/mod.ts";
export type { Transport, TransportHandlers, TransportListener } from "../protocol/transport.ts";
