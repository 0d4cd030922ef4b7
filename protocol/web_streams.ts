/**
 * Web Streams and async iteration on top of a stream's callback API, built only when a caller asks
 * for `stream.readable`, `stream.writable` or `for await`. Backpressure carries through both ways:
 * a full readable queue pauses the stream (so the peer's credit runs out), and a writable's write
 * waits for `onDrain`.
 *
 * @module
 */

/**
 * The callback API these adapters sit on: what a yamux `Stream` offers (declared here, so this
 * module needs nothing from stream.ts, which builds the adapters on demand).
 */
export interface CallbackStream {
  /** The stream id, for error messages. */
  readonly id: number;
  /** Why the stream failed, once it has. */
  readonly error: Error | undefined;
  /** Called with each received chunk. */
  onData: ((chunk: Uint8Array) => void) | null;
  /** Called once the peer half-closed. */
  onEnd: (() => void) | null;
  /** Called once writing may go on after `write` returned false. */
  onDrain: (() => void) | null;
  /** Called once the stream is closed, with the error if it failed. */
  onClose: ((error?: Error) => void) | null;
  /** Queues bytes; false once the caller should wait for `onDrain`. */
  write(chunk: Uint8Array): boolean;
  /** Half-closes after queued bytes. */
  end(): void;
  /** Aborts the stream (RST), with an optional reason code. */
  reset(code?: number): void;
  /** Stops delivering data (the peer's credit runs out). */
  pause(): void;
  /** Delivers data again. */
  resume(): void;
}

const QUEUE_BYTES = 64 * 1024;

/**
 * A ReadableStream of the data `stream` receives. It takes over `onData` and `onEnd`; cancelling it
 * resets the stream.
 */
export function toReadable(stream: CallbackStream): ReadableStream<Uint8Array> {
  return new ReadableStream<Uint8Array>({
    start(controller) {
      let done = false;
      stream.onData = (chunk) => {
        controller.enqueue(chunk);
        if ((controller.desiredSize ?? 0) <= 0) stream.pause();
      };
      stream.onEnd = () => {
        done = true;
        controller.close();
      };
      chainClose(stream, (error) => {
        if (done) return;
        done = true;
        if (error) controller.error(error);
        else controller.close();
      });
    },
    pull() {
      stream.resume();
    },
    cancel() {
      stream.reset();
    },
  }, { highWaterMark: QUEUE_BYTES, size: (chunk) => chunk.byteLength });
}

/**
 * A WritableStream into `stream`. It takes over `onDrain`; closing it half-closes the stream and
 * aborting it resets the stream. Chunks are copied, since a Web Streams producer may reuse a chunk
 * once its write resolved, before the bytes are on the wire.
 */
export function toWritable(stream: CallbackStream): WritableStream<Uint8Array> {
  let waiting: { resolve: () => void; reject: (error: Error) => void } | null = null;
  stream.onDrain = () => {
    waiting?.resolve();
    waiting = null;
  };
  chainClose(stream, (error) => {
    waiting?.reject(error ?? new Error(`stream ${stream.id} closed`));
    waiting = null;
  });
  return new WritableStream<Uint8Array>({
    write(chunk) {
      if (stream.error) throw stream.error;
      if (stream.write(chunk.slice())) return;
      return new Promise((resolve, reject) => waiting = { resolve, reject });
    },
    close() {
      stream.end();
    },
    abort() {
      stream.reset();
    },
  });
}

/** Adds `listener` to the stream's close handler, keeping whatever handler was there. */
function chainClose(stream: CallbackStream, listener: (error?: Error) => void): void {
  const previous = stream.onClose;
  stream.onClose = (error) => {
    previous?.(error);
    listener(error);
  };
}
