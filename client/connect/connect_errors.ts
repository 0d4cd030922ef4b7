/**
 * What a failed connection attempt or an ended session means, as a {@linkcode ClientError}: its
 * code decides whether the client retries (a network error, a lost session) or gives up at once
 * (a wrong URL, token, path or protocol, which retrying cannot fix).
 *
 * @module
 */

import { WebSocketConnectError } from "../../transport/ws/mod.ts";
import { ClientError } from "../errors.ts";

/**
 * What a failed dial of the daemon at `url` means: a refused WebSocket upgrade says the URL or
 * token is wrong.
 */
export function dialFailure(url: string, error: Error): ClientError {
  const status = error instanceof WebSocketConnectError ? error.status : undefined;
  if (status === 401 || status === 403) {
    return new ClientError(
      "unauthorized",
      `the daemon refused the token at ${url} (HTTP ${status})`,
    );
  }
  if (status === 404) {
    return new ClientError(
      "upgrade_refused",
      `no WebSocket listener at ${url} (HTTP 404): check the path (the daemon's default is /tunnel)`,
    );
  }
  if (status !== undefined && status >= 400 && status < 500 && status !== 429) {
    return new ClientError(
      "upgrade_refused",
      `the daemon refused the upgrade at ${url} (HTTP ${status})`,
    );
  }
  return new ClientError("connect_failed", `cannot reach ${url}: ${error.message}`);
}

/**
 * What a session with `url` that ended with `error` means (`wasReady`: its handshake had
 * succeeded); an HTTP answer on a yamux URL is a wrong port or scheme.
 */
export function sessionFailure(
  url: string,
  error: Error | undefined,
  wasReady: boolean,
): ClientError {
  // "H" (72) is the first byte of "HTTP/1.1 400 …": a tcp:// URL pointed at an HTTP port.
  if (!wasReady && error && /unsupported protocol version 72\b/.test(error.message)) {
    const host = url.replace(/^[a-z]+:\/\//, "");
    return new ClientError(
      "wrong_protocol",
      `${url} answered in HTTP: it is an HTTP/WebSocket port; use ws://${host}/tunnel`,
    );
  }
  return new ClientError("session_lost", `connection lost${error ? `: ${error.message}` : ""}`);
}
