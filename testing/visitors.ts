/**
 * Test support: the visitor's side: plain TCP connections to a port (a whole round trip, a held
 * connection, a probe of what a port does), and a small HTTP GET. Each socket is registered for
 * {@linkcode cleanup}; every wait is bounded.
 *
 * @module
 */

import { Buffer } from "node:buffer";
import { execFile } from "node:child_process";
import { connect as netConnect, type Socket } from "node:net";
import { register } from "./cleanup.ts";
import { DEFAULT_TIMEOUT_MS, withTimeout } from "./wait.ts";

/** Options of {@linkcode tcpRoundTrip}. */
export interface RoundTripOptions {
  /** Host (default 127.0.0.1). */
  host?: string;
  /** Bound on the whole exchange (default {@linkcode DEFAULT_TIMEOUT_MS}). */
  timeoutMs?: number;
  /** Half-close after writing (default true); without it, reads until the peer closes. */
  halfClose?: boolean;
}

/**
 * Connects to `port`, writes `bytes`, half-closes, and resolves with everything received until the
 * peer ends. Rejects on a connection error, a reset, or the timeout.
 */
export function tcpRoundTrip(
  port: number,
  bytes: Uint8Array,
  options: RoundTripOptions = {},
): Promise<Uint8Array> {
  const timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  let socket: Socket | undefined;
  const done = new Promise<Uint8Array>((resolve, reject) => {
    socket = netConnect({ host: options.host ?? "127.0.0.1", port, allowHalfOpen: true });
    const chunks: Buffer[] = [];
    socket.on("data", (chunk: Buffer) => chunks.push(chunk));
    socket.on("end", () => {
      resolve(new Uint8Array(Buffer.concat(chunks)));
      socket!.end();
    });
    socket.on("error", reject);
    socket.on("close", () => reject(new Error(`connection to ${port} closed before its end`)));
    socket.on("connect", () => {
      socket!.write(bytes);
      if (options.halfClose ?? true) socket!.end();
    });
  });
  const unregister = register(() => void socket?.destroy());
  return withTimeout(done, timeoutMs, `round trip of ${bytes.length} bytes via port ${port}`)
    .finally(() => {
      socket?.destroy();
      unregister();
    });
}

/**
 * Opens a plain TCP connection to 127.0.0.1:`port` (registered for cleanup), from
 * `localAddress` when given (any of 127/8 on Linux: visitors with distinct addresses).
 */
export function tcpConnect(
  port: number,
  host = "127.0.0.1",
  localAddress?: string,
): Promise<Socket> {
  const socket = netConnect({
    host,
    port,
    allowHalfOpen: true,
    ...(localAddress ? { localAddress } : {}),
  });
  socket.on("error", () => {});
  register(() => void socket.destroy());
  return withTimeout(
    new Promise<Socket>((resolve, reject) => {
      socket.once("connect", () => resolve(socket));
      socket.once("error", reject);
    }),
    DEFAULT_TIMEOUT_MS,
    `connect to ${host}:${port}`,
  );
}

/**
 * Tries to connect to 127.0.0.1:`port`: resolves `"refused"` (ECONNREFUSED), `"accepted"`
 * (the connection was made; it is closed at once) or `"error: CODE"`. Bounded.
 */
export function probePort(port: number, host = "127.0.0.1"): Promise<string> {
  return withTimeout(
    new Promise<string>((resolve) => {
      const socket = netConnect({ host, port });
      socket.once("connect", () => {
        socket.destroy();
        resolve("accepted");
      });
      socket.once("error", (error: Error & { code?: string }) => {
        socket.destroy();
        resolve(
          error.code === "ECONNREFUSED" ? "refused" : `error: ${error.code ?? error.message}`,
        );
      });
    }),
    DEFAULT_TIMEOUT_MS,
    `probe of ${host}:${port}`,
  );
}

/**
 * Resolves when `socket` is closed (by the peer, a reset or an error);
 * rejects after `timeoutMs`.
 */
export function socketClosed(socket: Socket, timeoutMs = DEFAULT_TIMEOUT_MS): Promise<void> {
  if (socket.destroyed) return Promise.resolve();
  return withTimeout(
    new Promise<void>((resolve) => socket.once("close", () => resolve())),
    timeoutMs,
    "socket to close",
  );
}

/**
 * An HTTPS GET with curl of `https://NAME:PORT/PATH` on 127.0.0.1, trusting only the CA in
 * `caFile` (so the server name and the certificate chain are checked as a browser would); resolves
 * with the body, rejects on a TLS error or a status of 400 and above.
 */
export function httpsGetAs(
  caFile: string,
  name: string,
  port: number,
  path: string,
): Promise<string> {
  const url = `https://${name}:${port}${path}`;
  const args = ["-sS", "--fail", "--resolve", `${name}:${port}:127.0.0.1`, "--cacert", caFile, url];
  return new Promise((resolve, reject) =>
    execFile(
      "curl",
      args,
      { timeout: 10_000 },
      (error, stdout, stderr) =>
        error ? reject(new Error(`${error.message} ${stderr}`)) : resolve(stdout),
    )
  );
}

/** Makes an HTTP GET to 127.0.0.1:`port``path` with `fetch`; resolves status and body bytes. */
export async function httpGet(
  port: number,
  path: string,
  timeoutMs = DEFAULT_TIMEOUT_MS,
): Promise<{ status: number; body: Uint8Array; headers: Headers }> {
  const response = await fetch(`http://127.0.0.1:${port}${path}`, {
    signal: AbortSignal.timeout(timeoutMs),
  });
  const body = new Uint8Array(await response.arrayBuffer());
  return { status: response.status, body, headers: response.headers };
}
