/**
 * Helpers for the operations end-to-end tests (not a test file itself): a bare yamux session to the
 * daemon that speaks the tunnel protocol by hand (to misbehave on purpose), raw HTTP upgrade
 * requests (to read the status of a refused WebSocket upgrade on every runtime), raw TCP probes,
 * and byte collectors with bounded waits. Process helpers live in `testing/`.
 *
 * @module
 */

import { createServer, type Socket } from "node:net";
import process from "node:process";
import { pattern, runCommand, runtimeArgs, tcpConnect, withTimeout } from "../testing/mod.ts";
import { ControlChannel } from "../tunnel/control/control_channel.ts";
import { Session } from "../protocol/session.ts";
import type { Stream } from "../protocol/stream.ts";
import { encodeStreamHeader, type StreamHeader } from "../tunnel/stream/stream_header.ts";
import type { Transport } from "../protocol/transport.ts";
import { connectTcp, connectWebSocket } from "../transport/mod.ts";
import { concat } from "../util/bytes/bytes.ts";

// ---- Raw yamux sessions to the daemon ----

/** A yamux session we drive by hand, over TCP or WebSocket. */
export interface RawSession {
  /** The yamux session (client side). */
  session: Session;
  /** The transport beneath. */
  transport: Transport;
  /** Closes everything now. */
  close(): void;
}

/** Opens a yamux session over TCP to `127.0.0.1:port`, without saying anything yet. */
export async function rawTcpSession(port: number): Promise<RawSession> {
  const transport = await connectTcp({ hostname: "127.0.0.1", port });
  return wrap(transport);
}

/** Opens a yamux session over WebSocket, with extra upgrade headers (e.g. Authorization). */
export async function rawWsSession(
  url: string,
  headers?: Record<string, string>,
): Promise<RawSession> {
  const transport = await connectWebSocket(url, { headers });
  return wrap(transport);
}

function wrap(transport: Transport): RawSession {
  // The daemon opens no streams toward a raw session in these tests: reset any it does.
  const session = new Session(transport, { client: true, onStream: (s) => s.reset() });
  return {
    session,
    transport,
    close: () => {
      session.destroy();
      transport.close();
    },
  };
}

/** Opens a stream and writes `header` (and optional payload) on it. */
export function openWithHeader(session: Session, header: StreamHeader, payload?: Uint8Array) {
  const stream = session.open();
  stream.write(encodeStreamHeader(header));
  if (payload) stream.write(payload);
  return stream;
}

/** The control channel of a raw session, with a queue of received messages. */
export class RawControl {
  /** The channel. */
  readonly channel: ControlChannel;
  /** Messages received and not yet taken. */
  readonly #inbox: Record<string, unknown>[] = [];
  #waiter: (() => void) | undefined;
  /** Set once the channel ended. */
  ended = false;

  /** Opens the control stream (kind `control`) on `session`. */
  constructor(session: Session) {
    const stream = openWithHeader(session, { kind: "control" });
    this.channel = new ControlChannel(stream);
    this.channel.onMessage = (value) => {
      this.#inbox.push(value as Record<string, unknown>);
      this.#waiter?.();
    };
    this.channel.onClose = () => {
      this.ended = true;
      this.#waiter?.();
    };
    this.channel.start();
  }

  /** Sends a message. */
  send(message: Record<string, unknown>): void {
    this.channel.send(message);
  }

  /** The next message; rejects after `ms`, or when the channel ends with nothing queued. */
  async next(ms = 10_000): Promise<Record<string, unknown>> {
    const deadline = Date.now() + ms;
    while (this.#inbox.length === 0) {
      if (this.ended) throw new Error("control channel ended without a message");
      const left = deadline - Date.now();
      if (left <= 0) throw new Error(`no control message within ${ms} ms`);
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, left);
        this.#waiter = () => {
          clearTimeout(timer);
          resolve();
        };
      });
      this.#waiter = undefined;
    }
    return this.#inbox.shift()!;
  }

  /** Sends a request and returns the next message (the daemon answers requests in order). */
  async request(message: Record<string, unknown>, ms = 10_000) {
    this.send(message);
    return await this.next(ms);
  }
}

/** What became of a stream: the bytes it received and how it ended. */
export interface StreamOutcome {
  /** Every byte received. */
  data: Uint8Array;
  /** True when the peer half-closed (FIN). */
  ended: boolean;
  /** The error it closed with, if any (a reset by the peer carries `resetCode`). */
  error?: Error;
  /** The peer's reset reason, when it was reset with one. */
  resetCode?: number;
}

/**
 * Collects a stream until it closes (or `ms` passes: rejects). Ends our side after the peer's FIN
 * so the stream can close normally.
 */
export function collectStream(stream: Stream, ms = 10_000): Promise<StreamOutcome> {
  const chunks: Uint8Array[] = [];
  let ended = false;
  return withTimeout(
    new Promise<StreamOutcome>((resolve) => {
      stream.onData = (chunk) => chunks.push(chunk);
      stream.onEnd = () => {
        ended = true;
        stream.end();
      };
      stream.onClose = (error) => {
        // A YamuxError, or the SDK's ClientError for a stream the daemon refused: both carry it.
        const resetCode = (error as { resetCode?: number } | undefined)?.resetCode;
        resolve({ data: concat(chunks), ended, error, resetCode });
      };
      stream.resume();
    }),
    ms,
    `stream ${stream.id} to close`,
  );
}

// ---- Raw TCP and HTTP ----

/**
 * Sends a WebSocket upgrade request on a raw TCP connection and returns the HTTP status code of
 * the answer (101 when accepted), and its body for refusals. Every runtime reports the status this
 * way, unlike the `WebSocket` API.
 */
export async function upgradeStatus(
  port: number,
  path: string,
  headers: Record<string, string> = {},
): Promise<{ status: number; text: string }> {
  const socket = await tcpConnect(port);
  try {
    const extra = Object.entries(headers).map(([k, v]) => `${k}: ${v}\r\n`).join("");
    socket.write(
      `GET ${path} HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nUpgrade: websocket\r\n` +
        "Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n" +
        `Sec-WebSocket-Version: 13\r\n${extra}\r\n`,
    );
    let text = "";
    return await withTimeout(
      new Promise((resolve, reject) => {
        const check = () => {
          const match = /^HTTP\/1\.1 (\d{3})/.exec(text);
          if (!match) return;
          const status = Number(match[1]);
          // For a refusal, wait for the body when there is one (Content-Length or close).
          const headEnd = text.indexOf("\r\n\r\n");
          if (status === 101 || headEnd < 0) return status === 101 && resolve({ status, text });
          const length = /content-length:\s*(\d+)/i.exec(text.slice(0, headEnd));
          if (!length || text.length - headEnd - 4 >= Number(length[1])) resolve({ status, text });
        };
        socket.on("data", (chunk) => {
          text += chunk.toString("latin1");
          check();
        });
        socket.once("end", () => {
          const match = /^HTTP\/1\.1 (\d{3})/.exec(text);
          if (match) resolve({ status: Number(match[1]), text });
          else {reject(
              new Error(`connection ended without an HTTP answer: ${JSON.stringify(text)}`),
            );}
        });
        socket.once("error", (error) => {
          const match = /^HTTP\/1\.1 (\d{3})/.exec(text);
          if (match) resolve({ status: Number(match[1]), text });
          else reject(error);
        });
      }),
      5_000,
      "HTTP upgrade answer",
    );
  } finally {
    socket.destroy();
  }
}

/**
 * A TCP server whose every connection gets `chunks` chunks of `chunkSize` bytes of
 * `pattern(total, seed)`, one every `intervalMs`, then FIN; with `stall`, it sends the first
 * chunk and then nothing, never ending. Returns the port and a closer.
 */
export async function slowSource(options: {
  chunkSize: number;
  chunks: number;
  intervalMs: number;
  seed?: number;
  stall?: boolean;
}): Promise<{ port: number; expected: Uint8Array; connections: number; close(): void }> {
  const expected = pattern(options.chunkSize * options.chunks, options.seed ?? 7);
  const sockets = new Set<Socket>();
  const timers = new Set<ReturnType<typeof setInterval>>();
  const state = { connections: 0 };
  const server = createServer((socket) => {
    state.connections++;
    sockets.add(socket);
    socket.on("error", () => {});
    socket.on("close", () => sockets.delete(socket));
    let sent = 0;
    const sendNext = () => {
      if (socket.destroyed) return clearInterval(timer);
      socket.write(expected.subarray(sent * options.chunkSize, (sent + 1) * options.chunkSize));
      sent++;
      if (options.stall) return clearInterval(timer);
      if (sent === options.chunks) {
        clearInterval(timer);
        timers.delete(timer);
        socket.end();
      }
    };
    const timer = setInterval(sendNext, options.intervalMs);
    timers.add(timer);
    socket.resume(); // ignore what the visitor sends
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => resolve());
  });
  const address = server.address();
  const port = typeof address === "object" && address ? address.port : 0;
  return {
    port,
    expected,
    get connections() {
      return state.connections;
    },
    close() {
      for (const timer of timers) clearInterval(timer);
      for (const socket of sockets) socket.destroy();
      server.close();
    },
  };
}

/** A reader of a socket: live byte count, and everything it received once it closed. */
export interface SocketReader {
  /** Bytes received so far. */
  received(): number;
  /** Resolves when the socket closed (bounded by `ms`): the bytes, and whether it ended cleanly. */
  done: Promise<{ data: Uint8Array; ended: boolean; error?: Error }>;
}

/** Reads everything from `socket` until it closes; `done` rejects after `ms`. */
export function readAll(socket: Socket, ms = 20_000): SocketReader {
  const chunks: Uint8Array[] = [];
  let bytes = 0;
  let ended = false;
  let error: Error | undefined;
  socket.on("data", (chunk: Uint8Array) => {
    chunks.push(new Uint8Array(chunk));
    bytes += chunk.length;
  });
  socket.on("end", () => ended = true);
  socket.on("error", (e: Error) => error = e);
  const done = withTimeout(
    new Promise<{ data: Uint8Array; ended: boolean; error?: Error }>((resolve) => {
      // The peer's FIN ends the reading (a half-open socket never emits "close" by itself).
      const finish = () => {
        resolve({ data: concat(chunks), ended, error });
        socket.destroy();
      };
      if (socket.destroyed || socket.readableEnded) return finish();
      socket.once("end", finish);
      socket.once("close", finish);
    }),
    ms,
    "socket to close",
  );
  socket.resume();
  return { received: () => bytes, done };
}

/**
 * Resolves once the peer closed or half-closed `socket` (FIN, reset or error), which a half-open
 * socket reports as "end" only; rejects after `ms`.
 */
export function peerClosed(socket: Socket, ms = 10_000): Promise<void> {
  return withTimeout(
    new Promise<void>((resolve) => {
      if (socket.destroyed || socket.readableEnded) return resolve();
      socket.once("end", () => resolve());
      socket.once("close", () => resolve());
      socket.once("error", () => resolve());
      socket.resume();
    }),
    ms,
    "the peer to close the connection",
  );
}

/** Runs `file` (e.g. `daemon/main.ts`) to completion under this runtime; bounded by `ms`. */
export function runProgram(
  file: string,
  args: string[],
  ms = 30_000,
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return runCommand(process.execPath, runtimeArgs(file, args), { timeoutMs: ms });
}
