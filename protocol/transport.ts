/**
 * The byte-stream contract the yamux engine needs from beneath it. Runtime adapters (Deno, Bun,
 * node:net, in-memory, WebSocket) implement it; nothing above this interface knows which runtime
 * or socket kind carries the bytes.
 *
 * @module
 */

/** Callbacks a transport calls. Set once through {@linkcode Transport.start}. */
export interface TransportHandlers {
  /**
   * Bytes arrived. The chunk is handed over: the transport never reuses or mutates its memory after
   * the call, so the receiver may keep zero-copy views of it. With {@linkcode releases} set, the
   * chunk may lie in a pooled buffer and carries one claim on it (`util/bytes/buffer_pool.ts`), and
   * it may offer the free bytes in front of it to a writer that frames it whole (`offerFrontRoom`:
   * a session sending it on writes its header there instead of copying the chunk).
   */
  data(chunk: Uint8Array): void;
  /**
   * The handler follows the claim rules of `util/bytes/buffer_pool.ts`: it gives a chunk's claim
   * back with `releaseBytes` once it keeps no view of it, or passes it on with the chunk to a
   * {@linkcode Transport.write} or `Stream.write`, and never reads a chunk after either. Without
   * it, pooled chunks are taken out of their pool before the handler sees them, and it may keep
   * views for as long as it likes.
   */
  readonly releases?: boolean;
  /**
   * Optional: how many bytes the next read should take, asked by a transport that sizes its own
   * reads (Deno's) before each large one: it would read `preferred` bytes and can read up to
   * `capacity`. Returns a size up to `capacity`, or 0 to leave it at `preferred`. A framing asks
   * for reads that end where its frames do (a bulk transfer's frames then arrive whole, not cut
   * between two reads, which a relay would have to join or write in two pieces); a relay asks for
   * chunks no larger than its writer sends whole (one WebSocket message). It only sizes the read:
   * data is never held back for it.
   */
  readLimit?(preferred: number, capacity: number): number;
  /** The write buffer fell back under its high-water mark after {@linkcode Transport.write} returned false. */
  drain(): void;
  /** The peer half-closed its side: no more data will arrive, writes may still go out. */
  end(): void;
  /** The transport is closed and will call nothing more. `error` is set when it failed. */
  close(error?: Error): void;
}

/** A duplex byte stream with backpressure in both directions. */
export interface Transport {
  /** Starts delivering events to `handlers`. Data that arrived earlier is delivered first. */
  start(handlers: TransportHandlers): void;
  /**
   * Queues bytes for sending and takes ownership of `chunk` (the caller must not change it later).
   * A chunk in a pooled buffer brings one claim with it, which the transport gives back once the
   * bytes are written or dropped, if it keeps that accounting (`util/bytes/buffer_pool.ts`).
   * Returns false once the queued bytes reach the high-water mark; keep queueing only small control
   * data until `drain`. Writes after close are dropped.
   */
  write(chunk: Uint8Array): boolean;
  /**
   * The transport gives back the claim of a pooled chunk once it is written (see
   * {@linkcode write}), so a writer may build its chunks in pooled buffers and see them reused.
   * Absent: pooled memory written here is never reused, and writers use plain allocations instead.
   */
  readonly releasesWrites?: boolean;
  /**
   * A chunk of 16 KiB or more given to {@linkcode write} goes to the kernel as it lies, neither
   * copied nor joined to the chunks around it, and a small chunk written before it is a system call
   * of its own: a writer may send a frame's header and its large payload as two writes instead of
   * copying the payload in behind the header. Absent: writers copy.
   */
  readonly writesLargeAsIs?: boolean;
  /**
   * Bytes of its own framing the transport can write in front of a chunk instead of copying the
   * chunk into a frame (a WebSocket frame header), when the writer leaves them free: see
   * {@linkcode writeFramable}. Absent or 0: the transport frames by copying, if at all.
   */
  readonly headroom?: number;
  /**
   * Like {@linkcode write}, for a chunk whose buffer holds `headroom` bytes of the writer's, free,
   * right in front of it (the writer allocated them with the chunk and never uses them): the
   * transport may write its frame header there and change the chunk in place (a WebSocket client
   * masks it). Present only where `headroom` is.
   */
  writeFramable?(chunk: Uint8Array): boolean;
  /**
   * The largest chunk {@linkcode writeFramable} frames in place (a WebSocket transport's message
   * size); a larger one is split and copied. Writers keep their chunks under it.
   */
  readonly framableSize?: number;
  /**
   * Before {@linkcode start}: calls `ready` once the peer's first bytes have arrived (held for the
   * handlers) or a turn of the event loop found none, so a relay can send what the peer spoke
   * first together with its own opening (a stream's SYN and header) in one write. Absent where the
   * runtime reads only once started: call on at once.
   */
  whenFirstRead?(ready: () => void): void;
  /** Stops reading from the peer (kernel buffers fill and TCP pushes back) until {@linkcode resume}. */
  pause(): void;
  /** Resumes reading after {@linkcode pause}. */
  resume(): void;
  /** Half-closes: flushes queued bytes, then signals end of data to the peer. */
  end(): void;
  /** Closes both directions now, dropping queued bytes. Idempotent. */
  close(): void;
  /** Bytes accepted by `write` and not yet handed to the operating system. */
  readonly bufferedAmount: number;
  /** The peer's address as `host:port` (IPv6 in brackets), or a descriptive name. */
  readonly remoteAddress: string;
  /** The local address as `host:port`, or a descriptive name. */
  readonly localAddress: string;
}

/** A bound listener that produces transports. */
export interface TransportListener {
  /** The bound address; `port` is the real one when 0 was asked for. */
  readonly hostname: string;
  /** The bound port. */
  readonly port: number;
  /**
   * Stops accepting at once; established transports stay open. Resolves once the address can be
   * bound again (on Deno that is a turn of the event loop later), so a daemon restarted in the same
   * process finds its ports free. Idempotent: every call answers the same.
   */
  close(): Promise<void>;
}
