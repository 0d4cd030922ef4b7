/**
 * Session configuration: every limit the engine enforces, with its default. Validated once when a
 * session is created so the hot path can trust the numbers.
 *
 * @module
 */

import { INITIAL_STREAM_WINDOW, MAX_UINT32 } from "./constants.ts";

/** Tunables of a session. All sizes in bytes, all durations in milliseconds. */
export interface SessionConfig {
  /** Incoming streams waiting for `accept()`; more are reset. Default 256. */
  acceptBacklog: number;
  /** Outbound streams whose SYN is not yet ACKed; further opens wait to send their SYN. Default 256. */
  maxUnackedOpens: number;
  /** Open streams per session, both directions; a peer's SYN past it is reset, `open()` throws. Default 4096. */
  maxStreams: number;
  /**
   * Largest receive window a stream can grow to by auto-tuning. Default 6 MiB (Chrome's HTTP/2 and
   * quic-go's per-stream default): a gigabit at a 50 ms round trip, and no more than that waits
   * here for a slow reader (with 16 MiB a bulk download held 10–15 MiB in the daemon).
   */
  maxStreamWindow: number;
  /** Total window growth (above the fixed 256 KiB each) all streams of a session may hold. Default 64 MiB. */
  sessionReceiveBudget: number;
  /** Grow a stream's window while its reader keeps up within about a round trip. Default true. */
  autoTuneWindow: boolean;
  /**
   * Largest Data frame this side sends; bigger writes are split. Default 256 KiB, the size of a
   * relay's socket read on Deno once a bulk transfer comes, which goes out whole, its header
   * written in front (fewer reads, writes and frames per byte at both ends). Data copied into a
   * write goes in frames of at most 64 KiB.
   */
  maxDataFrameSize: number;
  /** Largest declared Data frame length accepted from the peer; at least `maxStreamWindow`. Default 16 MiB. */
  maxFrameLength: number;
  /** A stream's `write()` returns false once this much is queued. Default 256 KiB. */
  writeHighWaterMark: number;
  /** The most bytes one coalesced transport write carries. Default 256 KiB. */
  maxWriteBatch: number;
  /** Send keepalive pings. Default true. */
  enableKeepAlive: boolean;
  /**
   * Idle time (no inbound frame) before a keepalive ping. Default 30 s. The accepting side waits a
   * little longer (a quarter, at most a second), so the dialer pings and the two ends do not ping
   * each other at once.
   */
  keepAliveInterval: number;
  /** Time without any inbound frame after a keepalive ping before the session is closed. Default 30 s. */
  keepAliveTimeout: number;
  /** Time an opened stream may wait for its ACK before it is reset. Default 75 s. */
  openTimeout: number;
  /**
   * Longest an accepted stream's ACK waits to ride on the stream's first frame (data, window
   * update, FIN or RST) instead of going in a frame and a write of its own; at most 1 s, so the
   * opener's unacknowledged opens stay few. Default 0: at once.
   */
  ackDelay: number;
  /** Time after our FIN that we wait for the peer's FIN before resetting the stream. Default 5 min. */
  closeTimeout: number;
  /** Ping replies queued while the transport is backed up; extra pings go unanswered. Default 16. */
  maxPendingPingReplies: number;
  /** Unanswered `ping()` calls at once. Default 64. */
  maxOutstandingPings: number;
  /**
   * Control frames (RST, GoAway, pings) queued while the transport is backed up. A peer that makes
   * us answer more than this while it does not read is not read either (its frames wait in the
   * kernel) until the transport drains. Default 4096.
   */
  maxQueuedControlFrames: number;
}

/** The defaults of every tunable; see {@linkcode SessionConfig} for what each means. */
export const DEFAULT_SESSION_CONFIG: Readonly<SessionConfig> = Object.freeze({
  acceptBacklog: 256,
  maxUnackedOpens: 256,
  maxStreams: 4096,
  maxStreamWindow: 6 * 1024 * 1024,
  sessionReceiveBudget: 64 * 1024 * 1024,
  autoTuneWindow: true,
  maxDataFrameSize: 256 * 1024,
  maxFrameLength: 16 * 1024 * 1024,
  writeHighWaterMark: 256 * 1024,
  maxWriteBatch: 256 * 1024,
  enableKeepAlive: true,
  keepAliveInterval: 30_000,
  keepAliveTimeout: 30_000,
  openTimeout: 75_000,
  ackDelay: 0,
  closeTimeout: 300_000,
  maxPendingPingReplies: 16,
  maxOutstandingPings: 64,
  maxQueuedControlFrames: 4096,
});

const LOWER_BOUNDS: Partial<Record<keyof SessionConfig, number>> = {
  maxStreamWindow: INITIAL_STREAM_WINDOW,
  maxFrameLength: INITIAL_STREAM_WINDOW,
  ackDelay: 0,
};

/** Largest accepted value where the type's limit is too wide to be sensible. */
const UPPER_BOUNDS: Partial<Record<keyof SessionConfig, number>> = {
  ackDelay: 1_000,
};

/**
 * The settings for streams whose receive windows grow to `bytes`: `maxStreamWindow`, and a frame
 * limit at least as large, since a peer may send a whole window in one frame.
 *
 * @example
 * ```ts
 * import { resolveSessionConfig, streamWindowConfig } from "./config.ts";
 * const config = resolveSessionConfig(streamWindowConfig(32 * 1024 * 1024));
 * console.assert(config.maxFrameLength === 32 * 1024 * 1024);
 * ```
 */
export function streamWindowConfig(
  bytes: number,
): Pick<SessionConfig, "maxStreamWindow" | "maxFrameLength"> {
  return {
    maxStreamWindow: bytes,
    maxFrameLength: Math.max(DEFAULT_SESSION_CONFIG.maxFrameLength, bytes),
  };
}

/**
 * Fills in defaults and checks every value, throwing a `RangeError` that names the bad field.
 *
 * @example
 * ```ts
 * import { resolveSessionConfig } from "./config.ts";
 * const config = resolveSessionConfig({ acceptBacklog: 16 });
 * console.assert(config.maxStreamWindow === 6 * 1024 * 1024);
 * ```
 */
export function resolveSessionConfig(overrides: Partial<SessionConfig> = {}): SessionConfig {
  const config = { ...DEFAULT_SESSION_CONFIG, ...overrides };
  for (const [key, value] of Object.entries(config) as [keyof SessionConfig, unknown][]) {
    if (!(key in DEFAULT_SESSION_CONFIG)) throw new RangeError(`unknown session option "${key}"`);
    if (typeof DEFAULT_SESSION_CONFIG[key] === "boolean") {
      if (typeof value !== "boolean") throw new RangeError(`${key} must be a boolean`);
      continue;
    }
    const min = LOWER_BOUNDS[key] ?? 1;
    const max = UPPER_BOUNDS[key] ?? MAX_UINT32;
    if (typeof value !== "number" || !Number.isInteger(value) || value < min || value > max) {
      throw new RangeError(`${key} must be an integer from ${min} to ${max}, got ${value}`);
    }
  }
  // A peer may send a whole granted window in one frame (hashicorp and libp2p-yamux do).
  if (config.maxFrameLength < config.maxStreamWindow) {
    throw new RangeError(
      `maxFrameLength (${config.maxFrameLength}) must be at least maxStreamWindow (${config.maxStreamWindow})`,
    );
  }
  return config;
}
