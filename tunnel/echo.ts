/**
 * The echo service: every byte a stream receives is written back, with backpressure both ways, and
 * the peer's half-close is answered with ours once everything is echoed.
 *
 * @module
 */

import type { Stream } from "../protocol/mod.ts";

/**
 * Echoes `stream` until the peer half-closes, then half-closes back.
 *
 * @example
 * ```ts ignore
 * session.onStream = echoStream;
 * ```
 */
export function echoStream(stream: Stream): void {
  stream.onData = (chunk) => {
    if (!stream.write(chunk)) stream.pause();
  };
  stream.onDrain = () => stream.resume();
  stream.onEnd = () => stream.end();
}
