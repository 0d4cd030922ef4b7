/**
 * Drives `@chainsafe/libp2p-yamux` (v8) outside libp2p, as a foreign yamux peer for interop tests
 * and benchmarks. Works under Deno and Bun.
 *
 * libp2p-yamux v8 builds its muxer on a libp2p `MessageStream` (the byte connection below the
 * muxer). {@linkcode TransportConnection} is the smallest such stream: `AbstractMessageStream` from
 * `@libp2p/utils` over our {@linkcode Transport} contract. So the same peer runs over
 * `memoryPair()` or any TCP transport; {@linkcode socketTransport} wraps a plain `node:net` socket
 * so the libp2p side of a TCP test shares no code with ours.
 *
 * @example libp2p-yamux client against one of our sessions
 * ```ts ignore
 * const [ours, theirs] = memoryPair();
 * const server = new Session(ours, { client: false, onStream: echoStream });
 * const peer = new Libp2pPeer(theirs, { client: true });
 * const echoed = await libp2pRoundTrip(await peer.open(), new Uint8Array(1000));
 * await peer.close();
 * ```
 *
 * @module
 */

import * as net from "node:net";
import { yamux, type YamuxMuxerInit } from "@chainsafe/libp2p-yamux";
import { AbstractMessageStream, type SendResult } from "@libp2p/utils";
import type {
  Logger,
  MessageStreamDirection,
  StreamCloseEvent,
  StreamMessageEvent,
} from "@libp2p/interface";
import type { Transport, TransportHandlers } from "../protocol/transport.ts";

/** The libp2p-yamux muxer (its class is not exported by name). */
export type YamuxMuxer = ReturnType<ReturnType<ReturnType<typeof yamux>>["createStreamMuxer"]>;

/** A libp2p-yamux stream. */
export type Libp2pStream = Awaited<ReturnType<YamuxMuxer["createStream"]>>;

/** What libp2p hands out as a message: one buffer or a `Uint8ArrayList`. */
type Bytes = StreamMessageEvent["data"];

/**
 * `@libp2p/interface` and `@libp2p/utils` each carry their own copy of `uint8arraylist`, so their
 * (identical) types are nominally distinct; these casts bridge them without copying.
 */
type MuxerConnection = Parameters<ReturnType<ReturnType<typeof yamux>>["createStreamMuxer"]>[0];
type Sendable = Parameters<Libp2pStream["send"]>[0];

/** Copies `data` into one contiguous buffer (no copy when it already is one). */
export function toBytes(data: Bytes): Uint8Array {
  return data instanceof Uint8Array ? data : data.subarray();
}

/** A logger that drops everything (libp2p wants one; set `DEBUG` in libp2p itself for traces). */
function silentLogger(): Logger {
  const log: Logger = Object.assign(() => {}, {
    enabled: false,
    trace: () => {},
    error: () => {},
    newScope: () => log,
  });
  return log;
}

/**
 * A libp2p `MessageStream` over a {@linkcode Transport}: what libp2p-yamux reads frames from and
 * writes frames to. `outbound` makes the muxer the yamux client (odd stream ids).
 */
export class TransportConnection extends AbstractMessageStream {
  readonly #transport: Transport;

  /** Starts reading from `transport` at once. */
  constructor(transport: Transport, direction: MessageStreamDirection) {
    super({ log: silentLogger(), direction });
    this.#transport = transport;
    const handlers: TransportHandlers = {
      data: (chunk) => this.onData(chunk),
      drain: () => this.safeDispatchEvent("drain"),
      // Like a libp2p TCP connection (allowHalfOpen false): the peer's end closes both ways.
      end: () => {
        this.onRemoteCloseWrite();
        this.#transport.end();
        this.onTransportClosed();
      },
      close: (error) => this.onTransportClosed(error),
    };
    transport.start(handlers);
  }

  /** @internal Writes muxer frames; reports backpressure from the transport. */
  sendData(data: Parameters<AbstractMessageStream["sendData"]>[0]): SendResult {
    const sentBytes = data.byteLength;
    const canSendMore = this.#transport.write(data.subarray());
    return { sentBytes, canSendMore };
  }

  /** @internal An abort closes the transport. */
  sendReset(): void {
    this.#transport.close();
  }

  /** @internal */
  sendPause(): void {
    this.#transport.pause();
  }

  /** @internal */
  sendResume(): void {
    this.#transport.resume();
  }

  /** Flushes queued frames, half-closes the transport and marks the connection closed. */
  async close(): Promise<void> {
    if (this.status !== "open") return;
    this.status = "closing";
    this.writeStatus = "closing";
    // Frames still queued here go out after the next drain; transport.end() flushes the rest.
    if (this.writeBuffer.byteLength > 0) {
      await new Promise<void>((resolve) => {
        const done = () => {
          if (this.writeBuffer.byteLength > 0 && this.status === "closing") return;
          this.removeEventListener("idle", done);
          this.removeEventListener("close", done);
          resolve();
        };
        this.addEventListener("idle", done);
        this.addEventListener("close", done);
      });
    }
    this.#transport.end();
    this.onTransportClosed();
  }
}

/** How to create a {@linkcode Libp2pPeer}. */
export interface Libp2pPeerOptions {
  /** True on the dialing side (odd stream ids). */
  client: boolean;
  /** Takes each stream the remote opens; default {@linkcode libp2pEcho}. */
  onStream?: (stream: Libp2pStream) => void;
  /** libp2p-yamux options (`enableKeepAlive`, `maxInboundStreams`, `streamOptions`, ...). */
  init?: YamuxMuxerInit;
}

/** One libp2p-yamux endpoint over a {@linkcode Transport}. */
export class Libp2pPeer {
  /** The libp2p-yamux muxer (`createStream`, `ping`, `close`, `abort`, `streams`). */
  readonly muxer: YamuxMuxer;
  /** The connection below the muxer. */
  readonly connection: TransportConnection;
  /** Resolves when the connection has closed, with its error if it failed. */
  readonly closed: Promise<Error | undefined>;

  /** Starts a muxer on `transport` at once. */
  constructor(transport: Transport, options: Libp2pPeerOptions) {
    this.connection = new TransportConnection(transport, options.client ? "outbound" : "inbound");
    this.closed = new Promise((resolve) => {
      this.connection.addEventListener("close", (event: StreamCloseEvent) => resolve(event.error), {
        once: true,
      });
    });
    this.muxer = yamux(options.init)().createStreamMuxer(
      this.connection as unknown as MuxerConnection,
    );
    const onStream = options.onStream ?? libp2pEcho;
    this.muxer.addEventListener("stream", (event) => onStream(event.detail));
  }

  /** Opens a stream (its SYN goes out in a microtask). */
  open(): Promise<Libp2pStream> {
    return this.muxer.createStream();
  }

  /** Pings the remote and resolves with the round-trip time in milliseconds. */
  ping(): Promise<number> {
    return this.muxer.ping();
  }

  /**
   * Graceful close as libp2p does it: the muxer half-closes every stream and waits for their
   * writes, sends GoAway(normal), then the connection is flushed and ended.
   */
  async close(): Promise<void> {
    await this.muxer.close();
    await this.connection.close();
  }

  /** Closes at once: streams are reset, GoAway(internal error) is sent, the transport closed. */
  abort(error: Error = new Error("aborted")): void {
    this.muxer.abort(error);
    this.connection.abort(error);
  }
}

/**
 * The libp2p side of the echo service: every message is sent back with backpressure, and the
 * remote's half-close is answered with ours once everything is echoed.
 */
export function libp2pEcho(stream: Libp2pStream): void {
  stream.addEventListener("message", (event) => {
    // Data after our close cannot be echoed; reset instead of throwing inside libp2p's dispatch.
    if (stream.writeStatus !== "writable") return stream.abort(new Error("data after end"));
    if (stream.send(event.data as unknown as Sendable)) return;
    stream.pause();
    stream.onDrain().then(() => {
      if (stream.readStatus === "paused") stream.resume();
    }, () => {});
  });
  stream.addEventListener("end", () => {
    stream.close().catch(() => {});
  });
}

/**
 * Sends `payload` on a libp2p stream with backpressure, closes its write side, and resolves with
 * everything received until the stream closed. Rejects if the stream is reset or aborted.
 */
export function libp2pRoundTrip(
  stream: Libp2pStream,
  payload: Uint8Array,
  chunkSize = 64 * 1024,
): Promise<Uint8Array> {
  const chunks: Uint8Array[] = [];
  let length = 0;
  const received = new Promise<Uint8Array>((resolve, reject) => {
    stream.addEventListener("message", (event) => {
      const chunk = toBytes(event.data);
      chunks.push(chunk);
      length += chunk.length;
    });
    stream.addEventListener("close", (event) => {
      if (event.error) return reject(event.error);
      const out = new Uint8Array(length);
      let at = 0;
      for (const chunk of chunks) {
        out.set(chunk, at);
        at += chunk.length;
      }
      resolve(out);
    }, { once: true });
  });
  const send = async () => {
    for (let offset = 0; offset < payload.length; offset += chunkSize) {
      if (!stream.send(payload.subarray(offset, offset + chunkSize))) await stream.onDrain();
    }
    await stream.close();
  };
  return Promise.all([received, send()]).then(([bytes]) => bytes);
}

/**
 * A {@linkcode Transport} over a connected `node:net` socket (made with `allowHalfOpen: true`),
 * kept apart from `transport/` so the libp2p side of a TCP test is independent of ours.
 */
export function socketTransport(socket: net.Socket): Transport {
  socket.pause();
  return {
    start(handlers) {
      socket.on("data", (chunk: Uint8Array) => handlers.data(chunk));
      socket.on("drain", () => handlers.drain());
      socket.on("end", () => handlers.end());
      socket.on("error", () => {}); // reported through close(hadError)
      socket.on(
        "close",
        (hadError) => handlers.close(hadError ? new Error("socket error") : undefined),
      );
      socket.resume();
    },
    write: (chunk) => socket.write(chunk),
    pause: () => void socket.pause(),
    resume: () => void socket.resume(),
    end: () => void socket.end(),
    close: () => void socket.destroy(),
    get bufferedAmount() {
      return socket.writableLength;
    },
    remoteAddress: `${socket.remoteAddress}:${socket.remotePort}`,
    localAddress: `${socket.localAddress}:${socket.localPort}`,
  };
}

/** Dials `hostname:port` with `node:net` and runs a libp2p-yamux client on the socket. */
export function connectLibp2pTcp(
  hostname: string,
  port: number,
  options: Omit<Libp2pPeerOptions, "client"> = {},
): Promise<Libp2pPeer> {
  return new Promise((resolve, reject) => {
    const socket = net.connect({ host: hostname, port, allowHalfOpen: true });
    socket.once("error", reject);
    socket.once("connect", () => {
      socket.off("error", reject);
      socket.setNoDelay(true);
      resolve(new Libp2pPeer(socketTransport(socket), { ...options, client: true }));
    });
  });
}

/** A `node:net` listener whose connections each get a libp2p-yamux server peer. */
export interface Libp2pTcpServer {
  /** The bound port. */
  readonly port: number;
  /** Every peer accepted so far. */
  readonly peers: Libp2pPeer[];
  /** Resolves with the next accepted peer not yet returned by `accept`, in accept order. */
  accept(): Promise<Libp2pPeer>;
  /** Stops listening and aborts every peer still open. */
  close(): Promise<void>;
}

/** Listens on `hostname:port` (0 for any free port) and serves libp2p-yamux on every connection. */
export function listenLibp2pTcp(
  hostname: string,
  port: number,
  options: Omit<Libp2pPeerOptions, "client"> = {},
): Promise<Libp2pTcpServer> {
  const peers: Libp2pPeer[] = [];
  const unclaimed: Libp2pPeer[] = [];
  const waiters: ((peer: Libp2pPeer) => void)[] = [];
  const server = net.createServer({ allowHalfOpen: true }, (socket) => {
    socket.setNoDelay(true);
    const peer = new Libp2pPeer(socketTransport(socket), { ...options, client: false });
    peers.push(peer);
    const waiter = waiters.shift();
    if (waiter) waiter(peer);
    else unclaimed.push(peer);
  });
  return new Promise((resolve, reject) => {
    server.once("error", reject);
    server.listen(port, hostname, () => {
      server.off("error", reject);
      resolve({
        port: (server.address() as net.AddressInfo).port,
        peers,
        accept: () => {
          const peer = unclaimed.shift();
          return peer ? Promise.resolve(peer) : new Promise((resolve) => waiters.push(resolve));
        },
        close: () =>
          new Promise<void>((done) => {
            for (const peer of peers) peer.abort();
            server.close(() => done());
          }),
      });
    });
  });
}
