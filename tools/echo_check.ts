/**
 * The echo tool's client side: opens streams to an echo server, writes a deterministic pattern,
 * half-closes, and verifies that exactly the same bytes come back.
 *
 * @module
 */

import type { Session, Stream } from "../protocol/mod.ts";
import { pattern } from "../util/bytes/bytes.ts";
import { prng } from "../util/crypto/prng.ts";

/** What {@linkcode checkEcho} should do. */
export interface EchoCheckOptions {
  /** Streams to open in all. */
  streams: number;
  /** Largest payload per stream; each stream sends a size from 1 to this, chosen by `seed`. */
  maxSize: number;
  /** Streams in flight at once. */
  concurrency: number;
  /** Seed for the sizes and contents, so a failure can be replayed. */
  seed: number;
}

/** What {@linkcode checkEcho} measured. */
export interface EchoCheckResult {
  /** Streams whose echo matched. */
  streams: number;
  /** Payload bytes sent (and received back). */
  bytes: number;
  /** Wall time in milliseconds. */
  ms: number;
}

export { pattern };

/**
 * Sends `payload` on `stream` with backpressure, half-closes, and resolves with everything received
 * until the peer half-closes. Rejects if the stream is reset.
 */
export function roundTrip(
  stream: Stream,
  payload: Uint8Array,
  chunkSize = 64 * 1024,
): Promise<Uint8Array> {
  return new Promise((resolve, reject) => {
    const received = new Uint8Array(payload.length);
    let receivedLength = 0;
    let overflow = false;
    stream.onData = (chunk) => {
      if (receivedLength + chunk.length > received.length) overflow = true;
      else received.set(chunk, receivedLength);
      receivedLength += chunk.length;
    };
    stream.onEnd = () => {
      if (overflow) {
        reject(
          new Error(`stream ${stream.id}: got ${receivedLength} bytes, sent ${payload.length}`),
        );
      } else resolve(received.subarray(0, receivedLength));
    };
    stream.onClose = (error) => {
      if (error) reject(error);
    };
    let offset = 0;
    const pump = () => {
      while (offset < payload.length) {
        const end = Math.min(offset + chunkSize, payload.length);
        const more = stream.write(payload.subarray(offset, end));
        offset = end;
        if (!more) return;
      }
      stream.end();
    };
    stream.onDrain = pump;
    pump();
  });
}

/** Runs the check over `session` and throws on the first mismatch. */
export async function checkEcho(
  session: Session,
  options: EchoCheckOptions,
): Promise<EchoCheckResult> {
  const random = prng(options.seed);
  const sizes = Array.from(
    { length: options.streams },
    () => 1 + Math.floor(random() * options.maxSize),
  );
  const started = performance.now();
  let next = 0;
  let bytes = 0;
  const worker = async () => {
    while (next < sizes.length) {
      const index = next++;
      const payload = pattern(sizes[index], index);
      const echoed = await roundTrip(session.open(), payload);
      if (echoed.length !== payload.length) {
        throw new Error(`stream #${index}: echoed ${echoed.length} of ${payload.length} bytes`);
      }
      for (let i = 0; i < payload.length; i++) {
        if (echoed[i] !== payload[i]) throw new Error(`stream #${index}: byte ${i} differs`);
      }
      bytes += payload.length;
    }
  };
  await Promise.all(Array.from({ length: Math.min(options.concurrency, sizes.length) }, worker));
  return { streams: sizes.length, bytes, ms: Math.round(performance.now() - started) };
}
