/**
 * Errors the client reports, with stable codes.
 *
 * @module
 */

import type { ControlErrorCode } from "../tunnel/control/control.ts";
import { YamuxError } from "../protocol/errors.ts";
import { describeResetReason, ResetReason } from "../tunnel/stream/reset_reasons.ts";

/** Why something failed on the client side; daemon error codes pass through unchanged. */
export type ClientErrorCode =
  | ControlErrorCode
  | "connect_failed"
  | "bad_url"
  | "bad_token"
  | "upgrade_refused"
  | "wrong_protocol"
  | "session_lost"
  | "not_connected"
  | "timeout"
  | "closed"
  | "protocol"
  | "tunnel_closed"
  | "local_dial_failed"
  | "forward_failed"
  | "socks_refused"
  | StreamResetCode;

/** Why the daemon (or the other client) reset a stream, as a {@linkcode ClientError} code. */
export type StreamResetCode =
  | "stream_reset"
  | "dial_refused"
  | "dial_timeout"
  | "dial_failed"
  | "unknown_tunnel"
  | "unknown_service"
  | "bad_header"
  | "not_authenticated"
  | "address_denied"
  | "resolve_failed"
  | "idle_timeout"
  | "network_unreachable";

/** Reset reason codes (`tunnel/stream/reset_reasons.ts`) → error codes. */
const RESET_CODES: Record<number, ClientErrorCode> = {
  [ResetReason.None]: "stream_reset",
  [ResetReason.NotAllowed]: "not_allowed",
  [ResetReason.DialRefused]: "dial_refused",
  [ResetReason.DialTimeout]: "dial_timeout",
  [ResetReason.DialFailed]: "dial_failed",
  [ResetReason.UnknownTunnel]: "unknown_tunnel",
  [ResetReason.UnknownService]: "unknown_service",
  [ResetReason.LimitReached]: "limit_reached",
  [ResetReason.BadHeader]: "bad_header",
  [ResetReason.NotAuthenticated]: "not_authenticated",
  [ResetReason.ShuttingDown]: "shutting_down",
  [ResetReason.LoopbackDenied]: "address_denied",
  [ResetReason.MetadataDenied]: "address_denied",
  [ResetReason.AddressDenied]: "address_denied",
  [ResetReason.ResolveFailed]: "resolve_failed",
  [ResetReason.IdleTimeout]: "idle_timeout",
  [ResetReason.NetworkUnreachable]: "network_unreachable",
};

const FATAL = new Set<ClientErrorCode>([
  "unauthorized",
  "version_mismatch",
  "bad_request",
  "bad_url",
  "bad_token",
  "upgrade_refused",
  "wrong_protocol",
]);

/** An error of the client SDK. */
export class ClientError extends Error {
  /** Stable reason. */
  readonly code: ClientErrorCode;
  /** For a stream reset: the reset reason code it carried (`tunnel/stream/reset_reasons.ts`). */
  readonly resetCode: number | undefined;

  /** Creates the error. */
  constructor(code: ClientErrorCode, message: string, resetCode?: number) {
    super(message);
    this.name = "ClientError";
    this.code = code;
    this.resetCode = resetCode;
  }

  /**
   * The error of a stream the daemon (or the other client) reset, naming the reason, e.g.
   * `stream 7 refused: NotAllowed: not allowed for this client` with code `not_allowed`.
   *
   * @example
   * ```ts
   * import { ClientError } from "./errors.ts";
   * const error = ClientError.fromReset(7, 2);
   * console.assert(error.code === "dial_refused" && /refused the connection/.test(error.message));
   * ```
   */
  static fromReset(streamId: number, resetCode: number): ClientError {
    return new ClientError(
      RESET_CODES[resetCode] ?? "stream_reset",
      `stream ${streamId} refused: ${describeResetReason(resetCode)}`,
      resetCode,
    );
  }

  /**
   * A mistake in how the client is set up (URL, token, path, protocol version): reconnecting
   * cannot help, so the client stops and the first `connect()` rejects at once.
   */
  get fatal(): boolean {
    return FATAL.has(this.code);
  }

  /** An error the daemon sent. */
  static fromDaemon(code: ControlErrorCode, message: string): ClientError {
    return new ClientError(code, `daemon: ${message} (${code})`);
  }
}

/**
 * Explains why a stream failed, in words: a reset by the daemon or the other client names its
 * reason (e.g. "DialRefused: the target refused the connection").
 */
export function describeStreamError(error: Error): string {
  const resetCode = error instanceof YamuxError || error instanceof ClientError
    ? error.resetCode
    : undefined;
  if (resetCode !== undefined) return `reset: ${describeResetReason(resetCode)}`;
  return error.message;
}
