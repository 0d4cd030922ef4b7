/**
 * The outgoing chunk queue of the socket adapters that do their own buffering (Deno, Bun).
 *
 * @module
 */

/**
 * Largest buffer built by joining queued chunks. Joining saves syscalls for many small frames; the
 * cap keeps a backlog of large writes from being copied into one huge allocation.
 */
export const MAX_BATCH = 256 * 1024;

/** Default high-water mark for queued outgoing bytes (1 MiB). */
export const DEFAULT_HIGH_WATER_MARK = 1024 * 1024;

/** FIFO of owned chunks with a byte count, handing out syscall-sized batches. */
export class WriteQueue {
  #chunks: Uint8Array[] = [];
  #head = 0;
  #bytes = 0;

  /** Queued bytes not yet taken. */
  get bytes(): number {
    return this.#bytes;
  }

  /** True when nothing is queued. */
  get empty(): boolean {
    return this.#head === this.#chunks.length;
  }

  /** Appends a chunk; the queue now owns it. */
  push(chunk: Uint8Array): void {
    this.#chunks.push(chunk);
    this.#bytes += chunk.length;
  }

  /**
   * Removes and returns the next bytes for one syscall: the head chunk alone when it is large or
   * alone, otherwise the head chunks joined up to {@linkcode MAX_BATCH}.
   */
  take(): Uint8Array {
    const first = this.#chunks[this.#head];
    let end = this.#head + 1;
    let size = first.length;
    while (end < this.#chunks.length && size + this.#chunks[end].length <= MAX_BATCH) {
      size += this.#chunks[end].length;
      end++;
    }
    let out: Uint8Array;
    if (end === this.#head + 1) {
      out = first;
    } else {
      out = new Uint8Array(size);
      let offset = 0;
      for (let i = this.#head; i < end; i++) {
        out.set(this.#chunks[i], offset);
        offset += this.#chunks[i].length;
      }
    }
    this.#head = end;
    this.#bytes -= size;
    this.#compact();
    return out;
  }

  /** Drops everything (close discards unsent bytes). */
  clear(): void {
    this.#chunks = [];
    this.#head = 0;
    this.#bytes = 0;
  }

  // Advancing a head index keeps take() O(1) amortised; shrink the array once the dead prefix
  // dominates so memory does not grow with total traffic.
  #compact(): void {
    if (this.#head === this.#chunks.length) {
      this.#chunks = [];
      this.#head = 0;
    } else if (this.#head > 1024 && this.#head * 2 > this.#chunks.length) {
      this.#chunks = this.#chunks.slice(this.#head);
      this.#head = 0;
    }
  }
}
