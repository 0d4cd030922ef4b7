/**
 * The error of a failed WebSocket connection attempt, in a module of its own: the client's error
 * reporting checks for it on every failed connect, without loading the WebSocket code for a
 * `tcp://` server.
 *
 * @example
 * ```ts
 * import { WebSocketConnectError } from "./connect_error.ts";
 * const error = new WebSocketConnectError("ws://127.0.0.1:7080/tunnel", "refused", 401);
 * console.assert(error.status === 401 && error.name === "WebSocketConnectError");
 * ```
 *
 * @module
 */

/** A WebSocket connection attempt failed; `status` is the HTTP status of a refused upgrade. */
export class WebSocketConnectError extends Error {
  /** The HTTP status the server answered the upgrade with, when the runtime reports it. */
  readonly status: number | undefined;
  /**
   * The first bytes the server sent when they were not an HTTP response (another protocol's
   * port: a yamux listener's first byte is 0), else undefined.
   */
  readonly answer: Uint8Array | undefined;

  /**
   * Describes a failed connection to `url`; `detail` is the runtime's own message, `cause` the
   * underlying error when there is one (a refused TCP connect, a TLS handshake failure).
   */
  constructor(
    url: string,
    detail: string,
    status?: number,
    cause?: unknown,
    answer?: Uint8Array,
  ) {
    super(
      status === undefined
        ? `WebSocket connection to ${url} failed: ${detail}`
        : `WebSocket upgrade to ${url} refused with HTTP ${status}`,
      cause === undefined ? undefined : { cause },
    );
    this.name = "WebSocketConnectError";
    this.status = status;
    this.answer = answer;
  }
}
