// Certificates from ACME for HTTP tunnels, against pebble, Let's Encrypt's test CA (a
// real ACME server, built from the Go module proxy; never a real CA): a name held by a client is
// ordered, proven over HTTP-01 on the daemon's HTTP port or TLS-ALPN-01 on its HTTPS port, served
// to visitors who trust pebble's root, stored 0600 in the data dir, served again after a restart
// without a new order, and renewed once a third of its lifetime is left (pebble issues them for
// 9 s here, so renewal comes 6 s after issue).
import { after, before, describe, it } from "node:test";
import { httpsGetAs } from "../testing/visitors.ts";
import assert from "node:assert/strict";
import { mkdtempSync, rmSync, statSync, writeFileSync } from "node:fs";
import { createServer, type Server } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type Client, connect } from "../client/mod.ts";
import type { Daemon } from "../daemon/daemon.ts";
import { startDaemonInProcess } from "./_in_process_daemon.ts";
import type { DaemonEvent } from "../daemon/events.ts";
import { closedPorts } from "../testing/mod.ts";
import { type Pebble, startPebble } from "../testing/pebble.ts";
import { waitFor } from "../testing/wait.ts";
import { hasOpenssl } from "../transport/_test_certificate.ts";
import { isDeno } from "../transport/_test_util.ts";

const TOKEN = "acme-test-alice-0123456789abcdefgh";
const DOMAIN = "tunnels.test";
const VALIDITY_S = 9;
const noOpenssl = hasOpenssl ? false : "openssl is not installed";

describe("ACME certificates for HTTP tunnels (pebble)", { skip: noOpenssl }, () => {
  let pebble: Pebble;
  let httpPort: number;
  let alpnPort: number;
  let app: Server;
  let local: string;
  let dir: string;
  let rootFile: string;
  const daemons: Daemon[] = [];
  const clients: Client[] = [];

  before(async () => {
    [httpPort, alpnPort] = await closedPorts(2);
    pebble = await startPebble({ httpPort, tlsPort: alpnPort, validitySeconds: VALIDITY_S });
    dir = mkdtempSync(join(tmpdir(), "tunnelmux-acme-"));
    rootFile = join(dir, "pebble-root.pem");
    writeFileSync(rootFile, await pebble.root());
    app = createServer((req, res) =>
      res.end(`app saw ${req.url} over ${req.headers["x-forwarded-proto"]}`)
    );
    await new Promise<void>((resolve) => app.listen(0, "127.0.0.1", resolve));
    local = `127.0.0.1:${(app.address() as { port: number }).port}`;
  });

  after(async () => {
    await Promise.all(clients.map((c) => c.close()));
    for (const d of daemons) d.stop();
    app?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  /** A daemon with ACME against pebble; its events are collected. */
  async function daemon(
    dataDir: string,
    challenge: "http-01" | "tls-alpn-01",
    listen: { http: string | null; https: string },
  ): Promise<{ daemon: Daemon; events: DaemonEvent[] }> {
    const d = await startDaemonInProcess({
      listen: { tcp: "127.0.0.1:0", websocket: null, admin: null, ...listen },
      dataDir,
      http: {
        domain: DOMAIN,
        acme: { directory: pebble.directory, caCerts: pebble.caFile, challenge },
      },
      clients: [{ name: "alice", token: TOKEN, expose: { hosts: ["*"] } }],
    });
    daemons.push(d);
    // Orders start when a client holds a name, after this.
    const events: DaemonEvent[] = [];
    d.events.subscribe((e) => events.push(e));
    return { daemon: d, events };
  }

  /** A GET with curl as `name`, trusting pebble's root only; resolves with the body. */
  function curl(name: string, port: number, path: string): Promise<string> {
    return httpsGetAs(rootFile, name, port, path);
  }

  const issued = (events: DaemonEvent[], host: string, renewal = "false") =>
    events.filter((e) =>
      e.type === "certificate_issued" && e.fields.host === host && e.fields.renewal === renewal
    );

  it("HTTP-01: orders a held name, serves it, keeps it 0600, reloads it, and renews it", async () => {
    const dataDir = join(dir, "http01");
    // Not the ALPN test's port, which this daemon would still hold when that test starts.
    const [https] = await closedPorts(1, [httpPort, alpnPort]);
    const first = await daemon(dataDir, "http-01", {
      http: `127.0.0.1:${httpPort}`,
      https: `127.0.0.1:${https}`,
    });
    const client = await connect(`tcp://${first.daemon.addresses.tcp}`, {
      token: TOKEN,
      reconnect: false,
    });
    clients.push(client);
    const host = `web.${DOMAIN}`;
    const tunnel = await client.expose({ local, http: "web" });
    // With ACME on, the daemon sends visitors to HTTPS from the start.
    assert.equal(tunnel.url, `https://${host}:${https}/`);
    await waitFor(() => issued(first.events, host).length === 1, {
      timeoutMs: 30_000,
      message: `a certificate for ${host}: ${pebble.output().slice(-2000)}`,
    });
    assert.equal(await curl(host, https, "/hello"), "app saw /hello over https");
    for (const file of ["account.key", `certificates/${host}.key`, `certificates/${host}.crt`]) {
      assert.equal(statSync(join(dataDir, "acme", file)).mode & 0o777, 0o600, file);
    }
    const served = first.daemon.certificates.find(host)!;
    assert.equal(served.source, "acme");

    // A restart serves the stored certificate at once, without a new order.
    await tunnel.close();
    await client.close();
    first.daemon.stop();
    // Its HTTP port must be free before the next daemon binds it (on Deno a turn later).
    await first.daemon.stopped;
    const second = await daemon(dataDir, "http-01", {
      http: `127.0.0.1:${httpPort}`,
      https: `127.0.0.1:${https}`,
    });
    assert.equal(second.daemon.certificates.find(host)?.notAfter, served.notAfter);
    const again = await connect(`tcp://${second.daemon.addresses.tcp}`, {
      token: TOKEN,
      reconnect: false,
    });
    clients.push(again);
    await again.expose({ local, http: "web" });
    assert.equal(await curl(host, https, "/again"), "app saw /again over https");
    assert.equal(issued(second.events, host).length, 0, "no order for a stored certificate");

    // Renewed once a third of its lifetime is left; the new one is served.
    await waitFor(() => issued(second.events, host, "true").length >= 1, {
      timeoutMs: VALIDITY_S * 1000 + 20_000,
      message: `a renewal for ${host}`,
    });
    const renewed = second.daemon.certificates.find(host)!;
    assert.ok(renewed.notAfter > served.notAfter);
    assert.equal(second.daemon.certificates.list().filter((c) => c.names.includes(host)).length, 1);
    assert.equal(await curl(host, https, "/renewed"), "app saw /renewed over https");
  });

  it("TLS-ALPN-01 on the HTTPS port alone (Bun; Deno refuses it at start, saying why)", async () => {
    const listen = { http: null, https: `127.0.0.1:${alpnPort}` };
    if (isDeno) {
      // rustls will not serve the challenge certificate's critical acmeIdentifier extension.
      await assert.rejects(
        daemon(join(dir, "alpn"), "tls-alpn-01", listen),
        /tls-alpn-01 is not available on Deno.*use http-01/,
      );
      return;
    }
    const { daemon: d, events } = await daemon(join(dir, "alpn"), "tls-alpn-01", listen);
    const client = await connect(`tcp://${d.addresses.tcp}`, { token: TOKEN, reconnect: false });
    clients.push(client);
    const host = `alpn.${DOMAIN}`;
    const tunnel = await client.expose({ local, http: "alpn" });
    assert.equal(tunnel.url, `https://${host}:${alpnPort}/`);
    await waitFor(() => issued(events, host).length === 1, {
      timeoutMs: 30_000,
      message: `a certificate for ${host}`,
    });
    assert.equal(await curl(host, alpnPort, "/alpn"), "app saw /alpn over https");
  });
});
