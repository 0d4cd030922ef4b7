/**
 * Errors the engine reports. Each carries a stable `code` so callers, logs and metrics can tell
 * them apart without parsing messages.
 *
 * @module
 */

/** Why a session or stream failed. Used as a metrics label, so keep the set small and stable. */
export type YamuxErrorCode =
  | "protocol_error"
  | "remote_goaway"
  | "session_closed"
  | "keepalive_timeout"
  | "stream_reset"
  | "open_timeout"
  | "close_timeout"
  | "streams_exhausted"
  | "too_many_streams"
  | "transport_error";

/** An error raised by the yamux engine. */
export class YamuxError extends Error {
  /** Stable machine-readable reason. */
  readonly code: YamuxErrorCode;

  /**
   * For a stream reset by the peer: the reason code its RST frame carried in the length field (as
   * go-yamux's `ResetWithError` sends it; 0 when none was given). Undefined otherwise.
   */
  readonly resetCode: number | undefined;

  /** Creates an error with a stable `code` and a human-readable message. */
  constructor(
    code: YamuxErrorCode,
    message: string,
    options?: ErrorOptions & { resetCode?: number },
  ) {
    super(message, options);
    this.name = "YamuxError";
    this.code = code;
    this.resetCode = options?.resetCode;
  }
}
