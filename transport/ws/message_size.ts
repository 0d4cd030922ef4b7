/**
 * How large the messages are that our WebSocket endpoints send each other. Each of our endpoints
 * says in the opening handshake (a request or response header) the largest message it wants, at
 * most what it accepts; toward one that said nothing (an older tunnelmux, a proxy that dropped
 * the header, any other peer) messages stay at {@linkcode MESSAGE_SIZE}.
 *
 * @module
 */

import { MESSAGE_SIZE } from "./transport.ts";

/** The handshake header that carries the largest message its sender wants, in bytes. */
export const MESSAGE_LIMIT_HEADER = "X-Tunnelmux-Max-Message";

/**
 * The largest message sent to a peer that accepts it: 256 KiB, a yamux data frame as large as a
 * socket read on Deno in bulk (and its header), so a relayed read goes out whole in one message.
 */
export const LARGE_MESSAGE_SIZE = 256 * 1024;

/**
 * The size of the messages to send to a peer that announced `limit` (the header's value, or
 * null/undefined when it sent none): {@linkcode LARGE_MESSAGE_SIZE} or its limit if smaller, and
 * {@linkcode MESSAGE_SIZE} when it said nothing usable.
 *
 * @example
 * ```ts
 * import { messageSizeFor } from "./message_size.ts";
 * console.assert(messageSizeFor("1048576") === 256 * 1024);
 * console.assert(messageSizeFor(null) === 64 * 1024);
 * ```
 */
export function messageSizeFor(limit: string | null | undefined): number {
  if (limit === null || limit === undefined || !/^[1-9][0-9]{0,9}$/.test(limit.trim())) {
    return MESSAGE_SIZE;
  }
  return Math.min(LARGE_MESSAGE_SIZE, Number(limit.trim()));
}
