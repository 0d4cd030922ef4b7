/**
 * Framing of control messages on a stream: each message is a 4-byte big-endian length followed by
 * that many bytes of UTF-8 JSON. Messages are small and rare, so clarity wins over speed here.
 *
 * @module
 */

import type { Stream } from "../../protocol/stream.ts";

/** Largest control message either side accepts; a bigger declared length ends the channel. */
export const MAX_CONTROL_MESSAGE = 64 * 1024;

/**
 * Sends and receives JSON messages over a stream.
 *
 * Nothing is read until {@linkcode start}: set `onMessage` and `onClose` first, so that messages
 * already waiting (read together with the stream header, or buffered in the paused stream) reach
 * them, in the order they were sent.
 *
 * @example
 * ```ts ignore
 * const channel = new ControlChannel(stream);
 * channel.onMessage = (value) => console.log(value);
 * channel.start();
 * channel.send({ type: "hello", version: 1 });
 * ```
 */
export class ControlChannel {
  /** Called with each decoded message (still untrusted JSON: validate it). */
  onMessage: ((value: unknown) => void) | null = null;
  /** Called once when the channel ends: the peer closed or reset it, or sent a bad frame. */
  onClose: ((error?: Error) => void) | null = null;

  readonly #stream: Stream;
  #buffer = new Uint8Array(0);
  #closed = false;

  readonly #initial: Uint8Array | undefined;
  #started = false;

  /**
   * A channel over `stream`; `initial` is data read together with the stream's header, which comes
   * before anything still buffered in the stream. Reading begins at {@linkcode start}.
   */
  constructor(stream: Stream, initial?: Uint8Array) {
    this.#stream = stream;
    this.#initial = initial;
  }

  /**
   * Takes over the stream's data, end and close handlers and starts reading: first `initial`,
   * then what the stream buffered while paused, then what arrives. Idempotent.
   */
  start(): void {
    if (this.#started) return;
    this.#started = true;
    const stream = this.#stream;
    if (this.#initial && this.#initial.length > 0) this.#receive(this.#initial);
    stream.onData = (chunk) => this.#receive(chunk);
    stream.onEnd = () => this.#finish(undefined);
    stream.onClose = (error) => this.#finish(error);
    stream.resume();
  }

  /** The stream underneath. */
  get stream(): Stream {
    return this.#stream;
  }

  /** Sends one message. Dropped once the channel is closed. */
  send(message: unknown): void {
    if (this.#closed) return;
    const body = new TextEncoder().encode(JSON.stringify(message));
    const frame = new Uint8Array(4 + body.length);
    new DataView(frame.buffer).setUint32(0, body.length);
    frame.set(body, 4);
    this.#stream.write(frame);
  }

  /** Half-closes the channel after queued messages. */
  end(): void {
    this.#stream.end();
  }

  #receive(chunk: Uint8Array): void {
    if (this.#closed) return;
    const joined = new Uint8Array(this.#buffer.length + chunk.length);
    joined.set(this.#buffer);
    joined.set(chunk, this.#buffer.length);
    let at = 0;
    while (joined.length - at >= 4 && !this.#closed) {
      const length = new DataView(joined.buffer, joined.byteOffset + at).getUint32(0);
      if (length > MAX_CONTROL_MESSAGE) {
        return this.#fail(new Error(`control message of ${length} bytes is too large`));
      }
      if (joined.length - at - 4 < length) break;
      let value: unknown;
      try {
        value = JSON.parse(new TextDecoder().decode(joined.subarray(at + 4, at + 4 + length)));
      } catch {
        return this.#fail(new Error("control message is not JSON"));
      }
      at += 4 + length;
      this.onMessage?.(value);
    }
    this.#buffer = joined.slice(at);
  }

  /** The peer broke the framing: report why, then reset (whose own close report is then moot). */
  #fail(error: Error): void {
    this.#finish(error);
    this.#stream.reset();
  }

  #finish(error: Error | undefined): void {
    if (this.#closed) return;
    this.#closed = true;
    this.onClose?.(error);
  }
}
