/**
 * The outgoing queue of the transports that buffer for themselves (Deno and Bun TCP, WebSocket).
 * It keeps the claims of pooled chunks (`util/bytes/buffer_pool.ts`) as they pass: a chunk copied
 * into a joined piece is given back at once, and a piece handed out as a view of a chunk that stays
 * queued gets a claim of its own.
 *
 * @module
 */

import { acquireAtLeast, releaseBytes, retainBytes } from "../../util/bytes/buffer_pool.ts";

/** Joined pieces larger than this come from the relay pools (see `ChunkQueue.takeJoined`). */
const POOLED_JOIN = 4 * 1024;

/** Default high-water mark for queued outgoing bytes (1 MiB). */
export const DEFAULT_HIGH_WATER_MARK = 1024 * 1024;

/**
 * Largest TCP write built by joining queued chunks: joining saves syscalls for many small frames,
 * the cap keeps a backlog from being copied into one huge allocation.
 */
export const MAX_BATCH = 256 * 1024;

/**
 * Chunks at least this long go to the socket alone and whole: a syscall costs less than copying
 * them, so only smaller ones (control frames, small writes) are joined.
 */
export const JOIN_BELOW = 16 * 1024;

/**
 * Outgoing bytes as a FIFO of owned chunks, handed out in pieces of a bounded size: syscall-sized
 * batches for TCP, messages for WebSocket. Small chunks are joined (fewer syscalls or messages),
 * a large head chunk is handed out as views (no copy).
 */
export class ChunkQueue {
  // Queued chunks are #chunks[#head] to #chunks[#tail - 1]; slots outside hold undefined. The
  // array is kept when the queue empties (the indices go back to 0): a new array, or a length set
  // to 0, would allocate again at the next push, on every round trip of a request and answer.
  #chunks: (Uint8Array | undefined)[] = [];
  #head = 0;
  #tail = 0;
  #bytes = 0;

  /** Queued bytes not yet taken. */
  get bytes(): number {
    return this.#bytes;
  }

  /** True when nothing is queued. */
  get empty(): boolean {
    return this.#bytes === 0;
  }

  /** Appends a chunk; the queue now owns it. Empty chunks are ignored. */
  push(chunk: Uint8Array): void {
    if (chunk.length === 0) return;
    this.#chunks[this.#tail++] = chunk;
    this.#bytes += chunk.length;
  }

  /** Puts a piece the socket refused back in front, to go out first. */
  unshift(message: Uint8Array): void {
    if (message.length === 0) return;
    if (this.#head > 0) {
      this.#chunks[--this.#head] = message;
    } else {
      this.#chunks.splice(0, 0, message);
      this.#tail++;
    }
    this.#bytes += message.length;
  }

  /**
   * Removes and returns the next piece of at most `max` bytes: a view of the head chunk when it
   * fills the piece alone (no copy), otherwise the next chunks joined, the last one possibly cut.
   */
  take(max: number): Uint8Array {
    const first = this.#chunks[this.#head]!;
    if (first.length >= max) {
      const out = first.subarray(0, max);
      // The rest stays queued, so the piece needs a claim of its own when it leaves.
      if (first.length > max) retainBytes(out);
      this.#consumeHead(first, max);
      return out;
    }
    const size = Math.min(this.#bytes, max);
    if (size === first.length) {
      this.#consumeHead(first, first.length);
      return first;
    }
    const out = new Uint8Array(size);
    let offset = 0;
    while (offset < size) {
      const chunk = this.#chunks[this.#head]!;
      const n = Math.min(chunk.length, size - offset);
      out.set(n === chunk.length ? chunk : chunk.subarray(0, n), offset);
      offset += n;
      this.#consumeHead(chunk, n);
      if (n === chunk.length) releaseBytes(chunk);
    }
    return out;
  }

  /**
   * Removes and returns the next write for a stream socket, which may take any part of it (the
   * adapter keeps the rest). A head chunk of at least {@linkcode JOIN_BELOW} bytes goes out whole,
   * whatever its size: cut at a fixed size, its tail would be joined to the next chunk, copying
   * every byte of a bulk transfer (a mux batch is 256 KiB plus frame headers). Smaller chunks are
   * joined up to `max` bytes, stopping before a large one, which then goes out alone.
   */
  takeWrite(max: number): Uint8Array {
    const chunks = this.#chunks;
    const first = chunks[this.#head]!;
    let end = this.#head;
    let size = 0;
    while (
      end < this.#tail && chunks[end]!.length < JOIN_BELOW && size + chunks[end]!.length <= max
    ) {
      size += chunks[end++]!.length;
    }
    if (end - this.#head <= 1) {
      this.#consumeHead(first, first.length);
      return first;
    }
    return this.#joinInto(new Uint8Array(size));
  }

  /**
   * Removes and returns the next write for a runtime where a write costs more than copying 64 KiB
   * (Deno, whose every write is an asynchronous op): the queued chunks are joined up to `max`
   * bytes whenever a small one (under {@linkcode JOIN_BELOW}) is among them, large ones included,
   * so a relay whose reads cut frames apart (a large piece and a small one per read) writes once
   * per frame, not twice. Only large chunks queued go out one by one, whole. A joined piece of
   * more than 4 KiB comes from the relay pools and carries their claim.
   */
  takeJoined(max: number): Uint8Array {
    const chunks = this.#chunks;
    let end = this.#head;
    let size = 0;
    let small = false;
    while (end < this.#tail && size + chunks[end]!.length <= max) {
      if (chunks[end]!.length < JOIN_BELOW) small = true;
      size += chunks[end++]!.length;
    }
    if (!small || end - this.#head <= 1) return this.shift();
    const pooled = size > POOLED_JOIN ? acquireAtLeast(size)?.subarray(0, size) : undefined;
    return this.#joinInto(pooled ?? new Uint8Array(size));
  }

  /** Fills `out` with the whole chunks at the head (their sizes add up to its length). */
  #joinInto(out: Uint8Array): Uint8Array {
    for (let offset = 0; offset < out.length;) {
      // Not a saved `chunks`: taking the head may compact the queue into a new array.
      const chunk = this.#chunks[this.#head]!;
      out.set(chunk, offset);
      offset += chunk.length;
      this.#consumeHead(chunk, chunk.length);
      releaseBytes(chunk);
    }
    return out;
  }

  /**
   * The chunk `index` places behind the next one (0: the next, as it was pushed or its rest after a
   * partial take), without removing it; undefined past the last.
   */
  peek(index = 0): Uint8Array | undefined {
    const at = this.#head + index;
    return this.#bytes === 0 || at >= this.#tail ? undefined : this.#chunks[at]!;
  }

  /** Removes and returns the next chunk whole, the same array {@linkcode peek} shows. */
  shift(): Uint8Array {
    const first = this.#chunks[this.#head]!;
    this.#consumeHead(first, first.length);
    return first;
  }

  /** Drops everything (close discards unsent bytes). */
  clear(): void {
    this.#chunks = [];
    this.#head = 0;
    this.#tail = 0;
    this.#bytes = 0;
  }

  #consumeHead(chunk: Uint8Array, n: number): void {
    this.#bytes -= n;
    if (n < chunk.length) {
      this.#chunks[this.#head] = chunk.subarray(n);
      return;
    }
    this.#chunks[this.#head++] = undefined;
    // Keep take() O(1) amortised without letting the dead prefix grow with total traffic.
    if (this.#head === this.#tail) {
      this.#head = this.#tail = 0;
    } else if (this.#head > 1024 && this.#head * 2 > this.#tail) {
      const chunks = this.#chunks;
      const live = this.#tail - this.#head;
      for (let i = 0; i < live; i++) chunks[i] = chunks[this.#head + i];
      for (let i = live; i < this.#tail; i++) chunks[i] = undefined;
      this.#tail = live;
      this.#head = 0;
    }
  }
}
