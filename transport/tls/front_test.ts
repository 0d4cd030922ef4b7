// The TLS front listener (tls/front.ts): a connection handed over once its ClientHello is in, then
// terminated with the certificate chosen for its name, passed on raw to a TLS service of its own,
// or refused with an alert; silence and other protocols bounded. Clients are node:tls (each
// runtime's own TLS stack under its node layer).
// Runs under `deno test -A transport/tls/front_test.ts` and `bun test transport/tls/front_test.ts`.

import assert from "node:assert/strict";
import * as net from "node:net";
import * as tls from "node:tls";
import { after, describe, it } from "node:test";
import type { Transport, TransportListener } from "../../protocol/transport.ts";
import { hasOpenssl, makeTestIdentity, type TestIdentity } from "../_test_certificate.ts";
import { Probe } from "../_test_util.ts";
import { type HelloConnection, listenTlsFront, TlsAlert } from "./front.ts";

const noOpenssl = hasOpenssl ? false : "openssl is not installed";
const empty: TestIdentity = { cert: "", key: "" };
const alpha = hasOpenssl ? makeTestIdentity("alpha", "DNS:alpha.test") : empty;
const beta = hasOpenssl ? makeTestIdentity("beta", "DNS:beta.test") : empty;
const backend = hasOpenssl ? makeTestIdentity("backend", "DNS:raw.test") : empty;

const listeners: { close(): void }[] = [];
after(() => listeners.forEach((l) => l.close()));

/** A front whose choice per connection is made by `choose`; hands back the listener's port. */
async function front(
  choose: (connection: HelloConnection) => void,
  options = {},
): Promise<TransportListener> {
  const listener = await listenTlsFront({ hostname: "127.0.0.1", port: 0 }, choose, options);
  listeners.push(listener);
  return listener;
}

/** Echoes a transport back to itself, with a prefix on the first chunk. */
function echoWith(transport: Transport, prefix: string): void {
  const probe = new Probe();
  let first = true;
  probe.onData = (chunk) => {
    if (first) transport.write(new TextEncoder().encode(prefix));
    first = false;
    transport.write(chunk);
  };
  probe.onEnd = () => transport.end();
  transport.start(probe);
}

interface ClientResult {
  text: string;
  alpn: string | false | null;
  subject: string | undefined;
}

/** Connects with node:tls as `servername`, trusting `ca`, sends "ping", reads until the end. */
function tlsClient(
  port: number,
  servername: string,
  ca: string,
  alpn?: string[],
): Promise<ClientResult> {
  return new Promise((resolve, reject) => {
    const socket = tls.connect({ host: "127.0.0.1", port, servername, ca, ALPNProtocols: alpn });
    let text = "";
    socket.on("secureConnect", () => socket.end("ping"));
    socket.on("data", (chunk) => text += chunk);
    socket.on("end", () =>
      resolve({
        text,
        alpn: socket.alpnProtocol ?? null,
        subject: socket.getPeerCertificate()?.subject?.CN as string | undefined,
      }));
    socket.on("error", reject);
  });
}

/** Sends `bytes` on plain TCP and collects what comes back until the server closes. */
function rawExchange(port: number, bytes: Uint8Array | undefined): Promise<Uint8Array> {
  return new Promise((resolve) => {
    const socket = net.connect({ host: "127.0.0.1", port });
    const got: number[] = [];
    socket.on("connect", () => bytes && socket.write(bytes));
    socket.on("data", (chunk: Uint8Array) => got.push(...chunk));
    socket.on("close", () => resolve(Uint8Array.from(got)));
    socket.on("error", () => {});
  });
}

/** The first bytes a node:tls client sends for `servername` (a real ClientHello). */
function captureClientHello(servername: string): Promise<Uint8Array> {
  return new Promise((resolve) => {
    const server = net.createServer((socket) => {
      socket.once("data", (chunk: Uint8Array) => {
        resolve(Uint8Array.from(chunk));
        socket.destroy();
        server.close();
      });
    });
    server.listen(0, "127.0.0.1", () => {
      const port = (server.address() as net.AddressInfo).port;
      const client = tls.connect({ host: "127.0.0.1", port, servername });
      client.on("error", () => {});
    });
  });
}

describe("TLS front", { skip: noOpenssl }, () => {
  it("terminates with the certificate chosen for each name", async () => {
    const seen: (string | undefined)[] = [];
    const listener = await front((connection) => {
      seen.push(connection.hello.serverName);
      const identity = connection.hello.serverName === "alpha.test" ? alpha : beta;
      connection.terminate(identity, ["http/1.1"]).then(
        (transport) => echoWith(transport, `${connection.hello.serverName}:`),
        () => {},
      );
    });
    const a = await tlsClient(listener.port, "alpha.test", alpha.cert, ["h2", "http/1.1"]);
    const b = await tlsClient(listener.port, "beta.test", beta.cert);
    assert.equal(a.text, "alpha.test:ping");
    assert.equal(a.subject, "alpha");
    assert.equal(a.alpn, "http/1.1");
    assert.equal(b.text, "beta.test:ping");
    assert.equal(b.subject, "beta");
    assert.deepEqual(seen, ["alpha.test", "beta.test"]);
  });

  it("passes the raw bytes on, ClientHello first, to a TLS service of its own", async () => {
    const service = tls.createServer({ cert: backend.cert, key: backend.key }, (socket) => {
      socket.on("data", (chunk) => socket.write(`backend:${chunk}`));
      socket.on("end", () => socket.end());
    });
    await new Promise<void>((resolve) => service.listen(0, "127.0.0.1", resolve));
    listeners.push(service);
    const servicePort = (service.address() as net.AddressInfo).port;
    const listener = await front((connection) => {
      const visitor = connection.passthrough();
      const upstream = net.connect({ host: "127.0.0.1", port: servicePort });
      const probe = new Probe();
      probe.onData = (chunk) => upstream.write(chunk);
      probe.onEnd = () => upstream.end();
      upstream.on("data", (chunk: Uint8Array) => visitor.write(chunk));
      upstream.on("end", () => visitor.end());
      upstream.on("error", () => visitor.close());
      visitor.start(probe);
    });
    const result = await tlsClient(listener.port, "raw.test", backend.cert);
    assert.equal(result.text, "backend:ping");
    assert.equal(result.subject, "backend");
  });

  it("refuses with the alert it is told, to a real ClientHello", async () => {
    const listener = await front((connection) => connection.refuse(TlsAlert.UnrecognizedName));
    const hello = await captureClientHello("nobody.test");
    const got = await rawExchange(listener.port, hello);
    assert.deepEqual([...got], [21, 3, 3, 0, 2, 2, 112]);
    await assert.rejects(tlsClient(listener.port, "nobody.test", alpha.cert));
  });

  it("answers another protocol with decode_error, without handing it over", async () => {
    let handed = 0;
    const dropped: string[] = [];
    const listener = await front(() => handed++, { onDropped: (r: string) => dropped.push(r) });
    const got = await rawExchange(
      listener.port,
      new TextEncoder().encode("GET / HTTP/1.1\r\nHost: alpha.test\r\n\r\n"),
    );
    assert.deepEqual([...got], [21, 3, 3, 0, 2, 2, TlsAlert.DecodeError]);
    assert.equal(handed, 0);
    assert.deepEqual(dropped, ["not_tls"]);
  });

  it("drops a connection silent past the hello deadline", async () => {
    const dropped: string[] = [];
    const listener = await front(() => assert.fail("nothing to hand over"), {
      helloTimeoutMs: 150,
      onDropped: (r: string) => dropped.push(r),
    });
    const got = await rawExchange(listener.port, undefined);
    assert.equal(got.length, 0);
    assert.deepEqual(dropped, ["timeout"]);
  });

  it("rejects a termination whose handshake fails, and the visitor sees it fail", async () => {
    const outcomes: string[] = [];
    const listener = await front((connection) => {
      connection.terminate(alpha).then(
        (transport) => {
          outcomes.push("done");
          transport.close();
        },
        (error: Error) => outcomes.push(`rejected: ${error.message !== ""}`),
      );
    });
    // The client trusts another certificate: it aborts the handshake.
    await assert.rejects(tlsClient(listener.port, "alpha.test", beta.cert));
    const deadline = Date.now() + 5000;
    while (outcomes.length === 0 && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    assert.deepEqual(outcomes, ["rejected: true"]);
  });

  it("reads a preamble before the hello, and reports the addresses it names", async () => {
    // A toy preamble: "FROM host:port\n".
    const reader = (bytes: Uint8Array) => {
      const text = new TextDecoder().decode(bytes);
      if (!text.startsWith("FROM ".slice(0, text.length))) throw new Error("no preamble");
      const end = text.indexOf("\n");
      if (end < 0) return null;
      return { length: end + 1, remoteAddress: text.slice(5, end) };
    };
    const seen: string[] = [];
    const dropped: string[] = [];
    const listener = await front((connection) => {
      seen.push(connection.remoteAddress);
      connection.terminate(alpha).then((visitor) => {
        seen.push(visitor.remoteAddress);
        echoWith(visitor, "alpha:");
      });
    }, { preamble: () => reader, onDropped: (reason: string) => dropped.push(reason) });
    // A real TLS client behind the preamble.
    const text = await new Promise<string>((resolve, reject) => {
      const raw = net.connect({ host: "127.0.0.1", port: listener.port });
      raw.write("FROM 192.0.2.9:4000\n");
      const socket = tls.connect({ socket: raw, servername: "alpha.test", ca: alpha.cert });
      let got = "";
      socket.on("secureConnect", () => socket.end("ping"));
      socket.on("data", (chunk) => got += chunk);
      socket.on("end", () => resolve(got));
      socket.on("error", reject);
    });
    assert.equal(text, "alpha:ping");
    assert.deepEqual(seen, ["192.0.2.9:4000", "192.0.2.9:4000"]);
    // Without it the connection is dropped before any hello is handed over.
    const hello = await captureClientHello("alpha.test");
    assert.deepEqual([...await rawExchange(listener.port, hello)], []);
    assert.deepEqual(dropped, ["preamble"]);
    assert.equal(seen.length, 2);
  });

  it("takes one choice per connection", async () => {
    const errors: string[] = [];
    const listener = await front((connection) => {
      connection.refuse(TlsAlert.HandshakeFailure);
      try {
        connection.passthrough();
      } catch (error) {
        errors.push((error as Error).message);
      }
    });
    const hello = await captureClientHello("alpha.test");
    const got = await rawExchange(listener.port, hello);
    assert.deepEqual([...got], [21, 3, 3, 0, 2, 2, TlsAlert.HandshakeFailure]);
    assert.equal(errors.length, 1);
  });
});
