/**
 * RFC 6455 framing (§5): encoding single frames, and decoding a byte stream into whole messages
 * and control frames. Runtime-neutral and socket-free, so it is tested on its own; the client in
 * `ws/client.ts` puts it on a TCP or TLS transport.
 *
 * Not supported, on purpose: extensions (no RSV bits, so no permessage-deflate), and UTF-8
 * validation of text messages (the tunnel refuses text with 1003 anyway).
 *
 * @module
 */

import { acquireAtLeast, releaseBytes, retainBytes } from "../../util/bytes/buffer_pool.ts";
import { allocUnsafe } from "../../util/bytes/alloc_unsafe.ts";
import { currentRuntime } from "../../util/host/runtime.ts";

/** Frame opcodes (RFC 6455 §5.2). */
export const Opcode = {
  /** A later fragment of a fragmented message. */
  Continuation: 0x0,
  /** A text message (refused by the tunnel). */
  Text: 0x1,
  /** A binary message: the tunnel's bytes. */
  Binary: 0x2,
  /** The closing handshake. */
  Close: 0x8,
  /** A ping; answered with a pong carrying the same payload. */
  Ping: 0x9,
  /** A pong; ignored. */
  Pong: 0xa,
} as const;

/** Close code for a malformed frame (§7.4.1); {@linkcode FrameError} carries it. */
export const PROTOCOL_ERROR = 1002;
/** Close code for a message above the size limit (§7.4.1). */
export const MESSAGE_TOO_BIG = 1009;

/** Largest control frame payload (§5.5), and so largest close reason is this minus 2. */
const MAX_CONTROL_PAYLOAD = 125;

/**
 * Data frames at least this large make {@linkcode MessageDecoder.readLimit} expect the next frame
 * to be as large; after smaller ones it has no wish (a read per small frame would cost a system
 * call each).
 */
const ALIGN_FROM = 8 * 1024;

/** The peer broke the framing rules; `code` is the close code to answer with (1002 or 1009). */
export class FrameError extends Error {
  /** 1002 (protocol error) or 1009 (message too big). */
  readonly code: number;

  /** Describes the violation; `code` is the close code to send. */
  constructor(code: number, message: string) {
    super(message);
    this.name = "FrameError";
    this.code = code;
  }
}

// Masking keys come from a pool refilled in bulk: one getRandomValues per 1024 frames instead of
// one per frame, which mattered for the many tiny frames of a yamux session. Every frame still
// gets a fresh key (§5.3 wants them unpredictable; the pool comes from the CSPRNG).
const pool = new Uint8Array(4096);
let poolOffset = pool.length;

/** A fresh, unpredictable 4-byte masking key. */
export function randomMask(): Uint8Array {
  if (poolOffset === pool.length) {
    crypto.getRandomValues(pool);
    poolOffset = 0;
  }
  const mask = pool.slice(poolOffset, poolOffset + 4);
  poolOffset += 4;
  return mask;
}

// The key rotated to where the word loop starts, seen as one 32-bit and one 64-bit word: laid out
// in memory as the data bytes are, so the platform's byte order does not matter.
const keyBytes = new Uint8Array(8);
const keyWord = new Int32Array(keyBytes.buffer, 0, 1);
const keyWide = new BigUint64Array(keyBytes.buffer);
// V8 compiles a BigUint64Array XOR to 64-bit machine operations: twice the 32-bit loop's speed on
// a 64 KiB message (Deno 2.9: 3.9 against 7.6 µs). JavaScriptCore boxes each BigInt (Bun 1.4:
// 285 µs), and there the Int32Array loop is the fast one (3.2 µs; a Uint32Array's 6.3, as its
// words do not all fit a small integer). The loop takes sixteen words a turn: neither compiler
// unrolls it itself, and its own compare and branch cost more than the XORs (256 KiB in place in
// a 2 MiB set of buffers, medians of five processes: Deno 5.1 GB/s at four words a turn, 9.3 at
// sixteen; Bun 6.2 and 9.1; eight or thirty-two a turn no better on both).
const WIDE = currentRuntime() !== "bun";

/**
 * Writes each word of `from` XORed with `key` to `to` (the same array to do it in place), sixteen
 * words a turn. Words of either kind: 64-bit with a bigint key (V8) or 32-bit with a number
 * (JavaScriptCore), XORed alike at run time; a process only ever passes one kind.
 */
function xorWords(from: BigUint64Array | Int32Array, to: typeof from, key: bigint | number): void {
  const a = from as Int32Array;
  const b = to as Int32Array;
  const k = key as number;
  const count = a.length;
  let w = 0;
  for (const sixteen = count & ~15; w < sixteen; w += 16) {
    b[w] = a[w] ^ k;
    b[w + 1] = a[w + 1] ^ k;
    b[w + 2] = a[w + 2] ^ k;
    b[w + 3] = a[w + 3] ^ k;
    b[w + 4] = a[w + 4] ^ k;
    b[w + 5] = a[w + 5] ^ k;
    b[w + 6] = a[w + 6] ^ k;
    b[w + 7] = a[w + 7] ^ k;
    b[w + 8] = a[w + 8] ^ k;
    b[w + 9] = a[w + 9] ^ k;
    b[w + 10] = a[w + 10] ^ k;
    b[w + 11] = a[w + 11] ^ k;
    b[w + 12] = a[w + 12] ^ k;
    b[w + 13] = a[w + 13] ^ k;
    b[w + 14] = a[w + 14] ^ k;
    b[w + 15] = a[w + 15] ^ k;
  }
  for (; w < count; w++) b[w] = a[w] ^ k;
}

/** XORs `bytes` in place with `mask`, the first byte taking key byte 0 (the §5.3 transform). */
export function applyMask(bytes: Uint8Array, mask: Uint8Array): void {
  maskCopy(bytes, bytes, mask);
}

/**
 * Writes `src` XORed with `mask` into `dst` (as long as `src`, and lying at the same offset modulo
 * 8 in its buffer, so that both are read and written a word at a time; `src` itself to mask in
 * place): byte by byte up to a word boundary, then word-wise, then the tail, since a server's
 * payloads lie anywhere in a read and a message framed in place is only 4-aligned.
 */
function maskCopy(src: Uint8Array, dst: Uint8Array, mask: Uint8Array): void {
  const n = src.length;
  let i = 0;
  if (n >= 32) {
    const align = WIDE ? 8 : 4;
    const head = (align - (src.byteOffset & (align - 1))) & (align - 1);
    for (; i < head; i++) dst[i] = src[i] ^ mask[i & 3];
    for (let k = 0; k < 8; k++) keyBytes[k] = mask[(i + k) & 3];
    const from = WIDE
      ? new BigUint64Array(src.buffer, src.byteOffset + i, (n - i) >>> 3)
      : new Int32Array(src.buffer, src.byteOffset + i, (n - i) >>> 2);
    const to = dst === src
      ? from
      : WIDE
      ? new BigUint64Array(dst.buffer, dst.byteOffset + i, from.length)
      : new Int32Array(dst.buffer, dst.byteOffset + i, from.length);
    xorWords(from, to, WIDE ? keyWide[0] : keyWord[0]);
    i += from.length * from.BYTES_PER_ELEMENT;
  }
  for (; i < n; i++) dst[i] = src[i] ^ mask[i & 3];
}

/** The size of a frame's header for an `n`-byte payload, with or without a masking key. */
function headerSize(n: number, masked: boolean): number {
  return 2 + (n < 126 ? 0 : n < 0x10000 ? 2 : 8) + (masked ? 4 : 0);
}

/** Writes a frame header for an `n`-byte payload at the start of `out` (its masking key too). */
function writeHeader(
  out: Uint8Array,
  opcode: number,
  n: number,
  mask: Uint8Array | undefined,
  fin: boolean,
): void {
  out[0] = (fin ? 0x80 : 0) | opcode;
  const maskBit = mask ? 0x80 : 0;
  let at = 2;
  if (n < 126) {
    out[1] = maskBit | n;
  } else if (n < 0x10000) {
    out[1] = maskBit | 126;
    out[2] = n >>> 8;
    out[3] = n & 0xff;
    at = 4;
  } else {
    out[1] = maskBit | 127;
    const view = new DataView(out.buffer, out.byteOffset + 2, 8);
    view.setUint32(0, Math.floor(n / 0x1_0000_0000));
    view.setUint32(4, n >>> 0);
    at = 10;
  }
  if (mask) out.set(mask, at);
}

/**
 * Encodes one frame: header, masking key when `mask` is given (client frames must have one), then
 * the payload, masked, in a single buffer so it goes out in one write. `payload` is not changed.
 * `fin` false makes a non-final fragment.
 */
export function encodeFrame(
  opcode: number,
  payload: Uint8Array,
  mask?: Uint8Array,
  fin = true,
): Uint8Array {
  const size = headerSize(payload.length, mask !== undefined);
  // Pad in front so the payload starts 8-aligned in the buffer, for the word-wise mask above.
  const pad = (8 - (size % 8)) % 8;
  const room = new Uint8Array(new ArrayBuffer(pad + size + payload.length), pad + size);
  room.set(payload);
  return encodeFrameInPlace(opcode, room, mask, fin);
}

/** The most header bytes a frame has (a 64-bit length and a masking key). */
export const MAX_HEADER_SIZE = 14;

/**
 * The header alone of a final frame for an `n`-byte payload (a server's: no masking key), for a
 * payload written after it as it lies.
 */
export function encodeHeader(opcode: number, n: number): Uint8Array {
  const out = allocUnsafe(headerSize(n, false));
  writeHeader(out, opcode, n, undefined, true);
  return out;
}

/** The key as it stands `offset` bytes into a payload: where masking a later part starts. */
const rotatedKey = new Uint8Array(4);

/**
 * Encodes one final frame with `mask` (a client's) into `into`, which holds at least
 * `prefix.length` + `payload.length` + {@linkcode MAX_HEADER_SIZE} + 7 bytes: the header, then
 * the frame's payload, `prefix` (a few bytes, default none) followed by `payload`, masked on its
 * way in, in one pass over it. Neither is changed. Returns the frame, a view of `into` placed so
 * that the copy of `payload` lies as `payload` does modulo 8.
 */
export function encodeMaskedInto(
  opcode: number,
  payload: Uint8Array,
  mask: Uint8Array,
  into: Uint8Array,
  prefix?: Uint8Array,
): Uint8Array {
  const p = prefix === undefined ? 0 : prefix.length;
  const n = p + payload.length;
  const size = headerSize(n, true);
  const start = (payload.byteOffset - into.byteOffset - size - p) & 7;
  const frame = into.subarray(start, start + size + n);
  writeHeader(frame, opcode, n, mask, true);
  if (p === 0) {
    maskCopy(payload, frame.subarray(size), mask);
    return frame;
  }
  // The prefix is small and lies anywhere: byte by byte. The payload's bytes then take the key
  // from where the prefix left it.
  for (let i = 0; i < p; i++) frame[size + i] = prefix![i] ^ mask[i & 3];
  for (let k = 0; k < 4; k++) rotatedKey[k] = mask[(p + k) & 3];
  maskCopy(payload, frame.subarray(size + p), rotatedKey);
  return frame;
}

/**
 * Encodes one frame around `payload` without copying it: the header goes into the bytes in front
 * of `payload` in its buffer (which must be at least the header's size, at most
 * {@linkcode MAX_HEADER_SIZE}, and free to overwrite), and the payload is masked in place. Returns
 * the frame, a view over header and payload. The same bytes as {@linkcode encodeFrame}.
 */
export function encodeFrameInPlace(
  opcode: number,
  payload: Uint8Array,
  mask?: Uint8Array,
  fin = true,
): Uint8Array {
  const n = payload.length;
  const size = headerSize(n, mask !== undefined);
  if (payload.byteOffset < size) throw new RangeError("no room for the frame header in front");
  const frame = new Uint8Array(payload.buffer, payload.byteOffset - size, size + n);
  writeHeader(frame, opcode, n, mask, fin);
  if (mask) applyMask(payload, mask);
  return frame;
}

/** The payload of a close frame: the code, then the reason cut to fit the 125-byte limit. */
export function encodeClosePayload(code: number, reason = ""): Uint8Array {
  const text = new TextEncoder().encode(reason);
  let end = Math.min(text.length, MAX_CONTROL_PAYLOAD - 2);
  // Do not cut a UTF-8 sequence in half: back up over continuation bytes.
  while (end < text.length && end > 0 && (text[end] & 0xc0) === 0x80) end--;
  const payload = new Uint8Array(2 + end);
  payload[0] = code >>> 8;
  payload[1] = code & 0xff;
  payload.set(text.subarray(0, end), 2);
  return payload;
}

/** True for a close code a peer may send (§7.4.1–7.4.2): 1000–1003, 1007–1014, 3000–4999. */
function isSendableCloseCode(code: number): boolean {
  return (code >= 1000 && code <= 1003) || (code >= 1007 && code <= 1014) ||
    (code >= 3000 && code <= 4999);
}

/**
 * Reads a close frame's payload: no payload means 1005 (no status). A 1-byte payload or a code a
 * peer must not send is a protocol error.
 */
export function decodeClosePayload(payload: Uint8Array): { code: number; reason: string } {
  if (payload.length === 0) return { code: 1005, reason: "" };
  if (payload.length === 1) throw new FrameError(PROTOCOL_ERROR, "close frame with a 1-byte body");
  const code = (payload[0] << 8) | payload[1];
  if (!isSendableCloseCode(code)) {
    throw new FrameError(PROTOCOL_ERROR, `close frame with invalid code ${code}`);
  }
  return { code, reason: new TextDecoder().decode(payload.subarray(2)) };
}

/** Options for {@linkcode MessageDecoder}. */
export interface MessageDecoderOptions {
  /** Largest message (sum of its fragments); a bigger one fails with 1009 before it is buffered. */
  maxMessageSize: number;
  /** True to require masked frames (a server reading a client), false to forbid them. */
  masked: boolean;
  /**
   * The caller owns the chunks it pushes and follows the claim rules of
   * `util/bytes/buffer_pool.ts`: a masked payload is unmasked where it lies in the pushed chunk
   * instead of in a copy, a payload that spans chunks is gathered in a pooled buffer, and
   * `onMessage` takes a claim (`retainBytes`) on a payload it keeps past the call. Default false:
   * the chunk is not changed and every payload is the callee's to keep.
   */
  pooled?: boolean;
}

/**
 * Called for each whole message (opcode 1 or 2, fragments joined) and each control frame (8, 9,
 * 10), in order. The payload is owned by the callee.
 */
export type MessageHandler = (opcode: number, payload: Uint8Array) => void;

/**
 * Turns received bytes, split anywhere, into messages and control frames. Enforces the framing
 * rules a peer can break (reserved bits, unknown opcodes, masking, control frame size and
 * fragmentation, continuation order, the size limit) by throwing a {@linkcode FrameError}; after
 * that the decoder is spent and ignores further input.
 */
export class MessageDecoder {
  #maxMessageSize: number;
  #masked: boolean;
  #pooled: boolean;
  // The header being read: at most 2 + 8 + 4 bytes, gathered across chunks.
  #head = new Uint8Array(14);
  #headLength = 0;
  // The frame whose payload is being read.
  #inFrame = false;
  #fin = false;
  #opcode = 0;
  #mask: Uint8Array | undefined;
  #length = 0;
  // Set only when the payload spans chunks; a payload inside one chunk is a view of it.
  #payload: Uint8Array | undefined;
  #filled = 0;
  // The fragmented message in progress: its opcode (0 for none), parts and size so far.
  #messageOpcode = 0;
  #parts: Uint8Array[] = [];
  #messageLength = 0;
  #failed = false;
  // The last data frame's size on the wire, header included, taken for the next one's (readLimit).
  #lastFrameSize = 0;

  /** Creates a decoder with the given limit and masking rule. */
  constructor(options: MessageDecoderOptions) {
    this.#maxMessageSize = options.maxMessageSize;
    this.#masked = options.masked;
    this.#pooled = options.pooled ?? false;
  }

  /**
   * How many bytes the next read should take, at most `capacity`, to end at a frame's end: the rest
   * of the current frame and one more as large as the last, if that was large (a bulk transfer's
   * messages are all alike). 0 for no wish. A frame no larger than a read then arrives whole and
   * is handed on as a view of the read, not gathered into a buffer of its own.
   */
  readLimit(capacity: number): number {
    if (this.#lastFrameSize < ALIGN_FROM || this.#headLength > 0 || this.#failed) return 0;
    const rest = this.#inFrame ? this.#length - this.#filled : 0;
    return Math.min(capacity, rest + this.#lastFrameSize);
  }

  /**
   * Feeds received bytes; calls `onMessage` for everything they complete. Keeps views of `chunk`
   * (the transport hands chunks over), and unmasks into fresh memory, so `chunk` is not changed;
   * in pooled mode it unmasks in `chunk` and keeps no view of it past the call.
   */
  push(chunk: Uint8Array, onMessage: MessageHandler): void {
    if (this.#failed) return;
    try {
      this.#push(chunk, onMessage);
    } catch (error) {
      if (error instanceof FrameError) this.#failed = true;
      throw error;
    }
  }

  #push(chunk: Uint8Array, onMessage: MessageHandler): void {
    let offset = 0;
    while (offset < chunk.length) {
      if (!this.#inFrame) {
        offset = this.#readHeader(chunk, offset);
        if (!this.#inFrame) return;
        if (this.#length === 0) {
          this.#completeFrame(new Uint8Array(0), onMessage);
          continue;
        }
      }
      const take = Math.min(this.#length - this.#filled, chunk.length - offset);
      if (this.#payload === undefined && take === this.#length) {
        this.#completeFrame(chunk.subarray(offset, offset + take), onMessage);
      } else {
        if (this.#payload === undefined) {
          // Gathered in a relay or bulk buffer when one is large enough.
          const pooled = this.#pooled && this.#length > 4096
            ? acquireAtLeast(this.#length)?.subarray(0, this.#length)
            : undefined;
          this.#payload = pooled ?? new Uint8Array(this.#length);
        }
        this.#payload.set(chunk.subarray(offset, offset + take), this.#filled);
        this.#filled += take;
        if (this.#filled === this.#length) {
          const gathered = this.#payload;
          this.#completeFrame(gathered, onMessage);
          // Our claim on a pooled one: the callee took its own if it kept the payload.
          releaseBytes(gathered);
        }
      }
      offset += take;
    }
  }

  /** Gathers header bytes from `offset`; sets #inFrame once the header is whole. */
  #readHeader(chunk: Uint8Array, offset: number): number {
    const head = this.#head;
    while (this.#headLength < 2 && offset < chunk.length) {
      head[this.#headLength++] = chunk[offset++];
    }
    if (this.#headLength < 2) return offset;
    if (this.#headLength === 2) this.#checkFirstBytes();
    const len7 = head[1] & 0x7f;
    const need = 2 + (len7 === 126 ? 2 : len7 === 127 ? 8 : 0) + (this.#masked ? 4 : 0);
    while (this.#headLength < need && offset < chunk.length) {
      head[this.#headLength++] = chunk[offset++];
    }
    if (this.#headLength < need) return offset;

    let length = len7;
    let at = 2;
    if (len7 === 126) {
      length = (head[2] << 8) | head[3];
      at = 4;
    } else if (len7 === 127) {
      const view = new DataView(head.buffer, 2, 8);
      const high = view.getUint32(0);
      // The most significant bit must be 0 (§5.2); anything near it is far above any limit anyway.
      if (high >= 0x8000_0000) {
        throw new FrameError(PROTOCOL_ERROR, "64-bit length with top bit set");
      }
      length = high * 0x1_0000_0000 + view.getUint32(4);
      at = 10;
    }
    const opcode = head[0] & 0x0f;
    if (opcode < 8 && this.#messageLength + length > this.#maxMessageSize) {
      // Refused from the header alone: nothing of an oversized message is buffered.
      throw new FrameError(
        MESSAGE_TOO_BIG,
        `peer sent a message of at least ${this.#messageLength + length} bytes, ` +
          `above maxMessageSize ${this.#maxMessageSize}`,
      );
    }
    this.#mask = this.#masked ? head.slice(at, at + 4) : undefined;
    this.#fin = (head[0] & 0x80) !== 0;
    this.#opcode = opcode;
    this.#length = length;
    // Control frames in between (a ping) say nothing about the size of the next data frame.
    if (opcode < 8) this.#lastFrameSize = need + length;
    this.#payload = undefined;
    this.#filled = 0;
    this.#headLength = 0;
    this.#inFrame = true;
    return offset;
  }

  /** Checks what the first two header bytes alone can break. */
  #checkFirstBytes(): void {
    const [b0, b1] = this.#head;
    const fin = (b0 & 0x80) !== 0;
    const opcode = b0 & 0x0f;
    if ((b0 & 0x70) !== 0) throw new FrameError(PROTOCOL_ERROR, "reserved bits set (no extension)");
    if (((b1 & 0x80) !== 0) !== this.#masked) {
      throw new FrameError(
        PROTOCOL_ERROR,
        this.#masked ? "unmasked client frame" : "masked server frame",
      );
    }
    if (opcode >= 8) {
      if (opcode > Opcode.Pong) throw new FrameError(PROTOCOL_ERROR, `unknown opcode ${opcode}`);
      if (!fin) throw new FrameError(PROTOCOL_ERROR, "fragmented control frame");
      if ((b1 & 0x7f) > MAX_CONTROL_PAYLOAD) {
        throw new FrameError(PROTOCOL_ERROR, "control frame above 125 bytes");
      }
    } else if (opcode > Opcode.Binary) {
      throw new FrameError(PROTOCOL_ERROR, `unknown opcode ${opcode}`);
    } else if (opcode === Opcode.Continuation && this.#messageOpcode === 0) {
      throw new FrameError(PROTOCOL_ERROR, "continuation frame without a message to continue");
    } else if (opcode !== Opcode.Continuation && this.#messageOpcode !== 0) {
      throw new FrameError(PROTOCOL_ERROR, "new message inside a fragmented one");
    }
  }

  #completeFrame(payload: Uint8Array, onMessage: MessageHandler): void {
    this.#inFrame = false;
    if (this.#mask) {
      // Unmask into our own buffer; a view of the caller's chunk is copied first, unless the
      // caller owns its chunks (pooled mode).
      if (payload !== this.#payload && !this.#pooled) payload = payload.slice();
      applyMask(payload, this.#mask);
    }
    this.#payload = undefined;
    const opcode = this.#opcode;
    if (opcode >= 8) {
      onMessage(opcode, payload);
      return;
    }
    if (this.#fin && this.#messageOpcode === 0) {
      onMessage(opcode, payload);
      return;
    }
    if (this.#messageOpcode === 0) this.#messageOpcode = opcode;
    // A fragment waits for the rest of its message: a claim of its own if pooled.
    retainBytes(payload);
    this.#parts.push(payload);
    this.#messageLength += payload.length;
    if (!this.#fin) return;
    const message = new Uint8Array(this.#messageLength);
    let at = 0;
    for (const part of this.#parts) {
      message.set(part, at);
      at += part.length;
      releaseBytes(part);
    }
    const messageOpcode = this.#messageOpcode;
    this.#messageOpcode = 0;
    this.#parts = [];
    this.#messageLength = 0;
    onMessage(messageOpcode, message);
  }
}
