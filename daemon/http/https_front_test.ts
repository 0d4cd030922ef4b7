// The HTTPS front's choice for one connection, given its ClientHello: refuse, pass through, or
// terminate and serve HTTP. The connection is a small fake of HelloConnection that records what
// was done with it; a terminated connection is one end of an in-memory pair, the other end
// playing the visitor's decrypted side.
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { Session } from "../../protocol/session.ts";
import type { Transport } from "../../protocol/transport.ts";
import { memoryPair } from "../../transport/memory.ts";
import { type HelloConnection, TlsAlert, type TlsIdentity } from "../../transport/tls/front.ts";
import { waitFor } from "../../testing/wait.ts";
import { type HttpsFrontOptions, type HttpsRoute, serveHttpsConnection } from "./https_front.ts";

const APP: TlsIdentity = { cert: "app-cert", key: "app-key" };
const OTHER: TlsIdentity = { cert: "other-cert", key: "other-key" };
const CHALLENGE: TlsIdentity = { cert: "acme-cert", key: "acme-key" };
const QUIET = { enableKeepAlive: false };

/** A connection whose hello named `serverName` and offered `alpn`; records what was done. */
function connection(serverName: string | undefined, alpn: string[] = ["h2", "http/1.1"]) {
  const [decrypted, visitor] = memoryPair();
  const raw = memoryPair()[0];
  const done = {
    refused: [] as TlsAlert[],
    passedThrough: 0,
    terminated: [] as { identity: TlsIdentity; alpn: readonly string[] | undefined }[],
    ended: false,
  };
  let failHandshake = false;
  const conn: HelloConnection = {
    hello: { serverName, alpn, length: 100 },
    remoteAddress: "192.0.2.7:50000",
    localAddress: "127.0.0.1:443",
    passthrough: () => {
      done.passedThrough++;
      return raw;
    },
    terminate: (identity, offered) => {
      done.terminated.push({ identity, alpn: offered });
      if (failHandshake) return Promise.reject(new Error("handshake failed"));
      const end = decrypted.end.bind(decrypted);
      decrypted.end = () => {
        done.ended = true;
        end();
      };
      return Promise.resolve(decrypted);
    },
    refuse: (alert) => done.refused.push(alert),
  };
  return {
    conn,
    done,
    raw,
    visitor,
    failHandshake: () => failHandshake = true,
  };
}

/** Front options: `app.example.com` held by `route`, certificates by name, refusals recorded. */
function front(route: HttpsRoute | undefined, more: Partial<HttpsFrontOptions> = {}) {
  const refusals: string[] = [];
  const asked: string[] = [];
  const options: HttpsFrontOptions = {
    route: (host) => {
      asked.push(host);
      return host === "app.example.com" || host === "www.example.com" ? route : undefined;
    },
    certificate: (host) =>
      host === "app.example.com" || host === "www.example.com"
        ? APP
        : host === "other.example.com"
        ? OTHER
        : undefined,
    http: { route: () => undefined, trustForwarded: false },
    onRefused: (reason, host) => refusals.push(`${reason} ${host}`),
    ...more,
  };
  return { options, refusals, asked };
}

/** Sends `request` on the visitor's side and resolves with the response's status line. */
function statusLine(visitor: Transport, request: string): Promise<string> {
  return new Promise((resolve) => {
    let text = "";
    const done = () => resolve(text.split("\r\n")[0]);
    visitor.start({
      data: (chunk) => {
        text += new TextDecoder().decode(chunk);
        if (text.includes("\r\n")) done();
      },
      drain() {},
      end: done,
      close: done,
    });
    visitor.write(new TextEncoder().encode(request));
  });
}

const PASSTHROUGH = (seen: Transport[]): HttpsRoute => ({
  passthrough: true,
  visitor: (t) => seen.push(t),
});
const TERMINATED: HttpsRoute = {
  passthrough: false,
  visitor: () => assert.fail("a terminated tunnel takes requests, not connections"),
};

describe("serveHttpsConnection", () => {
  it("refuses a hello without a server name, asking no tunnel", () => {
    const { conn, done } = connection(undefined);
    const { options, refusals, asked } = front(TERMINATED);
    serveHttpsConnection(conn, options);
    assert.deepEqual(done.refused, [TlsAlert.UnrecognizedName]);
    assert.deepEqual(refusals, ["no_name undefined"]);
    assert.deepEqual(asked, []);
  });

  it("refuses a name no tunnel holds with unrecognized_name", () => {
    const { conn, done } = connection("nobody.example.com");
    const { options, refusals } = front(TERMINATED);
    serveHttpsConnection(conn, options);
    assert.deepEqual(done.refused, [TlsAlert.UnrecognizedName]);
    assert.deepEqual(refusals, ["unknown_host nobody.example.com"]);
    assert.deepEqual(done.terminated, []);
  });

  it("passes a TLS tunnel's connection through undecrypted to its tunnel", () => {
    const { conn, done, raw } = connection("app.example.com");
    const seen: Transport[] = [];
    const { options, refusals } = front(PASSTHROUGH(seen));
    serveHttpsConnection(conn, options);
    assert.deepEqual(seen, [raw]);
    assert.equal(done.passedThrough, 1);
    assert.deepEqual(done.terminated, []);
    assert.deepEqual(refusals, []);
  });

  it("refuses an HTTP tunnel's name that no certificate serves", () => {
    const { conn, done } = connection("app.example.com");
    const { options, refusals } = front(TERMINATED, { certificate: () => undefined });
    serveHttpsConnection(conn, options);
    assert.deepEqual(done.refused, [TlsAlert.UnrecognizedName]);
    assert.deepEqual(refusals, ["no_certificate app.example.com"]);
    assert.deepEqual(done.terminated, []);
  });

  it("terminates an HTTP tunnel's name with its certificate, offering HTTP/1.1 only", async () => {
    const { conn, done, visitor } = connection("app.example.com");
    const { options } = front(TERMINATED);
    serveHttpsConnection(conn, options);
    assert.deepEqual(done.terminated, [{ identity: APP, alpn: ["http/1.1"] }]);
    assert.deepEqual(done.refused, []);
    // The decrypted connection is served as HTTP: no tunnel for this request's host there.
    const line = await statusLine(visitor, "GET / HTTP/1.1\r\nHost: nobody.example.com\r\n\r\n");
    assert.match(line, /^HTTP\/1\.1 404 /);
  });

  it("serves on a terminated connection only the names its certificate serves (421 otherwise)", async () => {
    // www.example.com has the same certificate; other.example.com another one.
    const opened: string[] = [];
    const route = {
      open: () => {
        opened.push("open");
        return undefined;
      },
    };
    const served = (host: string) => {
      const { conn, visitor } = connection("app.example.com");
      const { options } = front(TERMINATED, {
        http: { route: () => route, trustForwarded: false },
      });
      serveHttpsConnection(conn, options);
      return statusLine(visitor, `GET / HTTP/1.1\r\nHost: ${host}\r\n\r\n`);
    };
    assert.match(await served("other.example.com"), /^HTTP\/1\.1 421 /);
    assert.deepEqual(opened, []);
    // Same certificate: routed (the route opens nothing here, hence 502).
    assert.match(await served("www.example.com"), /^HTTP\/1\.1 502 /);
    assert.deepEqual(opened, ["open"]);
  });

  it("forwards a terminated connection's requests to the client as https", async () => {
    // The client's end of a tunnel: what arrives on its stream is the forwarded request.
    const [near, far] = memoryPair();
    let forwarded = "";
    const daemonSide = new Session(near, { client: false, config: QUIET });
    const clientSide = new Session(far, {
      client: true,
      config: QUIET,
      onStream: (stream) => {
        stream.onData = (chunk) => forwarded += new TextDecoder().decode(chunk);
      },
    });
    try {
      const { conn, visitor } = connection("app.example.com");
      const { options } = front(TERMINATED, {
        http: { route: () => ({ open: () => daemonSide.open() }), trustForwarded: false },
      });
      serveHttpsConnection(conn, options);
      void statusLine(visitor, "GET /path HTTP/1.1\r\nHost: app.example.com\r\n\r\n");
      await waitFor(() => forwarded.includes("\r\n\r\n"), "the forwarded request head");
      assert.match(forwarded, /^GET \/path HTTP\/1\.1\r\n/);
      assert.match(forwarded, /\r\nx-forwarded-proto: https\r\n/i);
    } finally {
      daemonSide.close();
      clientSide.close();
    }
  });

  it("reports a failed handshake of a terminated connection", async () => {
    const { conn, failHandshake } = connection("app.example.com");
    failHandshake();
    const { options, refusals } = front(TERMINATED);
    serveHttpsConnection(conn, options);
    await waitFor(() => refusals.length > 0, "the failure reported");
    assert.deepEqual(refusals, ["handshake_failed app.example.com"]);
  });

  it("answers an ACME TLS-ALPN-01 validation with the challenge's certificate, whoever holds the name", async () => {
    const { conn, done } = connection("app.example.com", ["acme-tls/1"]);
    const seen: Transport[] = [];
    const { options, asked } = front(PASSTHROUGH(seen), {
      acmeIdentity: (host) => host === "app.example.com" ? CHALLENGE : undefined,
    });
    serveHttpsConnection(conn, options);
    assert.deepEqual(done.terminated, [{ identity: CHALLENGE, alpn: ["acme-tls/1"] }]);
    assert.deepEqual(asked, [], "no tunnel asked");
    assert.deepEqual(seen, []);
    // The handshake is the answer: the connection is ended right after it.
    await waitFor(() => done.ended, "the connection ended");
  });

  it("refuses an ACME validation for a name with no challenge under way", () => {
    const { conn, done } = connection("app.example.com", ["acme-tls/1"]);
    const { options, refusals } = front(TERMINATED, { acmeIdentity: () => undefined });
    serveHttpsConnection(conn, options);
    assert.deepEqual(done.refused, [TlsAlert.UnrecognizedName]);
    assert.deepEqual(refusals, ["unknown_host app.example.com"]);
    const without = connection("app.example.com", ["acme-tls/1"]);
    serveHttpsConnection(without.conn, front(TERMINATED).options);
    assert.deepEqual(without.done.refused, [TlsAlert.UnrecognizedName]);
  });
});
