import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { dialFailure, sessionFailure } from "./connect_errors.ts";
import { WebSocketConnectError } from "../../transport/ws/mod.ts";
import { Session } from "../../protocol/session.ts";
import { memoryPair } from "../../transport/memory.ts";

const WS_URL = "ws://127.0.0.1:7080/tunnel";
const TCP_URL = "tcp://127.0.0.1:7080";

/** A refused WebSocket upgrade, as the transport reports it. */
const upgradeRefused = (status: number) => new WebSocketConnectError(WS_URL, "refused", status);

describe("dialFailure", () => {
  it("a 401 to the upgrade (which the tunnel listener does not answer) names the admin port", () => {
    const error = dialFailure(WS_URL, upgradeRefused(401));
    assert.equal(error.code, "upgrade_refused");
    assert.equal(error.fatal, true);
    assert.match(error.message, /HTTP 401: this looks like the admin API port/);
    const forbidden = dialFailure(WS_URL, upgradeRefused(403));
    assert.equal(forbidden.code, "upgrade_refused");
    assert.match(forbidden.message, /HTTP 403\): not the daemon's WebSocket listener/);
  });

  it("a non-HTTP answer to ws:// names the listener; a yamux one the tcp:// URL to use", () => {
    const yamux = new WebSocketConnectError(
      WS_URL,
      "x",
      undefined,
      undefined,
      new Uint8Array([0, 2]),
    );
    const error = dialFailure(WS_URL, yamux);
    assert.equal(error.code, "wrong_protocol");
    assert.equal(error.fatal, true);
    assert.match(error.message, /use tcp:\/\/127\.0\.0\.1:7080$/);
    const alert = new Uint8Array([0x15, 0x03, 0x03, 0x00, 0x02, 0x02, 0x32]);
    const tls = new WebSocketConnectError(WS_URL, "x", undefined, undefined, alert);
    assert.equal(
      dialFailure(WS_URL, tls).message,
      `${WS_URL} is a TLS listener: use wss://127.0.0.1:7080/tunnel`,
    );
    const silent = new WebSocketConnectError(
      WS_URL,
      "connection closed before the upgrade response",
    );
    assert.equal(dialFailure(WS_URL, silent).code, "connect_failed");
    assert.match(dialFailure(WS_URL, silent).message, /if the listener serves TLS, use wss:\/\//);
    const other = new WebSocketConnectError(
      WS_URL,
      "x",
      undefined,
      undefined,
      new Uint8Array([83]),
    );
    assert.match(dialFailure(WS_URL, other).message, /not a WebSocket listener$/);
  });

  it("TLS answered by a plain listener, as each runtime says it, names the plain URL", () => {
    for (
      const said of [
        "received corrupt message of type InvalidContentType",
        "error:100000f7:SSL routines:OPENSSL_internal:WRONG_VERSION_NUMBER",
      ]
    ) {
      const tls = dialFailure(
        "tls://h:7000",
        new Error(`TLS handshake with h:7000 failed: ${said}`),
      );
      assert.equal(tls.code, "wrong_protocol");
      assert.match(
        tls.message,
        /use tcp:\/\/h:7000 \(ws:\/\/h:7000\/tunnel if it is the WebSocket port\)$/,
      );
      const cause = new Error(said);
      const wss = dialFailure(
        "wss://h:7080/t",
        new WebSocketConnectError("wss://h:7080/t", "x", undefined, cause),
      );
      assert.match(wss.message, /use ws:\/\/h:7080\/t$/);
    }
    const plain = dialFailure("tcp://h:7000", new Error("WRONG_VERSION_NUMBER"));
    assert.equal(plain.code, "connect_failed", "only tls:// and wss:// speak TLS");
  });

  it("a 404 names the path, and other 4xx but 429 refuse the upgrade, all fatal", () => {
    const missing = dialFailure(WS_URL, upgradeRefused(404));
    assert.equal(missing.code, "upgrade_refused");
    assert.match(missing.message, /check the path/);
    for (const status of [400, 418]) {
      const error = dialFailure(WS_URL, upgradeRefused(status));
      assert.equal(error.code, "upgrade_refused");
      assert.equal(error.fatal, true);
    }
  });

  it("a certificate not trusted, or not for the name, is retried with what to do, as each runtime says it", () => {
    const untrusted = [
      "invalid peer certificate: UnknownIssuer",
      "self signed certificate",
    ];
    for (const said of untrusted) {
      const error = dialFailure(
        "tls://h:7000",
        new Error(`TLS handshake with h:7000 failed: ${said}`),
      );
      assert.equal(error.code, "connect_failed");
      assert.match(error.message, /not trusted here: give its CA with --ca FILE\)$/);
    }
    const wrongName = [
      'invalid peer certificate: certificate not valid for name "h"; certificate is only valid for DnsName("localhost")',
      "Hostname/IP does not match certificate's altnames: Host: h. is not in the cert's altnames: DNS:localhost",
    ];
    for (const said of wrongName) {
      const cause = new Error(`TLS handshake with h:7080 failed: ${said}`);
      const wss = new WebSocketConnectError("wss://h:7080/t", cause.message, undefined, cause);
      const error = dialFailure("wss://h:7080/t", wss);
      assert.equal(error.code, "connect_failed");
      assert.match(error.message, /does not name h: use a name it holds\)$/);
    }
  });

  it("429, server errors and network errors are retried (connect_failed)", () => {
    const errors = [
      upgradeRefused(429),
      upgradeRefused(503),
      new WebSocketConnectError(WS_URL, "connection refused"),
      Object.assign(new Error("connect ECONNREFUSED 127.0.0.1:7080"), { code: "ECONNREFUSED" }),
    ];
    for (const cause of errors) {
      const error = dialFailure(TCP_URL, cause);
      assert.equal(error.code, "connect_failed");
      assert.equal(error.fatal, false);
      assert.equal(error.message, `cannot reach ${TCP_URL}: ${cause.message}`);
    }
  });
});

describe("sessionFailure", () => {
  const httpAnswer = new Error("malformed frame: unsupported protocol version 72");

  it("an HTTP answer before the handshake is the wrong protocol, naming the ws:// URL to use", () => {
    const error = sessionFailure(TCP_URL, httpAnswer, false);
    assert.equal(error.code, "wrong_protocol");
    assert.equal(error.fatal, true);
    assert.match(error.message, /use ws:\/\/127\.0\.0\.1:7080\/tunnel/);
  });

  it("a silent server on first contact is not a tunnelmux listener; later, or with bytes, it is retried", () => {
    const timedOut = new Error("handshake timed out");
    const first = sessionFailure(TCP_URL, timedOut, false, { bytesIn: 0 });
    assert.equal(first.code, "wrong_protocol");
    assert.match(first.message, /never answered/);
    assert.equal(sessionFailure(TCP_URL, timedOut, false).code, "session_lost");
    assert.equal(sessionFailure(TCP_URL, timedOut, false, { bytesIn: 40 }).code, "session_lost");
    assert.equal(sessionFailure(WS_URL, timedOut, false, { bytesIn: 0 }).code, "session_lost");
  });

  it("a TLS listener met by tcp:// is named: its alert (short of a frame) or its record type", () => {
    const closed = new Error("connection closed by peer");
    const alert = sessionFailure(TCP_URL, closed, false, { bytesIn: 7 });
    assert.equal(alert.code, "wrong_protocol");
    assert.match(
      alert.message,
      /answered 7 bytes that are no yamux frame.*use tls:\/\/127\.0\.0\.1:7080$/,
    );
    const record = sessionFailure(TCP_URL, new Error("unsupported protocol version 21"), false);
    assert.equal(record.message, `${TCP_URL} is a TLS listener: use tls://127.0.0.1:7080`);
    const silent = sessionFailure(TCP_URL, closed, false, { bytesIn: 0 });
    assert.equal(silent.code, "session_lost", "a silent close may be a refusal: retried");
    assert.match(silent.message, /if the daemon serves TLS there, use tls:\/\//);
    assert.equal(
      sessionFailure(TCP_URL, closed, false).message,
      `connection lost: ${closed.message}`,
    );
  });

  it("after a ready session, any end is a lost session, retried", () => {
    for (const cause of [httpAnswer, new Error("reset by peer"), undefined]) {
      const error = sessionFailure(TCP_URL, cause, true);
      assert.equal(error.code, "session_lost");
      assert.equal(error.fatal, false);
      assert.equal(error.message, `connection lost${cause ? `: ${cause.message}` : ""}`);
    }
  });

  it("recognises what a yamux session reports when an HTTP server answers it", async () => {
    const [ours, theirs] = memoryPair();
    const session = new Session(ours, { client: true, config: { enableKeepAlive: false } });
    theirs.start({ data: () => {}, drain: () => {}, end: () => {}, close: () => {} });
    theirs.write(new TextEncoder().encode("HTTP/1.1 400 Bad Request\r\n\r\n"));
    const ended = await session.closed;
    assert.equal(sessionFailure(TCP_URL, ended, false).code, "wrong_protocol");
    theirs.close();
  });
});
