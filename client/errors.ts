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
  | "session_lost"
  | "not_connected"
  | "timeout"
  | "closed"
  | "protocol"
  | "tunnel_closed"
  | "local_dial_failed"
  | "forward_failed";

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

  /** A wrong token or protocol version: reconnecting cannot help, so the client stops. */
  get fatal(): boolean {
    return this.code === "unauthorized" || this.code === "version_mismatch";
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
