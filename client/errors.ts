/**
 * Errors the client reports, with stable codes.
 *
 * @module
 */

import type { ControlErrorCode } from "../tunnel/control.ts";
import { YamuxError } from "../protocol/errors.ts";
import { describeResetReason } from "../tunnel/reset_reasons.ts";

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
  | "forward_failed";

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

  /** Creates the error. */
  constructor(code: ClientErrorCode, message: string) {
    super(message);
    this.name = "ClientError";
    this.code = code;
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
  if (error instanceof YamuxError && error.resetCode !== undefined) {
    return `reset: ${describeResetReason(error.resetCode)}`;
  }
  return error.message;
}
