/**
 * Reads the {@linkcode StreamHeader} a tunnel-layer stream starts with.
 *
 * @module
 */

import { decodeStreamHeader, type StreamHeader, StreamHeaderError } from "./stream_header.ts";
import type { Stream } from "../../protocol/stream.ts";
import { sharedDeadlines } from "../../util/timing/deadlines.ts";

/**
 * Resolves with the stream's header and whatever payload arrived with it (possibly empty). The
 * stream is left paused with no data handler: the caller attaches its own and resumes, and data
 * that arrives meanwhile waits in the stream within its window. Rejects with a
 * {@linkcode StreamHeaderError} on a bad header, when the peer half-closes before the header is
 * complete, when it is reset, or after `timeoutMs`; the stream itself is left for the caller to
 * reset. It borrows `onData`, `onEnd` and `onClose` and clears them when done.
 *
 * @example
 * ```ts ignore
 * const { header, rest } = await readStreamHeader(stream, 10_000);
 * if (header.kind === "forward") dial(header.target);
 * ```
 */
export function readStreamHeader(
  stream: Stream,
  timeoutMs: number,
): Promise<{ header: StreamHeader; rest: Uint8Array }> {
  return new Promise((resolve, reject) => {
    onStreamHeader(stream, timeoutMs, (error, result) => error ? reject(error) : resolve(result!));
  });
}

/**
 * {@linkcode readStreamHeader} with a callback, called in the same turn as the header's last
 * bytes arrive: what the caller then writes leaves with whatever else that turn sends, rather
 * than in a write of its own a microtask later.
 */
export function onStreamHeader(
  stream: Stream,
  timeoutMs: number,
  done: (error: Error | undefined, result?: { header: StreamHeader; rest: Uint8Array }) => void,
): void {
  let received: Uint8Array = new Uint8Array(0);
  let settled = false;
  const finish = (
    error: Error | undefined,
    result?: { header: StreamHeader; rest: Uint8Array },
  ) => {
    if (settled) return;
    settled = true;
    deadline.cancel();
    stream.pause();
    stream.onData = null;
    stream.onEnd = null;
    stream.onClose = null;
    done(error, result);
  };
  const deadline = sharedDeadlines.add(
    timeoutMs,
    () => finish(new StreamHeaderError(`no stream header within ${timeoutMs} ms`)),
  );
  stream.onData = (chunk) => {
    if (received.length === 0) received = chunk;
    else {
      const joined = new Uint8Array(received.length + chunk.length);
      joined.set(received);
      joined.set(chunk, received.length);
      received = joined;
    }
    let decoded;
    try {
      decoded = decodeStreamHeader(received);
    } catch (error) {
      return finish(error as Error);
    }
    if (decoded) finish(undefined, decoded);
  };
  stream.onEnd = () => finish(new StreamHeaderError("stream ended before its header was complete"));
  stream.onClose = (error) =>
    finish(error ?? new StreamHeaderError("stream closed before its header"));
}
