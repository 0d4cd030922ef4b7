/**
 * UDP sockets through the running runtime's adapter: Deno's `Deno.listenDatagram` (which Deno 2.9
 * offers only with `--unstable-net`) or Bun's `Bun.udpSocket`. Callback-driven, so a socket's
 * read loop never waits on anything a datagram is handed to (docs/design/udp.md).
 *
 * @module
 */

import { runtimeName } from "./tcp.ts";

/** One datagram received, and who sent it. */
export type UdpHandler = (bytes: Uint8Array, remote: { hostname: string; port: number }) => void;

/** A bound UDP socket. */
export interface UdpSocket {
  /** The address and port bound. */
  readonly local: { hostname: string; port: number };
  /** Sends one datagram without waiting; returns false when it could not be sent. */
  send(bytes: Uint8Array, hostname: string, port: number): boolean;
  /** Stops receiving and releases the port; idempotent. */
  close(): void;
}

/** Options of {@linkcode openUdp}. */
export interface OpenUdpOptions {
  /** Address to bind (default 127.0.0.1). */
  hostname?: string;
  /** Port to bind (default 0: any free port). */
  port?: number;
  /** Called for each datagram received. */
  onMessage: UdpHandler;
}

/**
 * Binds a UDP socket with the running runtime's adapter. Throws a clear error on Node (no adapter
 * yet) and on Deno without `--unstable-net`.
 */
export async function openUdp(options: OpenUdpOptions): Promise<UdpSocket> {
  const runtime = runtimeName();
  if (runtime === "deno") return (await import("./deno/udp.ts")).openDenoUdp(options);
  if (runtime === "bun") return (await import("./bun/udp.ts")).openBunUdp(options);
  throw new Error("UDP needs Deno or Bun");
}
