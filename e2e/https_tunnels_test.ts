// HTTPS and TLS tunnels by server name, end to end on one node: a daemon with shared
// HTTP and HTTPS ports, a wildcard certificate for its base domain, SDK clients and the client CLI
// holding names, node:https and curl as visitors (--resolve to 127.0.0.1, trusting only the
// certificate they should see). Terminated names reach plain HTTP apps through the HTTP front;
// passed-through names reach a TLS app of the client's, which shows its own certificate.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { createHash, randomBytes } from "node:crypto";
import type { Duplex } from "node:stream";
import { listenWebSocket } from "../transport/ws/mod.ts";
import { acceptFor } from "../transport/ws/handshake.ts";
import { encodeFrame, MessageDecoder, randomMask } from "../transport/ws/frame.ts";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createServer, type Server } from "node:http";
import { Agent, createServer as createTlsServer, request } from "node:https";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type Client, connect } from "../client/mod.ts";
import type { Daemon } from "../daemon/daemon.ts";
import { portOf, startDaemonInProcess } from "./_in_process_daemon.ts";
import { Logger } from "../util/log.ts";
import { startClient } from "../testing/mod.ts";
import { createAdminApp } from "../daemon/admin/app.ts";
import { hashToken } from "../daemon/config/token_hash.ts";
import { hasOpenssl, makeTestIdentity, type TestIdentity } from "../transport/_test_certificate.ts";

const ALICE = "https-test-alice-0123456789abcdef";
const DOMAIN = "tunnels.test";
const ADMIN = "https-test-admin-0123456789abcdef";
const BIG = 20 * 1024 * 1024;
const noOpenssl = hasOpenssl ? false : "openssl is not installed";
const empty: TestIdentity = { cert: "", key: "" };
/** The daemon's certificate: every label under the domain. */
const wildcard = hasOpenssl ? makeTestIdentity("wildcard", `DNS:*.${DOMAIN}`) : empty;
/** The client's own TLS service's certificate, for a passed-through name. */
const own = hasOpenssl
  ? makeTestIdentity("own", `DNS:secure.${DOMAIN},DNS:clitls.${DOMAIN}`)
  : empty;

/** 20 MiB that are not all the same byte. */
function bigBody(): Uint8Array {
  const body = new Uint8Array(BIG);
  for (let i = 0; i < BIG; i++) body[i] = (i * 31 + (i >>> 13)) & 0xff;
  return body;
}

/** A local web app that says who it is and what it saw. */
function app(name: string, big: Uint8Array): Promise<{ server: Server; address: string }> {
  const server = createServer((req, res) => {
    if (req.url === "/big") return void res.end(big);
    res.setHeader("content-type", "application/json");
    res.end(JSON.stringify({
      name,
      url: req.url,
      proto: req.headers["x-forwarded-proto"],
      host: req.headers["x-forwarded-host"],
    }));
  });
  return new Promise((resolve) =>
    server.listen(
      0,
      "127.0.0.1",
      () =>
        resolve({ server, address: `127.0.0.1:${(server.address() as { port: number }).port}` }),
    )
  );
}

describe("HTTPS and TLS tunnels by server name", { skip: noOpenssl }, () => {
  let daemon: Daemon;
  let url: string;
  let httpPort: number;
  let httpsPort: number;
  let client: Client;
  let dir: string;
  const big = hasOpenssl ? bigBody() : new Uint8Array(0);
  const servers: Server[] = [];
  let plain: string;
  let secure: string;

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), "tunnelmux-https-"));
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
      clients: [{ name: "alice", token: ALICE, expose: { hosts: ["*", "shop.example.org"] } }],
    });
    url = `tcp://${daemon.addresses.tcp}`;
    httpPort = portOf(daemon.addresses.http);
    httpsPort = portOf(daemon.addresses.https);
    const web = await app("web", big);
    servers.push(web.server);
    plain = web.address;
    // The client's own TLS service: the daemon never sees inside.
    const tlsApp = createTlsServer({ cert: own.cert, key: own.key }, (req, res) => {
      res.setHeader("content-type", "application/json");
      res.end(
        JSON.stringify({ name: "own-tls", url: req.url, proto: req.headers["x-forwarded-proto"] }),
      );
    });
    await new Promise<void>((resolve) => tlsApp.listen(0, "127.0.0.1", resolve));
    servers.push(tlsApp);
    secure = `127.0.0.1:${(tlsApp.address() as { port: number }).port}`;
    client = await connect(url, { token: ALICE, reconnect: false });
  });

  after(async () => {
    await client?.close();
    daemon?.stop();
    for (const s of servers) s.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  /** A GET over HTTPS to the daemon's port as `host`, trusting `ca` only. */
  function get(
    host: string,
    path: string,
    ca: string,
    agent?: Agent,
    hostField = host,
  ): Promise<{ status: number; body: Buffer; subject: string | undefined }> {
    return new Promise((resolve, reject) => {
      const req = request({
        host: "127.0.0.1",
        port: httpsPort,
        path,
        servername: host,
        headers: { host: hostField },
        ca,
        agent: agent ?? false,
      }, (res) => {
        const chunks: Buffer[] = [];
        const subject =
          (res.socket as unknown as { getPeerCertificate(): { subject?: { CN?: string } } })
            .getPeerCertificate()?.subject?.CN;
        res.on("data", (d: Buffer) => chunks.push(d));
        res.on(
          "end",
          () => resolve({ status: res.statusCode!, body: Buffer.concat(chunks), subject }),
        );
      });
      req.on("error", reject).end();
    });
  }

  it("terminates HTTPS with the wildcard, routing each request of a kept-alive connection", async () => {
    const web = await client.expose({ local: plain, http: "web" });
    const shop = await client.expose({ local: plain, http: "web2" });
    try {
      assert.equal(web.url, `https://web.${DOMAIN}:${httpsPort}/`);
      assert.equal(web.remotePort, httpsPort);
      const agent = new Agent({ keepAlive: true, maxSockets: 1 });
      try {
        const first = await get(`web.${DOMAIN}`, "/one", wildcard.cert, agent);
        assert.equal(first.subject, "wildcard");
        assert.deepEqual(JSON.parse(first.body.toString()), {
          name: "web",
          url: "/one",
          proto: "https",
          host: `web.${DOMAIN}`,
        });
        const second = await get(`web2.${DOMAIN}`, "/two", wildcard.cert, agent);
        assert.equal(JSON.parse(second.body.toString()).url, "/two");
      } finally {
        agent.destroy();
      }
      // The admin API lists the tunnel with the certificate its host is served with.
      const admin = createAdminApp(daemon, {
        hostname: "127.0.0.1",
        port: 7081,
        log: new Logger({ level: "error", format: "json", sink: () => {} }),
        tokenHash: () => hashToken(ADMIN),
      });
      const ask = async (path: string) => {
        const response = await admin.request(path, {
          headers: { host: "127.0.0.1:7081", authorization: `Bearer ${ADMIN}` },
        });
        return await response.json();
      };
      const { tunnels } = await ask("/v1/tunnels");
      const listed = tunnels.find((t: { host: string }) => t.host === `web.${DOMAIN}`);
      assert.equal(listed.passthrough, false);
      assert.deepEqual(listed.certificate.names, [`*.${DOMAIN}`]);
      assert.equal(listed.certificate.source, "file");
      assert.ok(Date.parse(listed.certificate.notAfter) > Date.now());
      const { certificates } = await ask("/v1/certificates");
      assert.deepEqual(certificates.map((c: { names: string[] }) => c.names), [[`*.${DOMAIN}`]]);
      // The same names on the HTTP port, unencrypted.
      const viaHttp = await new Promise<string>((resolve, reject) =>
        execFile(
          "curl",
          ["-sS", "-H", `Host: web.${DOMAIN}`, `http://127.0.0.1:${httpPort}/plain`],
          { timeout: 10_000 },
          (error, stdout) => error ? reject(error) : resolve(stdout),
        )
      );
      assert.equal(JSON.parse(viaHttp).proto, "http");
    } finally {
      await Promise.all([web.close(), shop.close()]);
    }
  });

  it("a WebSocket through a terminated HTTPS tunnel: the upgrade, and messages both ways", async () => {
    // The client's service is a real WebSocket server (this runtime's own), echoing messages.
    const server = await listenWebSocket({ hostname: "127.0.0.1", port: 0, path: "/ws" }, (t) => {
      t.start({
        data: (chunk) => void t.write(chunk),
        drain: () => {},
        end: () => t.end(),
        close: () => {},
      });
    });
    const tunnel = await client.expose({ local: `127.0.0.1:${server.port}`, http: "sock" });
    try {
      const key = randomBytes(16).toString("base64");
      const upgraded = await new Promise<{ socket: Duplex; accept: unknown; head: Buffer }>(
        (resolve, reject) => {
          request({
            host: "127.0.0.1",
            port: httpsPort,
            path: "/ws",
            servername: `sock.${DOMAIN}`,
            ca: wildcard.cert,
            headers: {
              host: `sock.${DOMAIN}`,
              connection: "Upgrade",
              upgrade: "websocket",
              "sec-websocket-version": "13",
              "sec-websocket-key": key,
            },
          }).on(
            "upgrade",
            (res, socket, head) =>
              resolve({ socket, accept: res.headers["sec-websocket-accept"], head }),
          ).on("response", (res) => reject(new Error(`no upgrade: ${res.statusCode}`)))
            .on("error", reject).end();
        },
      );
      assert.equal(upgraded.accept, acceptFor(key));
      // Our WebSocket transport is a byte stream: the echo may come back in other message
      // boundaries than it went, so the bytes are compared, not the messages.
      let received = "";
      const decoder = new MessageDecoder({ maxMessageSize: 1 << 20, masked: false });
      const gotAll = new Promise<void>((resolve) => {
        const feed = (chunk: Uint8Array) =>
          decoder.push(chunk, (opcode, payload) => {
            if (opcode === 2) received += new TextDecoder().decode(payload);
            if (received.length >= "firstsecond".length) resolve();
          });
        if (upgraded.head.length > 0) feed(upgraded.head);
        upgraded.socket.on("data", feed);
      });
      for (const text of ["first", "second"]) {
        upgraded.socket.write(encodeFrame(2, new TextEncoder().encode(text), randomMask()));
      }
      await gotAll;
      assert.equal(received, "firstsecond");
      upgraded.socket.destroy();
    } finally {
      await tunnel.close();
      server.close();
    }
  });

  it("passes a TLS tunnel's connections through to the client's own TLS service", async () => {
    const tunnel = await client.expose({ local: secure, tls: "secure" });
    try {
      assert.equal(tunnel.url, `https://secure.${DOMAIN}:${httpsPort}/`);
      const got = await get(`secure.${DOMAIN}`, "/inside", own.cert);
      assert.equal(got.subject, "own");
      // Nothing was added on the way: the daemon never decrypted it.
      assert.deepEqual(JSON.parse(got.body.toString()), { name: "own-tls", url: "/inside" });
      // The wildcard does not open it: the name's TLS is the client's.
      await assert.rejects(get(`secure.${DOMAIN}`, "/", wildcard.cert));
      // And a TLS tunnel's name takes no plain HTTP requests.
      const status = await new Promise<string>((resolve, reject) =>
        execFile(
          "curl",
          [
            "-sS",
            "-o",
            "/dev/null",
            "-w",
            "%{http_code}",
            "-H",
            `Host: secure.${DOMAIN}`,
            `http://127.0.0.1:${httpPort}/`,
          ],
          { timeout: 10_000 },
          (error, stdout) => error ? reject(error) : resolve(stdout),
        )
      );
      assert.equal(status, "404");
    } finally {
      await tunnel.close();
    }
  });

  it("refuses a name nobody holds and a name without a certificate, touching no client", async () => {
    const before = daemon.counters.snapshot();
    await assert.rejects(get(`nobody.${DOMAIN}`, "/", wildcard.cert));
    // Held, but no certificate serves it: the tunnel is an HTTP one, and says so.
    const shop = await client.expose({ local: plain, http: "shop.example.org" });
    const web = await client.expose({ local: plain, http: "web" });
    try {
      assert.equal(shop.url, `http://shop.example.org:${httpPort}/`);
      await assert.rejects(get("shop.example.org", "/", wildcard.cert));
      // Nor through a connection made for a name the wildcard serves: 421, not the tunnel.
      const misdirected = await get(
        `web.${DOMAIN}`,
        "/",
        wildcard.cert,
        undefined,
        "shop.example.org",
      );
      assert.equal(misdirected.status, 421);
    } finally {
      await Promise.all([shop.close(), web.close()]);
    }
    const now = daemon.counters.snapshot();
    assert.equal((now.https_unknown_host ?? 0) - (before.https_unknown_host ?? 0), 1);
    assert.equal((now.https_no_certificate ?? 0) - (before.https_no_certificate ?? 0), 1);
  });

  it("curl through the CLI's --http and --tls: a 20 MiB download intact, and the client's own TLS", async () => {
    const cli = await startClient({
      server: url,
      token: ALICE,
      args: ["--http", `cli=${plain}`, "--tls", `clitls=${secure}`],
    });
    const caFile = join(dir, "wildcard.pem");
    writeFileSync(caFile, wildcard.cert);
    const curl = (args: string[]) =>
      new Promise<Buffer>((resolve, reject) =>
        execFile(
          "curl",
          ["-sS", "--fail", ...args],
          { timeout: 30_000, encoding: "buffer", maxBuffer: 64 << 20 },
          (error, stdout) => error ? reject(error) : resolve(stdout),
        )
      );
    try {
      const first = await cli.waitForTunnel();
      const second = await cli.waitForTunnel(cli.logs().indexOf(first.entry) + 1);
      assert.deepEqual(
        new Set([first.entry.url, second.entry.url]),
        new Set([
          `https://cli.${DOMAIN}:${httpsPort}/`,
          `https://clitls.${DOMAIN}:${httpsPort}/`,
        ]),
      );
      const body = await curl([
        "--resolve",
        `cli.${DOMAIN}:${httpsPort}:127.0.0.1`,
        "--cacert",
        caFile,
        `https://cli.${DOMAIN}:${httpsPort}/big`,
      ]);
      assert.equal(body.length, BIG);
      const hash = (b: Uint8Array) => createHash("sha256").update(b).digest("hex");
      assert.equal(hash(body), hash(big));
      const ownCa = join(dir, "own.pem");
      writeFileSync(ownCa, own.cert);
      const inside = await curl([
        "--resolve",
        `clitls.${DOMAIN}:${httpsPort}:127.0.0.1`,
        "--cacert",
        ownCa,
        `https://clitls.${DOMAIN}:${httpsPort}/x`,
      ]);
      assert.deepEqual(JSON.parse(inside.toString()), { name: "own-tls", url: "/x" });
    } finally {
      await cli.stop();
    }
  });
});
