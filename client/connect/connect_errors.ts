/**
 * What a failed connection attempt or an ended session means, as a {@linkcode ClientError}: its
 * code decides whether the client retries (a network error, a lost session) or gives up at once
 * (a wrong URL, token, path or protocol, which retrying cannot fix). A URL that reaches the wrong
 * kind of listener (another scheme's port, a plain port with TLS, the admin API) is named as such,
 * with the URL to use where it can be inferred.
 *
 * @module
 */

import { WebSocketConnectError } from "../../transport/ws/mod.ts";
import { ClientError } from "../errors.ts";

/** How the runtimes report a TLS handshake answered by a plain (non-TLS) server. */
const PLAIN_ANSWERED_TLS = /InvalidContentType|WRONG_VERSION_NUMBER|wrong version number/i;

/** `host:port` (and, with `path`, the path) of `url`, for a suggested URL. */
function hostOf(url: string, path = false): string {
  try {
    const parsed = new URL(url);
    return parsed.host + (path ? parsed.pathname.replace(/^\/?$/, "/tunnel") : "");
  } catch {
    return url.replace(/^[a-z]+:\/\//, "");
  }
}

/** Whether `error` or one of its causes is a TLS handshake that a plain server answered. */
function plainAnsweredTls(error: unknown): boolean {
  for (let e = error, depth = 0; e instanceof Error && depth < 4; e = e.cause, depth++) {
    if (PLAIN_ANSWERED_TLS.test(e.message)) return true;
  }
  return false;
}

/**
 * What a failed dial of the daemon at `url` means: a refused WebSocket upgrade says the URL or
 * token is wrong; a non-HTTP answer to ws:// or a non-TLS answer to tls:// and wss:// says the
 * URL names the wrong kind of listener.
 */
export function dialFailure(url: string, error: Error): ClientError {
  const status = error instanceof WebSocketConnectError ? error.status : undefined;
  const answer = error instanceof WebSocketConnectError ? error.answer : undefined;
  const scheme = url.slice(0, url.indexOf(":"));
  if (answer !== undefined) {
    return new ClientError(
      "wrong_protocol",
      answer[0] === 0
        ? `${url} is a tunnelmux TCP (yamux) listener, not a WebSocket one: use tcp://${
          hostOf(url)
        }`
        : `${url} answered in a protocol other than HTTP: it is not a WebSocket listener`,
    );
  }
  if ((scheme === "tls" || scheme === "wss") && plainAnsweredTls(error)) {
    const plain = scheme === "tls" ? `tcp://${hostOf(url)}` : `ws://${hostOf(url, true)}`;
    return new ClientError(
      "wrong_protocol",
      `${url} did not answer in TLS: the listener is plain (the daemon serves TLS only with ` +
        `--tls-cert); use ${plain}`,
    );
  }
  if (status === 401) {
    // This client sends its token in the handshake, never with the upgrade, so the daemon's
    // WebSocket listener has no reason to answer it 401: the admin API (bearer token) does.
    return new ClientError(
      "upgrade_refused",
      `${url} answered HTTP 401: this looks like the admin API port; the daemon's WebSocket ` +
        `listener (ws://HOST:7080/tunnel by default, --listen-ws) takes the token in its handshake`,
    );
  }
  if (status === 403) {
    return new ClientError(
      "upgrade_refused",
      `${url} refused the upgrade (HTTP 403): not the daemon's WebSocket listener, or a proxy ` +
        `in front of it refuses WebSocket`,
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
 * succeeded); an HTTP answer on a yamux URL is a wrong port or scheme. `firstContact`: the client
 * never had a session and this one received no byte, so a handshake that timed out met a server
 * that waits in silence (an HTTP server waiting for a request), not a daemon.
 */
export function sessionFailure(
  url: string,
  error: Error | undefined,
  wasReady: boolean,
  firstContact = false,
): ClientError {
  const host = hostOf(url);
  // "H" (72) is the first byte of "HTTP/1.1 400 …": a tcp:// URL pointed at an HTTP port.
  if (!wasReady && error && /unsupported protocol version 72\b/.test(error.message)) {
    return new ClientError(
      "wrong_protocol",
      `${url} answered in HTTP: it is an HTTP port, not the daemon's TCP listener; if it is ` +
        `the daemon's WebSocket listener, use ws://${host}/tunnel`,
    );
  }
  if (
    firstContact && /^(tcp|tls):/.test(url) && error && /handshake timed out/.test(error.message)
  ) {
    return new ClientError(
      "wrong_protocol",
      `${url} accepted the connection but never answered: it is not a tunnelmux TCP listener ` +
        `(an HTTP server waits in silence for a request; for the daemon's WebSocket listener ` +
        `use ws://${host}/tunnel)`,
    );
  }
  return new ClientError("session_lost", `connection lost${error ? `: ${error.message}` : ""}`);
}
