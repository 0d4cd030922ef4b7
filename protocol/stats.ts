/**
 * Session counters, kept as plain numbers that callers (the admin API, metrics) read directly.
 *
 * @module
 */

import { FrameType } from "./constants.ts";

/** Frames counted by type. */
export interface FrameCounts {
  /** Data frames. */
  data: number;
  /** WindowUpdate frames (including flag-only frames such as SYN, FIN and RST). */
  windowUpdate: number;
  /** Ping frames, requests and replies. */
  ping: number;
  /** GoAway frames. */
  goAway: number;
}

/** Everything a session counts. All fields only grow, except `rtt`. */
export interface SessionStats {
  /** Frames received, by type. */
  framesIn: FrameCounts;
  /** Frames sent, by type. */
  framesOut: FrameCounts;
  /** Transport bytes received (headers included). */
  bytesIn: number;
  /** Transport bytes sent (headers included). */
  bytesOut: number;
  /** Streams we opened. */
  streamsOpened: number;
  /** Streams the peer opened that we accepted. */
  streamsAccepted: number;
  /** Streams the peer opened that we refused (backlog full, too many streams, going away). */
  streamsRefused: number;
  /** RST frames we sent. */
  resetsSent: number;
  /** RST frames we received. */
  resetsReceived: number;
  /** Frames for streams we do not know (closed or never opened), drained and ignored. */
  framesForUnknownStreams: number;
  /** Pings not answered because too many answers were already waiting. */
  pingRepliesDropped: number;
  /** Times we stopped reading the peer because it did not read our control frames. */
  readPauses: number;
  /** Errors by reason, e.g. `{ window_exceeded: 1 }`. */
  errors: Record<string, number>;
  /** GoAway frames we sent, by code name (`normal`, `protocol_error`, `internal_error`). */
  goAwaySent: Record<string, number>;
  /** GoAway frames we received, by code name (`unknown` for codes outside the spec). */
  goAwayReceived: Record<string, number>;
}

/** The name of a GoAway code in {@linkcode SessionStats} and metrics. */
export function goAwayCodeName(code: number): string {
  return code === 0
    ? "normal"
    : code === 1
    ? "protocol_error"
    : code === 2
    ? "internal_error"
    : "unknown";
}

/** Adds one to `counts[key]`. */
export function bump(counts: Record<string, number>, key: string): void {
  counts[key] = (counts[key] ?? 0) + 1;
}

/** A zeroed set of counters. */
export function createSessionStats(): SessionStats {
  return {
    framesIn: { data: 0, windowUpdate: 0, ping: 0, goAway: 0 },
    framesOut: { data: 0, windowUpdate: 0, ping: 0, goAway: 0 },
    bytesIn: 0,
    bytesOut: 0,
    streamsOpened: 0,
    streamsAccepted: 0,
    streamsRefused: 0,
    resetsSent: 0,
    resetsReceived: 0,
    framesForUnknownStreams: 0,
    pingRepliesDropped: 0,
    readPauses: 0,
    errors: {},
    goAwaySent: {},
    goAwayReceived: {},
  };
}

/** Adds one frame of `type` to `counts`. */
export function countFrame(counts: FrameCounts, type: number): void {
  switch (type) {
    case FrameType.Data:
      counts.data++;
      break;
    case FrameType.WindowUpdate:
      counts.windowUpdate++;
      break;
    case FrameType.Ping:
      counts.ping++;
      break;
    case FrameType.GoAway:
      counts.goAway++;
      break;
  }
}
