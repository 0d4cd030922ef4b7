// The HTTPS port behind a trusted TCP front (a load balancer listed in trustedProxies): the front
// names the visitor in a PROXY header (v1 or v2) before the TLS ClientHello, and the visitor
// rules judge that visitor, whether the name's TLS is terminated by the daemon (an HTTP tunnel)
// or passed through to the client (a TLS tunnel). Real sockets from distinct loopback addresses.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createServer, type Server } from "node:http";
import { createServer as createTlsServer } from "node:https";
import { connect as tlsConnect } from "node:tls";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type Client, connect } from "../client/mod.ts";
import type { Daemon } from "../daemon/daemon.ts";
import { portOf, startDaemonInProcess } from "./_in_process_daemon.ts";
import { tcpConnect } from "../testing/visitors.ts";
import { DEFAULT_TIMEOUT_MS, withTimeout } from "../testing/wait.ts";
import { encodeProxyV1, encodeProxyV2 } from "../tunnel/proxy_protocol/proxy_protocol.ts";
import { hasOpenssl, makeTestIdentity, type TestIdentity } from "../transport/_test_certificate.ts";

const TOKEN = "https-proxy-test-0123456789abcdef";
const DOMAIN = "tunnels.test";
const FRONT = "127.0.0.8";
const noOpenssl = hasOpenssl ? false : "openssl is not installed";
const empty: TestIdentity = { cert: "", key: "" };
const wildcard = hasOpenssl ? makeTestIdentity("wildcard", `DNS:*.${DOMAIN}`) : empty;
const own = hasOpenssl ? makeTestIdentity("own", `DNS:secure.${DOMAIN}`) : empty;

describe("the HTTPS port behind a trusted front's PROXY header", { skip: noOpenssl }, () => {
  let daemon: Daemon;
  let client: Client;
  let dir: string;
  let httpsPort: number;
  const servers: Server[] = [];
  let plain: string;
  let secure: string;

  const listen = (server: Server) =>
    new Promise<string>((resolve) => {
      servers.push(server);
      server.listen(0, "127.0.0.1", () => {
        resolve(`127.0.0.1:${(server.address() as { port: number }).port}`);
      });
    });

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), "tunnelmux-https-proxy-"));
    writeFileSync(join(dir, "cert.pem"), wildcard.cert);
    writeFileSync(join(dir, "key.pem"), wildcard.key, { mode: 0o600 });
    daemon = await startDaemonInProcess({
      listen: {
        tcp: "127.0.0.1:0",
        websocket: null,
        admin: null,
        http: "127.0.0.1:0",
        https: "127.0.0.1:0",
      },
      http: {
        domain: DOMAIN,
        certificates: [{ cert: join(dir, "cert.pem"), key: join(dir, "key.pem") }],
      },
      trustedProxies: [`${FRONT}/32`],
      clients: [{
        name: "alice",
        token: TOKEN,
        expose: { hosts: ["*"] },
        visitors: { deny: ["127.0.0.7/32"] },
      }],
    });
    httpsPort = portOf(daemon.addresses.https);
    // The app says which visitor the daemon named.
    plain = await listen(
      createServer((req, res) => res.end(`for=${req.headers["x-forwarded-for"]}`)),
    );
    secure = await listen(
      createTlsServer({ cert: own.cert, key: own.key }, (_req, res) => res.end("own-tls")),
    );
    client = await connect(`tcp://${daemon.addresses.tcp}`, { token: TOKEN, reconnect: false });
  });

  after(async () => {
    await client?.close();
    daemon?.stop();
    for (const s of servers) s.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  /**
   * One GET over TLS to the HTTPS port as `name`, from `from`, with `header` first: the answer's
   * body, or "refused" when the connection failed or closed without one.
   */
  async function visit(
    from: string,
    header: Uint8Array | undefined,
    name: string,
    ca: string,
  ): Promise<string> {
    const socket = await tcpConnect(httpsPort, "127.0.0.1", from);
    if (header) socket.write(header);
    try {
      return await withTimeout(
        new Promise<string>((resolve) => {
          const secured = tlsConnect({ socket, servername: name, ca });
          let got = "";
          secured.setEncoding("latin1");
          secured.on("secureConnect", () => {
            secured.write(`GET / HTTP/1.1\r\nHost: ${name}\r\nConnection: close\r\n\r\n`);
          });
          secured.on("data", (d: string) => got += d);
          secured.on("error", () => resolve("refused"));
          const finish = () => {
            const split = got.indexOf("\r\n\r\n");
            resolve(split < 0 ? "refused" : got.slice(split + 4));
          };
          // The socket under it is half-open capable: the daemon's end is the answer's end.
          secured.on("end", finish);
          secured.on("close", finish);
        }),
        DEFAULT_TIMEOUT_MS,
        "an HTTPS answer or a close",
      );
    } finally {
      socket.destroy();
    }
  }

  const to = () => `127.0.0.1:${httpsPort}`;

  it("a terminated name: the header's source is the visitor the rules and the app see", async () => {
    const tunnel = await client.expose({ local: plain, http: "web" });
    try {
      const host = `web.${DOMAIN}`;
      assert.equal(
        await visit(FRONT, encodeProxyV1("127.0.0.2:5555", to()), host, wildcard.cert),
        "for=127.0.0.2",
      );
      assert.equal(
        await visit(FRONT, encodeProxyV2("127.0.0.3:5555", to()), host, wildcard.cert),
        "for=127.0.0.3",
      );
      // The operator denies 127.0.0.7: through the front too.
      const denied = await visit(FRONT, encodeProxyV1("127.0.0.7:5555", to()), host, wildcard.cert);
      assert.ok(!denied.startsWith("for="), denied);
      // A trusted front's connection without a header is not taken.
      assert.equal(await visit(FRONT, undefined, host, wildcard.cert), "refused");
      // From anyone else a header is not believed (it is no ClientHello).
      assert.equal(
        await visit("127.0.0.2", encodeProxyV1("127.0.0.3:5555", to()), host, wildcard.cert),
        "refused",
      );
      assert.equal(await visit("127.0.0.2", undefined, host, wildcard.cert), "for=127.0.0.2");
    } finally {
      await tunnel.close();
    }
  });

  it("a passed-through name: the visitor rules judge the header's source", async () => {
    const tunnel = await client.expose({ local: secure, tls: "secure" });
    try {
      const host = `secure.${DOMAIN}`;
      assert.equal(
        await visit(FRONT, encodeProxyV2("127.0.0.2:5555", to()), host, own.cert),
        "own-tls",
      );
      assert.equal(
        await visit(FRONT, encodeProxyV1("127.0.0.7:5555", to()), host, own.cert),
        "refused",
      );
      assert.equal(await visit("127.0.0.7", undefined, host, own.cert), "refused");
    } finally {
      await tunnel.close();
    }
  });
});
