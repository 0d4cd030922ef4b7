/**
 * Web Streams and async iteration on top of a stream's callback API, built only when a caller asks
 * for `stream.readable`, `stream.writable` or `for await`. Backpressure carries through both ways:
 * a full readable queue pauses the stream (so the peer's credit runs out), and a writable's write
 * waits for `onDrain`.
 *
 * @module
 */

import type { Stream } from "./stream.ts";

const QUEUE_BYTES = 64 * 1024;

/**
 * A ReadableStream of the data `stream` receives. It takes over `onData` and `onEnd`; cancelling it
 * resets the stream.
 */
export function toReadable(stream: Stream): ReadableStream<Uint8Array> {
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
export function toWritable(stream: Stream): WritableStream<Uint8Array> {
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
function chainClose(stream: Stream, listener: (error?: Error) => void): void {
  const previous = stream.onClose;
  stream.onClose = (error) => {
    previous?.(error);
    listener(error);
  };
}
