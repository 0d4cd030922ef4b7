/**
 * What a failed connection attempt or an ended session means, as a {@linkcode ClientError}: its
 * code decides whether the client retries (a network error, a lost session) or gives up at once
 * (a wrong URL, token, path or protocol, which retrying cannot fix). A URL that reaches the wrong
 * kind of listener (another scheme's port, a plain port with TLS, the admin API) is named as such,
 * with the URL to use where it can be inferred.
 *
 * @module
 */

import { WebSocketConnectError } from "../../transport/ws/connect_error.ts";
import { ClientError } from "../errors.ts";
import { unbracketHost } from "../../util/net/address.ts";

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

/** Whether `bytes` begin a TLS record (an alert or a handshake, TLS 1.x): a TLS server's answer. */
function isTlsRecord(bytes: Uint8Array): boolean {
  return (bytes[0] === 0x15 || bytes[0] === 0x16) && bytes[1] === 0x03;
}

/** How the runtimes report a certificate from an issuer they do not trust. */
const UNTRUSTED_CERTIFICATE =
  /UnknownIssuer|self[- ]signed|unable to (verify|get local issuer)|SELF_SIGNED|UNABLE_TO_GET/i;

/** How the runtimes report a certificate that does not name the host dialed. */
const CERTIFICATE_NAME = /not valid for name|altnames|ALTNAME/i;

/** The host name of `url` (an IPv6 literal without its brackets), as a certificate names it. */
function hostnameOf(url: string): string {
  try {
    return unbracketHost(new URL(url).hostname);
  } catch {
    return hostOf(url);
  }
}

/** Whether the message of `error` or of one of its causes matches `pattern`. */
function causes(error: unknown, pattern: RegExp): boolean {
  for (let e = error, depth = 0; e instanceof Error && depth < 4; e = e.cause, depth++) {
    if (pattern.test(e.message)) return true;
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
        : isTlsRecord(answer)
        ? `${url} is a TLS listener: use wss://${hostOf(url, true)}`
        : `${url} answered in a protocol other than HTTP: it is not a WebSocket listener`,
    );
  }
  if ((scheme === "tls" || scheme === "wss") && causes(error, PLAIN_ANSWERED_TLS)) {
    // A plain TCP and a plain WebSocket listener fail the TLS handshake alike: tls:// names both.
    const plain = scheme === "tls"
      ? `tcp://${hostOf(url)} (ws://${hostOf(url)}/tunnel if it is the WebSocket port)`
      : `ws://${hostOf(url, true)}`;
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
  // Hints on errors that stay retried: a TLS listener may close on a plain upgrade request
  // without a word; a certificate may be trusted or renewed by the time of the next attempt.
  let hint = "";
  if (scheme === "ws" && /closed before the upgrade response/.test(error.message)) {
    hint = ` (if the listener serves TLS, use wss://${hostOf(url, true)})`;
  } else if ((scheme === "tls" || scheme === "wss") && causes(error, UNTRUSTED_CERTIFICATE)) {
    hint = " (the daemon's certificate is not trusted here: give its CA with --ca FILE)";
  } else if ((scheme === "tls" || scheme === "wss") && causes(error, CERTIFICATE_NAME)) {
    hint = ` (the daemon's certificate does not name ${hostnameOf(url)}: use a name it holds)`;
  }
  return new ClientError("connect_failed", `cannot reach ${url}: ${error.message}${hint}`);
}

/** What a yamux frame header takes: a daemon's first answer is never shorter. */
const FRAME_HEADER_BYTES = 12;

/**
 * What a session with `url` that ended with `error` means (`wasReady`: its handshake had
 * succeeded); an HTTP or TLS answer on a yamux URL is a wrong port or scheme. `firstContact` is
 * set when the client never had a session, with the bytes this one received: a server that said
 * nothing until the handshake timed out, or closed after less than one frame header, is not a
 * daemon.
 */
export function sessionFailure(
  url: string,
  error: Error | undefined,
  wasReady: boolean,
  firstContact?: { bytesIn: number },
): ClientError {
  const host = hostOf(url);
  const yamuxUrl = /^(tcp|tls):/.test(url);
  // "H" (72) is the first byte of "HTTP/1.1 400 …": a tcp:// URL pointed at an HTTP port.
  if (!wasReady && error && /unsupported protocol version 72\b/.test(error.message)) {
    return new ClientError(
      "wrong_protocol",
      `${url} answered in HTTP: it is an HTTP port, not the daemon's TCP listener; if it is ` +
        `the daemon's WebSocket listener, use ws://${host}/tunnel`,
    );
  }
  // 21 and 22 begin a TLS alert or handshake record: a tcp:// URL pointed at a TLS listener.
  if (
    !wasReady && error && /^tcp:/.test(url) &&
    /unsupported protocol version 2[12]\b/.test(error.message)
  ) {
    return new ClientError("wrong_protocol", `${url} is a TLS listener: use tls://${host}`);
  }
  if (firstContact && yamuxUrl && error) {
    const { bytesIn } = firstContact;
    if (bytesIn === 0 && /handshake timed out/.test(error.message)) {
      return new ClientError(
        "wrong_protocol",
        `${url} accepted the connection but never answered: it is not a tunnelmux TCP listener ` +
          `(an HTTP server waits in silence for a request; for the daemon's WebSocket listener ` +
          `use ws://${host}/tunnel)`,
      );
    }
    // A TLS listener answers a plain client with a 7-byte alert and closes.
    if (bytesIn > 0 && bytesIn < FRAME_HEADER_BYTES) {
      return new ClientError(
        "wrong_protocol",
        `${url} answered ${bytesIn} bytes that are no yamux frame and closed: it is not a ` +
          `tunnelmux TCP listener${
            /^tcp:/.test(url) ? `; if the daemon serves TLS there, use tls://${host}` : ""
          }`,
      );
    }
  }
  // A TLS listener may also close on a plain client without a word; so may a daemon that
  // refuses this address, so that guess is a hint on a retried error, not a reason to stop.
  const hint = firstContact?.bytesIn === 0 && /^tcp:/.test(url)
    ? ` (closed before any answer: if the daemon serves TLS there, use tls://${host})`
    : "";
  return new ClientError(
    "session_lost",
    `connection lost${error ? `: ${error.message}` : ""}${hint}`,
  );
}
