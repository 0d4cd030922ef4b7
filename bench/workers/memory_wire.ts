/**
 * What the M1 memory workers agree on: the session limits they run with, and the one-line request
 * that starts every stream (echo, or a flood the client will stop reading).
 *
 * @module
 */

import type { SessionConfig } from "../../protocol/mod.ts";

/**
 * The bench's own session limits, the same on both sides. The default `maxStreams` (4096) would
 * refuse the 10,000 idle streams, so it is raised; everything else keeps its default (windows,
 * auto-tuning, `maxUnackedOpens` 256, which only paces the SYNs of a burst of opens). M1 runs a
 * bare session, not the daemon; through the daemon, `limits.streamsPerSession` (default 1024, the
 * session's `maxStreams`) and a client's `limits.streams` would have to be raised as well.
 */
export const M1_SESSION_CONFIG: Partial<SessionConfig> = { maxStreams: 16_384 };

/** First byte of a stream the server echoes; the rest of the stream is the payload. */
export const MODE_ECHO = 0x45; // "E"

/** First byte of a flood request: `F<bytes>\n`, after which the server writes that many bytes. */
export const MODE_FLOOD = 0x46; // "F"

/** Pattern offset of flood payloads, so the client can verify every byte it reads. */
export const FLOOD_BASE = 4099;

/** The request line that asks the server to send `bytes` pattern bytes on the stream. */
export function floodRequest(bytes: number): Uint8Array {
  return new TextEncoder().encode(`F${bytes}\n`);
}

/** The byte count of a flood request line (without its newline), or undefined if malformed. */
export function parseFloodRequest(line: string): number | undefined {
  const m = /^F(\d{1,15})$/.exec(line);
  return m ? Number(m[1]) : undefined;
}
