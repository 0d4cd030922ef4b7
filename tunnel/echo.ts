/**
 * The echo service: every byte a stream receives is written back, with backpressure both ways, and
 * the peer's half-close is answered with ours once everything is echoed.
 *
 * @module
 */

import type { Stream } from "../protocol/mod.ts";

/**
 * Echoes `stream` until the peer half-closes, then half-closes back. Each chunk goes back with its
 * claim (the handler follows `util/bytes/buffer_pool.ts`'s rules: it passes the claim on with the
 * write and keeps no view), so a payload that arrived with room in front of it goes out where it
 * lies, its new frame header over the old one, rather than copied into a batch.
 *
 * @example
 * ```ts ignore
 * session.onStream = echoStream;
 * ```
 */
export function echoStream(stream: Stream): void {
  stream.setOnData((chunk) => {
    if (!stream.write(chunk)) stream.pause();
  }, true);
  stream.onDrain = () => stream.resume();
  stream.onEnd = () => stream.end();
}
