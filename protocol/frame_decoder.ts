/**
 * Incremental, synchronous frame parser. Transport chunks go in as they arrive; headers come out as
 * plain numbers and Data payloads as zero-copy views of the chunks (a payload split across chunks
 * arrives as several views). No promise, closure or copy per frame: only a header that straddles
 * two chunks is copied, into a reused 12-byte buffer.
 *
 * @module
 */

import { FrameType, HEADER_LENGTH, PROTOCOL_VERSION } from "./constants.ts";
import { readUint32 } from "./header.ts";
import { offerFrontRoom, releaseBytes, retainBytes } from "../util/bytes/buffer_pool.ts";

/** A Data payload at least this large, right behind its header, is offered the header's room. */
const OFFER_ROOM_FROM = 8 * 1024;

/**
 * Data frames at least this large make {@linkcode FrameDecoder.readLimit} expect the next frame to
 * be as large; after smaller ones it has no wish (reads that stop at each small frame would cost
 * a system call per frame).
 */
const ALIGN_FROM = 8 * 1024;

/** Receives what {@linkcode FrameDecoder} parses. */
export interface FrameSink {
  /**
   * A header arrived. For a Data frame its payload follows through {@linkcode payload} and
   * {@linkcode payloadEnd}; call {@linkcode FrameDecoder.stop} from here to reject the frame before
   * any payload byte is looked at.
   */
  frame(type: number, flags: number, streamId: number, length: number): void;
  /** A piece of the current Data frame's payload (a view into a transport chunk). */
  payload(view: Uint8Array): void;
  /** The current Data frame's payload is complete (called at once for an empty Data frame). */
  payloadEnd(): void;
  /** The byte stream is not yamux: a bad version or an unknown frame type. Decoding has stopped. */
  malformed(reason: "bad_version" | "unknown_type", detail: string): void;
}

/**
 * Splits a yamux byte stream into frames for a {@linkcode FrameSink}.
 *
 * @example
 * ```ts
 * import { FrameDecoder } from "./frame_decoder.ts";
 * const seen: number[] = [];
 * const decoder = new FrameDecoder({
 *   frame: (type) => seen.push(type),
 *   payload: () => {},
 *   payloadEnd: () => {},
 *   malformed: () => {},
 * });
 * decoder.push(new Uint8Array([0, 2, 0, 1, 0, 0, 0, 0, 0, 0, 0, 7])); // a ping
 * console.assert(seen[0] === 2);
 * ```
 */
export class FrameDecoder {
  readonly #sink: FrameSink;
  readonly #header = new Uint8Array(HEADER_LENGTH);
  #headerFill = 0;
  #payloadRemaining = 0;
  // The current Data frame's header lay in the chunk its payload starts in, right in front of it.
  #headerInChunk = false;
  #stopped = false;
  #held = false;
  // The length of the last Data frame, taken for the next one's (see readLimit).
  #lastDataLength = 0;
  /** Input not decoded yet because the decoder is held (a view of the chunk, not a copy). */
  #rest: Uint8Array | undefined;

  /** Creates a decoder that reports to `sink`. */
  constructor(sink: FrameSink) {
    this.#sink = sink;
  }

  /** True once {@linkcode stop} was called or the input was malformed. */
  get stopped(): boolean {
    return this.#stopped;
  }

  /** Stops decoding for good; the rest of the current chunk and all later ones are ignored. */
  stop(): void {
    this.#stopped = true;
  }

  /** True while {@linkcode hold} is in effect. */
  get held(): boolean {
    return this.#held;
  }

  /**
   * Stops decoding after the current frame and keeps the rest of the input for
   * {@linkcode release}: the sink uses it to stop reading a peer whose frames it cannot answer
   * now. Input pushed while held is appended (copied) to what is kept.
   */
  hold(): void {
    this.#held = true;
  }

  /** Ends a {@linkcode hold} and decodes the input kept meanwhile (which may hold again). */
  release(): void {
    if (!this.#held) return;
    this.#held = false;
    const rest = this.#rest;
    this.#rest = undefined;
    if (rest === undefined) return;
    this.push(rest);
    releaseBytes(rest);
  }

  /**
   * How many bytes the next read should take, at most `capacity`, to end at a frame's end: the rest
   * of the current Data payload and one more frame as long as the last one, if that was large
   * (a bulk transfer's frames are all alike). 0 for no wish. Frames no larger than a read then
   * arrive whole; one that a read cut, say after a control frame came between, is whole again
   * from the next read on.
   */
  readLimit(capacity: number): number {
    if (this.#lastDataLength < ALIGN_FROM || this.#headerFill > 0 || this.#held) return 0;
    return Math.min(capacity, this.#payloadRemaining + HEADER_LENGTH + this.#lastDataLength);
  }

  /** Feeds the next chunk of the byte stream. */
  push(chunk: Uint8Array): void {
    if (this.#held) {
      this.#keep(chunk);
      return;
    }
    const sink = this.#sink;
    const end = chunk.length;
    let pos = 0;
    while (pos < end && !this.#stopped) {
      if (this.#held) {
        this.#keep(chunk.subarray(pos));
        return;
      }
      if (this.#payloadRemaining > 0) {
        const n = Math.min(this.#payloadRemaining, end - pos);
        this.#payloadRemaining -= n;
        const view = n === end && pos === 0 ? chunk : chunk.subarray(pos, pos + n);
        if (this.#headerInChunk) {
          this.#headerInChunk = false;
          // Its header, decoded, is dead: a relay may write its own frame header there and send
          // the payload as it lies (`util/bytes/buffer_pool.ts`). Large payloads only: the offer
          // costs a WeakMap entry.
          if (n >= OFFER_ROOM_FROM) offerFrontRoom(view, HEADER_LENGTH);
        }
        sink.payload(view);
        pos += n;
        if (this.#payloadRemaining === 0 && !this.#stopped) sink.payloadEnd();
        continue;
      }
      let source = chunk;
      let at = pos;
      this.#headerInChunk = false;
      if (this.#headerFill > 0 || end - pos < HEADER_LENGTH) {
        const n = Math.min(HEADER_LENGTH - this.#headerFill, end - pos);
        this.#header.set(chunk.subarray(pos, pos + n), this.#headerFill);
        this.#headerFill += n;
        pos += n;
        if (this.#headerFill < HEADER_LENGTH) return;
        this.#headerFill = 0;
        source = this.#header;
        at = 0;
      } else {
        pos += HEADER_LENGTH;
        this.#headerInChunk = true;
      }
      if (source[at] !== PROTOCOL_VERSION) {
        this.#stopped = true;
        sink.malformed("bad_version", `unsupported protocol version ${source[at]}`);
        return;
      }
      const type = source[at + 1];
      if (type > FrameType.GoAway) {
        this.#stopped = true;
        sink.malformed("unknown_type", `unknown frame type ${type}`);
        return;
      }
      const flags = (source[at + 2] << 8) | source[at + 3];
      const streamId = readUint32(source, at + 4);
      const length = readUint32(source, at + 8);
      sink.frame(type, flags, streamId, length);
      if (type === FrameType.Data && !this.#stopped) {
        this.#lastDataLength = length;
        if (length === 0) sink.payloadEnd();
        else this.#payloadRemaining = length;
      }
    }
  }

  #keep(bytes: Uint8Array): void {
    if (this.#stopped || bytes.length === 0) return;
    if (this.#rest === undefined) {
      // Kept past push(): a claim of its own on a pooled chunk (util/bytes/buffer_pool.ts).
      retainBytes(bytes);
      this.#rest = bytes;
      return;
    }
    const joined = new Uint8Array(this.#rest.length + bytes.length);
    joined.set(this.#rest);
    joined.set(bytes, this.#rest.length);
    releaseBytes(this.#rest);
    this.#rest = joined;
  }
}
