/**
 * Reused byte buffers for the relay path, so a bulk transfer does not leave a trail of dead 64 KiB
 * buffers behind it. Those are external memory to the JavaScript engine, freed only when it next
 * collects garbage, and it collects for external memory only after some 64 MB more of it: that
 * was the daemon's peak during one bulk transfer (docs/performance.md, "Memory during a bulk
 * transfer").
 *
 * A pooled buffer carries a count of **claims**. {@linkcode BufferPool.acquire} hands one out with
 * one claim; whoever holds a view of it and keeps it past the current call holds a claim
 * ({@linkcode retainBytes}); {@linkcode releaseBytes} gives one back, and the buffer returns to its
 * pool when the last is given back. The rules that keep this safe:
 *
 * - **Forgetting to release is always safe**: the buffer is then collected as garbage, as if it had
 *   never been pooled. So is {@linkcode forgetBytes}, which takes a buffer out of the pool's
 *   accounting for good; a chunk handed to code that does not follow these rules is forgotten first
 *   (see `TransportHandlers.releases`).
 * - **Releasing too early corrupts data**: the buffer is reused while someone still reads it. Only
 *   the hot path releases (the session after decoding a chunk, a transport once a chunk is written,
 *   a stream once a queued chunk is copied into a batch), each for a claim it was given.
 *
 * Views of unpooled memory are ignored by every function here, so callers need not know where a
 * chunk came from. With `TUNNELMUX_POOL_POISON=1` in the environment (the test suite sets it), a
 * buffer is filled with {@linkcode POISON} when it returns and checked when handed out again, and a
 * release without a claim throws: a view used after its release then shows up as corrupted data,
 * and a write into a returned buffer as an error.
 *
 * @example
 * ```ts
 * import { BufferPool, releaseBytes, retainBytes } from "./buffer_pool.ts";
 * const pool = new BufferPool(1024, 4);
 * const bytes = pool.acquire(); // one claim
 * retainBytes(bytes.subarray(0, 10)); // a second holder of a view
 * releaseBytes(bytes);
 * releaseBytes(bytes); // the last claim: back in the pool
 * console.assert(pool.free === 1);
 * ```
 *
 * @module
 */

import { readEnv } from "../host/runtime.ts";

/** The byte a returned buffer is filled with when poisoning is on. */
export const POISON = 0xdb;

/** A pooled buffer's bookkeeping, reused with it. */
class Entry {
  /** Outstanding claims; 0 while it waits in its pool. */
  claims = 0;
  /** Filled with the poison byte when it came back (poisoning was on then). */
  poisoned = false;
  constructor(readonly pool: BufferPool, readonly bytes: Uint8Array<ArrayBuffer>) {}
}

// Keyed by the backing ArrayBuffer, so any view finds its buffer; weak, so a forgotten or leaked
// buffer is collected with its entry.
const entries = new WeakMap<ArrayBufferLike, Entry>();

let poison = readEnv("TUNNELMUX_POOL_POISON") === "1";

/**
 * Turns poisoning on or off for this process (tests): see the module notes. Returns the previous
 * setting.
 */
export function poisonReleasedBuffers(on: boolean): boolean {
  const was = poison;
  poison = on;
  return was;
}

/** A bounded free list of equal-size buffers. */
export class BufferPool {
  /** Size of every buffer handed out. */
  readonly size: number;
  /** Buffers kept for reuse at most; more returned ones are freed at once (detached). */
  readonly maxFree: number;
  #free: Entry[] = [];
  /** Buffers created, for tests and measurements. */
  created = 0;
  /**
   * Releases and claims that came after a buffer's last claim was given back: each is a bug that
   * may have corrupted data (with poisoning on they throw instead). Exported as a metric.
   */
  strays = 0;
  /** Buffers given back while the pool was full, and freed at once (see `freeNow`). */
  dropped = 0;

  /** A pool of `size`-byte buffers keeping at most `maxFree` of them while unused. */
  constructor(size: number, maxFree: number) {
    this.size = size;
    this.maxFree = maxFree;
  }

  /** Buffers waiting for reuse. */
  get free(): number {
    return this.#free.length;
  }

  /** A buffer of {@linkcode size} bytes with one claim, its contents undefined. */
  acquire(): Uint8Array<ArrayBuffer> {
    let entry = this.#free.pop();
    if (entry === undefined) {
      // Not zero-filled: whoever takes it writes before reading (a socket read, a batch).
      entry = new Entry(this, new Uint8Array(new ArrayBuffer(this.size)));
      entries.set(entry.bytes.buffer, entry);
      this.created++;
    } else if (poison && entry.poisoned) {
      // Only what came back poisoned can be checked: poisoning may have been turned on since.
      checkPoison(entry.bytes);
    }
    entry.claims = 1;
    return entry.bytes;
  }

  /**
   * Takes `bytes`, a buffer allocated elsewhere and covering its whole ArrayBuffer, into the
   * pool's accounting with one claim, as if {@linkcode acquire} had handed it out, so that it is
   * freed (or kept) when its last claim comes back. For reads an engine allocates fresh for each
   * call (Bun's sockets). A pool that keeps none (`maxFree` 0) adopts any size, others only their
   * own. Returns false, and does nothing, for a view of part of a buffer, a size the pool would
   * keep wrong, or a buffer already tracked.
   */
  adopt(bytes: Uint8Array<ArrayBuffer>): boolean {
    const buffer = bytes.buffer;
    if (bytes.byteOffset !== 0 || bytes.byteLength !== buffer.byteLength) return false;
    if (this.maxFree > 0 && buffer.byteLength !== this.size) return false;
    if (entries.has(buffer)) return false;
    const entry = new Entry(this, bytes);
    entry.claims = 1;
    entries.set(buffer, entry);
    return true;
  }

  /** @internal The last claim was given back. */
  _return(entry: Entry): void {
    if (this.#free.length >= this.maxFree) {
      entries.delete(entry.bytes.buffer);
      freeNow(entry.bytes.buffer);
      this.dropped++;
      return;
    }
    entry.poisoned = poison;
    if (poison) entry.bytes.fill(POISON);
    this.#free.push(entry);
  }
}

/**
 * Frees `buffer`'s memory now by detaching it (a zero-length transfer), instead of when the engine
 * next collects garbage: it collects for external memory only after tens of MiB more of it, so
 * the buffers a full pool turns away after a burst (a stream buffer drained) would otherwise still
 * be allocated when the next burst allocates new ones, and the process's peak grows by that much.
 * Nobody holds a claim on it, so nobody may read it; a stray view sees an empty buffer.
 */
function freeNow(buffer: ArrayBuffer): void {
  // An engine without it (Node 20, where the SDK runs) leaves the buffer to the collector, without
  // throwing and catching a TypeError for every buffer turned away.
  if (CAN_TRANSFER) buffer.transfer(0);
}

const CAN_TRANSFER = typeof ArrayBuffer.prototype.transfer === "function";

function checkPoison(bytes: Uint8Array): void {
  for (let i = 0; i < bytes.length; i++) {
    if (bytes[i] !== POISON) {
      throw new Error(`a pooled buffer was written at byte ${i} after its release`);
    }
  }
}

/** Adds a claim to the buffer under `view` (a holder keeps it past the current call). */
export function retainBytes(view: Uint8Array): void {
  const entry = entries.get(view.buffer);
  if (entry === undefined) return;
  if (entry.claims === 0) {
    entry.pool.strays++;
    if (poison) throw new Error("a claim taken on a pooled buffer after its release");
    return;
  }
  entry.claims++;
}

/** Gives back one claim on the buffer under `view`; the last one returns it to its pool. */
export function releaseBytes(view: Uint8Array): void {
  const entry = entries.get(view.buffer);
  if (entry === undefined) return;
  if (entry.claims === 0) {
    entry.pool.strays++;
    if (poison) throw new Error("a pooled buffer released more often than claimed");
    return;
  }
  if (--entry.claims === 0) entry.pool._return(entry);
}

/**
 * Takes the buffer under `view` out of the pool's accounting for good: it is collected as garbage
 * once unreachable, and later releases of it do nothing. For chunks handed to code that keeps
 * views without following the rules above.
 */
export function forgetBytes(view: Uint8Array): void {
  const entry = entries.get(view.buffer);
  if (entry === undefined || entry.claims === 0) return;
  entries.delete(view.buffer);
}

// Views whose buffer holds free bytes right in front of them, and how many (offerFrontRoom).
const rooms = new WeakMap<Uint8Array, number>();

/**
 * Says that the `room` bytes of `view`'s pooled buffer right in front of `view` are free: nobody
 * holds or will be handed a view of them (a socket read made that far into its buffer; a frame
 * header already decoded). The first writer that frames this very view whole may put its header
 * there with {@linkcode takeFrontRoom} instead of copying `view` into a frame. Does nothing for
 * unpooled memory.
 */
export function offerFrontRoom(view: Uint8Array, room: number): void {
  const entry = entries.get(view.buffer);
  if (entry !== undefined && entry.claims > 0 && view.byteOffset >= room) rooms.set(view, room);
}

/** Whether `room` bytes in front of `view` are on offer ({@linkcode offerFrontRoom}), untaken. */
export function hasFrontRoom(view: Uint8Array, room: number): boolean {
  return (rooms.get(view) ?? 0) >= room;
}

/**
 * `view` widened by `room` free bytes in front of it, for a header written there, when that many
 * were offered for this very view ({@linkcode offerFrontRoom}) and its buffer is still handed out;
 * undefined otherwise (then copy). Once only: the offer is used up, so no two frames ever share
 * the room. The widened view carries `view`'s claims.
 */
export function takeFrontRoom(view: Uint8Array, room: number): Uint8Array | undefined {
  const offered = rooms.get(view);
  if (offered === undefined || offered < room) return undefined;
  const entry = entries.get(view.buffer);
  if (entry === undefined || entry.claims === 0) return undefined;
  rooms.delete(view);
  return new Uint8Array(view.buffer, view.byteOffset - room, room + view.length);
}

/** Whether `view` lies in a pooled buffer that is currently handed out (tests). */
export function isPooled(view: Uint8Array): boolean {
  return (entries.get(view.buffer)?.claims ?? 0) > 0;
}

/**
 * The process's pool for socket reads and write batches: 64 KiB of payload plus room for a
 * batch's frame headers. At most 64 idle buffers (4 MiB) are kept.
 */
export const relayBuffers: BufferPool = new BufferPool(64 * 1024 + 1024, 64);

/**
 * The process's pool for Deno's socket reads while a bulk transfer comes (256 KiB, one yamux data
 * frame) and for write batches larger than {@linkcode relayBuffers}' (a session's batch carries up
 * to 256 KiB of data, plus frame headers and control frames). At most 8 idle buffers (2 MiB) are
 * kept.
 */
export const bulkBuffers: BufferPool = new BufferPool(256 * 1024 + 4096, 8);

/**
 * Socket reads that Bun allocates fresh for every call ({@linkcode BufferPool.adopt}): none is
 * kept, each is freed as soon as its last claim comes back instead of waiting for a collection.
 */
export const adoptedReads: BufferPool = new BufferPool(0, 0);

/**
 * A pooled buffer of at least `size` bytes from the smallest pool that has them, or undefined when
 * none does.
 */
export function acquireAtLeast(size: number): Uint8Array<ArrayBuffer> | undefined {
  if (size <= relayBuffers.size) return relayBuffers.acquire();
  if (size <= bulkBuffers.size) return bulkBuffers.acquire();
  return undefined;
}
