/**
 * In-memory {@linkcode Transport} pairs for tests: TCP-like semantics (asynchronous delivery,
 * pause, half-close, backpressure) with control over how the byte stream is chunked, so framing
 * code can be fed frames split at arbitrary boundaries or glued together.
 *
 * @module
 */

import type { Transport, TransportHandlers } from "../protocol/transport.ts";
import { EventSink } from "./io/event_sink.ts";
import { WriteGate } from "./io/write_gate.ts";
import { prng } from "../util/crypto/prng.ts";
import { releaseBytes, retainBytes } from "../util/bytes/buffer_pool.ts";

/** Options for {@linkcode memoryPair}. */
export interface MemoryPairOptions {
  /** Undelivered bytes at which a side's `write` returns false. Default 1 MiB. */
  highWaterMark?: number;
  /**
   * Re-splits the byte stream, ignoring write boundaries. A function gets the bytes waiting and
   * returns the next chunk's size (clamped to 1..waiting); `{ seed }` uses a seeded generator with
   * sizes up to `maxChunk` (default 4096), often tiny, so runs are reproducible.
   */
  split?: ((available: number) => number) | { seed: number; maxChunk?: number };
  /** Delivers everything waiting as one chunk, as a busy socket would. Ignored with `split`. */
  coalesce?: boolean;
  /** When deliveries run: after the current microtask queue (default) or on a later timer tick. */
  delivery?: "microtask" | "macrotask";
}

function chunkSizer(options: MemoryPairOptions): ((available: number) => number) | undefined {
  const split = options.split;
  if (!split) return undefined;
  if (typeof split === "function") return split;
  const random = prng(split.seed);
  const maxChunk = split.maxChunk ?? 4096;
  // A quarter of the chunks are 1-8 bytes: frame headers split mid-field are the interesting case.
  return () => random() < 0.25 ? 1 + Math.floor(random() * 8) : 1 + Math.floor(random() * maxChunk);
}

/**
 * Two connected in-memory transports. Each side's writes reach the other asynchronously; a side
 * closes itself once it has ended and seen the peer's end; `close()` on one side drops what it had
 * not delivered yet and closes the other side too (without an error).
 */
export function memoryPair(options: MemoryPairOptions = {}): [Transport, Transport] {
  const a = new MemoryTransport("memory:a", options);
  const b = new MemoryTransport("memory:b", options);
  a.connect(b);
  b.connect(a);
  return [a, b];
}

class MemoryTransport implements Transport {
  readonly localAddress: string;
  readonly remoteAddress: string;

  #peer!: MemoryTransport;
  #sink: EventSink;
  #gate: WriteGate;
  #sizer: ((available: number) => number) | undefined;
  #coalesce: boolean;
  #macrotask: boolean;
  // Bytes the peer wrote that this side has not delivered yet; they count as the peer's buffer.
  #inbound: Uint8Array[] = [];
  #inboundBytes = 0;
  #peerEnded = false;
  #scheduled = false;

  constructor(name: string, options: MemoryPairOptions) {
    this.localAddress = name;
    this.remoteAddress = name === "memory:a" ? "memory:b" : "memory:a";
    this.#gate = new WriteGate(options.highWaterMark);
    this.#sizer = chunkSizer(options);
    this.#coalesce = options.coalesce ?? false;
    this.#macrotask = options.delivery === "macrotask";
    this.#sink = new EventSink({
      endDelivered: () => this.#maybeFinish(),
      handlerFailed: (error) => this.#abort(error),
    });
  }

  connect(peer: MemoryTransport): void {
    this.#peer = peer;
  }

  get bufferedAmount(): number {
    return this.#sink.closed ? 0 : this.#peer.#inboundBytes;
  }

  start(handlers: TransportHandlers): void {
    this.#sink.start(handlers);
    this.#schedule();
  }

  write(chunk: Uint8Array): boolean {
    if (!this.#gate.open(this.#sink.closed)) return false;
    const peer = this.#peer;
    if (chunk.length > 0 && !peer.#sink.closed) {
      peer.#inbound.push(chunk);
      peer.#inboundBytes += chunk.length;
      peer.#schedule();
    }
    return this.#gate.underMark(this.bufferedAmount);
  }

  pause(): void {
    this.#sink.pause();
  }

  resume(): void {
    this.#sink.resume();
    this.#schedule();
  }

  end(): void {
    if (!this.#gate.end(this.#sink.closed)) return;
    this.#peer.#peerEnded = true;
    this.#peer.#schedule();
    this.#maybeFinish();
  }

  close(): void {
    this.#abort(undefined);
  }

  // Like closing a socket: this side reports `error`, the peer sees a plain close.
  #abort(error: Error | undefined): void {
    if (this.#sink.closed) return;
    this.#closeSelf(error);
    const peer = this.#peer;
    if (!peer.#sink.closed) peer.#closeSelf(undefined);
  }

  #closeSelf(error?: Error): void {
    this.#inbound = [];
    this.#inboundBytes = 0;
    this.#sink.close(error);
  }

  #maybeFinish(): void {
    if (this.#gate.ending && this.#sink.endDelivered) this.#closeSelf();
  }

  #schedule(): void {
    if (this.#scheduled || this.#sink.closed) return;
    this.#scheduled = true;
    const run = () => {
      this.#scheduled = false;
      this.#deliver();
    };
    if (this.#macrotask) setTimeout(run, 0);
    else queueMicrotask(run);
  }

  #deliver(): void {
    while (!this.#sink.paused && !this.#sink.closed && this.#inboundBytes > 0) {
      const piece = this.#nextPiece();
      this.#inboundBytes -= piece.length;
      this.#peer.#delivered();
      this.#sink.data(piece);
    }
    if (
      this.#peerEnded && this.#inboundBytes === 0 && !this.#sink.paused && !this.#sink.closed &&
      !this.#sink.endDelivered
    ) {
      this.#sink.end();
    }
  }

  // The writer's buffer shrank: tell it when it fell under its mark after a refused write.
  #delivered(): void {
    if (this.#gate.drainDue(this.bufferedAmount)) this.#sink.drain();
  }

  #nextPiece(): Uint8Array {
    let size: number;
    if (this.#sizer) {
      size = Math.max(1, Math.min(this.#inboundBytes, Math.floor(this.#sizer(this.#inboundBytes))));
    } else if (this.#coalesce) {
      size = this.#inboundBytes;
    } else {
      size = this.#inbound[0].length;
    }
    const first = this.#inbound[0];
    if (size <= first.length) {
      // Written chunks were handed over, so zero-copy views of them are safe to deliver; a chunk
      // in a pooled buffer brought its claim, which the last piece carries on, so an earlier
      // piece takes one of its own (util/bytes/buffer_pool.ts).
      if (size === first.length) {
        this.#inbound.shift();
        return first;
      }
      this.#inbound[0] = first.subarray(size);
      const piece = first.subarray(0, size);
      retainBytes(piece);
      return piece;
    }
    const out = new Uint8Array(size);
    let offset = 0;
    while (offset < size) {
      const head = this.#inbound[0];
      const take = Math.min(head.length, size - offset);
      out.set(head.subarray(0, take), offset);
      offset += take;
      if (take === head.length) {
        this.#inbound.shift();
        // Copied out whole: its claim, if pooled, ends here.
        releaseBytes(head);
      } else {
        this.#inbound[0] = head.subarray(take);
      }
    }
    return out;
  }
}
