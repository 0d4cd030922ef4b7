/**
 * The parts of Bun's API that the Bun adapters use, declared here once (there is no `@types/bun`
 * in the project, so `deno check` stays clean), and the one accessor of the `Bun` global.
 *
 * @module
 */

/** The part of Bun's TCP `Socket` the TCP adapter uses. `T` is what the adapter keeps in `data`. */
export interface BunSocket<T = unknown> {
  /** The adapter's per-socket state. */
  data: T | undefined;
  /** Bun's socket state. */
  readonly readyState: number;
  /** The peer's address. */
  readonly remoteAddress: string;
  /** The peer's port. */
  readonly remotePort: number;
  /** The local address. */
  readonly localAddress: string;
  /** The local port. */
  readonly localPort: number;
  /** Writes what the kernel takes now: the byte count, or -1 when closed. */
  write(data: Uint8Array): number;
  /** Sends FIN (half-close). */
  shutdown(halfClose?: boolean): void;
  /** Closes (FIN). */
  end(): void;
  /** Resets the connection. */
  terminate(): void;
  /** Stops reading. */
  pause(): void;
  /** Resumes reading. */
  resume(): void;
  /** Sets TCP_NODELAY. */
  setNoDelay(noDelay?: boolean): boolean;
}

/** Bun's TCP socket callbacks. */
export interface BunSocketHandler<T = unknown> {
  /** Deliver data as Uint8Array. */
  binaryType?: "uint8array";
  /** The socket opened (for TLS: before the handshake). */
  open?(socket: BunSocket<T>): void;
  /** Bytes arrived. */
  data?(socket: BunSocket<T>, data: Uint8Array): void;
  /** The kernel has room again after a short write. */
  drain?(socket: BunSocket<T>): void;
  /** The peer sent FIN. */
  end?(socket: BunSocket<T>): void;
  /** The socket closed, with the error that closed it if any. */
  close?(socket: BunSocket<T>, error?: Error): void;
  /** An error on the socket. */
  error?(socket: BunSocket<T>, error: Error): void;
  /** Connecting failed. */
  connectError?(socket: BunSocket<T>, error: Error): void;
  /** TLS only: the handshake finished; `error` says why verification failed. */
  handshake?(socket: BunSocket<T>, success: boolean, error: Error | null): void;
}

/** Bun's TLS options (a subset). */
export interface BunTlsOptions {
  /** CA certificates to trust (PEM). */
  ca?: string[];
  /** The name to verify. */
  serverName?: string;
  /** Verify the peer (default true). */
  rejectUnauthorized?: boolean;
  /** Certificate chain (PEM). */
  cert?: string;
  /** Private key (PEM). */
  key?: string;
}

/** A TCP listener from `Bun.listen`. */
export interface BunListener {
  /** The bound address. */
  readonly hostname: string;
  /** The bound port. */
  readonly port: number;
  /** Stops listening. */
  stop(closeActiveConnections?: boolean): void;
}

/** Options of `Bun.connect` and `Bun.listen`. */
export interface BunSocketOptions<T> {
  /** Host to connect to or bind. */
  hostname: string;
  /** Port. */
  port: number;
  /** Keep the write side open after the peer's FIN. */
  allowHalfOpen: boolean;
  /** TLS, when set. */
  tls?: BunTlsOptions;
  /** `socket.data` as a connecting socket starts out (`Bun.connect` only). */
  data?: T;
  /** The callbacks. */
  socket: BunSocketHandler<T>;
}

/** The part of the `Bun` global the adapters use. */
export interface BunApi {
  /** Opens a TCP (or TLS) connection. */
  connect<T>(options: BunSocketOptions<T>): Promise<BunSocket<T>>;
  /** Listens for TCP (or TLS) connections. */
  listen<T>(options: BunSocketOptions<T>): BunListener;
  /** Opens a UDP socket. */
  udpSocket(options: BunUdpSocketOptions): Promise<BunUdpSocket>;
}

/** The part of Bun's UDP socket the UDP adapter uses. */
export interface BunUdpSocket {
  /** The bound port. */
  readonly port: number;
  /** The bound address. */
  readonly address: { address: string; port: number };
  /** Sends one datagram; false when the kernel did not take it. */
  send(data: Uint8Array, port: number, address: string): boolean;
  /** Closes the socket. */
  close(): void;
}

/** Options of `Bun.udpSocket` the UDP adapter uses. */
export interface BunUdpSocketOptions {
  /** Address to bind. */
  hostname?: string;
  /** Port to bind (0: any). */
  port?: number;
  /** Handlers. */
  socket: {
    data(socket: BunUdpSocket, data: Uint8Array, port: number, address: string): void;
    error?(socket: BunUdpSocket, error: Error): void;
  };
}

/** The `Bun` global; throws (naming `what`) when not running on Bun. */
export function bunApi(what: string): BunApi {
  const api = (globalThis as unknown as { Bun?: BunApi }).Bun;
  if (!api) throw new Error(`${what} needs the Bun runtime`);
  return api;
}
