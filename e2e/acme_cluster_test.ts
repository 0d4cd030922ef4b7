// A host name's certificate as a cluster fact, against pebble (Let's Encrypt's test CA, built
// from the Go module proxy; never a real CA) and one real nats-server: two daemons in this
// process form a cluster; a client holds a name on node A, which orders it, and pebble checks the
// challenge on node B's port only (pebble's HTTP-01 port, or its TLS-ALPN-01 port, is B's), which
// answers it from the cluster's bucket. The certificate, stored once in the cluster, is then
// served by both nodes' HTTPS ports; with A down, B renews it (pebble issues them for 9 s here,
// so renewal comes 6 s after issue), and A, started again, serves the renewed one at once.
import { after, before, describe, it } from "node:test";
import { httpsGetAs } from "../testing/visitors.ts";
import assert from "node:assert/strict";
import { Buffer } from "node:buffer";
import { existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createServer, type Server } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type Client, connect } from "../client/mod.ts";
import type { Daemon } from "../daemon/daemon.ts";
import type { DaemonEvent } from "../daemon/events.ts";
import { bareBucket } from "../daemon/cluster/_nats_link.ts";
import { startDaemonInProcess } from "./_in_process_daemon.ts";
import { closedPorts } from "../testing/mod.ts";
import { type NatsServer, startNats } from "../testing/nats.ts";
import { type Pebble, startPebble } from "../testing/pebble.ts";
import { waitFor } from "../testing/wait.ts";
import { hasOpenssl } from "../transport/_test_certificate.ts";
import { isDeno } from "../transport/_test_util.ts";

const TOKEN = "acme-cluster-alice-0123456789abcdef";
const KEY = "cluster-key-for-the-acme-cluster-tests-0123";
const DOMAIN = "tunnels.test";
const VALIDITY_S = 9;
const noOpenssl = hasOpenssl ? false : "openssl is not installed";

/** A node's listeners: its HTTP port and its HTTPS port (or none). */
interface Ports {
  http: number | null;
  https: number | null;
}

describe("ACME in a cluster: one certificate per name, every node (pebble)", {
  skip: noOpenssl,
}, () => {
  let nats: NatsServer;
  let app: Server;
  let local: string;
  let dir: string;
  const daemons: Daemon[] = [];
  const clients: Client[] = [];

  before(async () => {
    nats = await startNats();
    dir = mkdtempSync(join(tmpdir(), "tunnelmux-acme-cluster-"));
    app = createServer((req, res) =>
      res.end(`app saw ${req.url} over ${req.headers["x-forwarded-proto"]}`)
    );
    await new Promise<void>((resolve) => app.listen(0, "127.0.0.1", resolve));
    local = `127.0.0.1:${(app.address() as { port: number }).port}`;
  });

  after(async () => {
    await Promise.all(clients.map((c) => c.close()));
    for (const d of daemons) d.stop();
    await Promise.all(daemons.map((d) => d.stopped));
    app?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  /** A node of cluster `prefix` with ACME against `pebble`; its events are collected. */
  async function node(options: {
    name: string;
    prefix: string;
    pebble: Pebble;
    challenge: "http-01" | "tls-alpn-01";
    ports: Ports;
  }): Promise<{ daemon: Daemon; events: DaemonEvent[]; dataDir: string }> {
    const { name, prefix, pebble, challenge, ports } = options;
    const dataDir = mkdtempSync(join(dir, `${name}-`));
    const d = await startDaemonInProcess({
      listen: {
        tcp: "127.0.0.1:0",
        websocket: null,
        admin: null,
        http: ports.http === null ? null : `127.0.0.1:${ports.http}`,
        https: ports.https === null ? null : `127.0.0.1:${ports.https}`,
      },
      dataDir,
      http: {
        domain: DOMAIN,
        acme: { directory: pebble.directory, caCerts: pebble.caFile, challenge },
      },
      clients: [{ name: "alice", token: TOKEN, expose: { hosts: ["*"] } }],
      cluster: {
        servers: [nats.url],
        key: KEY,
        node: name,
        listen: "127.0.0.1:0", // relays: the bound port is advertised
        presenceTtlMs: 2_000,
        bucketPrefix: prefix,
      },
    });
    daemons.push(d);
    const events: DaemonEvent[] = [];
    d.events.subscribe((e) => events.push(e));
    return { daemon: d, events, dataDir };
  }

  /** A client of `daemon` holding `label` as an HTTP tunnel. */
  async function hold(daemon: Daemon, label: string): Promise<Client> {
    const client = await connect(`tcp://${daemon.addresses.tcp}`, {
      token: TOKEN,
      reconnect: false,
    });
    try {
      await client.expose({ local, http: label });
    } catch (error) {
      await client.close();
      throw error;
    }
    clients.push(client);
    return client;
  }

  /** Resolves once both `ports` serve `host` over HTTPS to a visitor trusting `root`. */
  async function servedOn(root: string, host: string, ports: number[], path: string) {
    await waitFor(async () => {
      const bodies = await Promise.all(
        ports.map((port) => httpsGetAs(root, host, port, path).catch(() => "")),
      );
      return bodies.every((body) => body === `app saw ${path} over https`);
    }, { timeoutMs: 60_000, intervalMs: 100, message: `${host} served on ${ports.join(", ")}` });
  }

  const issued = (events: DaemonEvent[], host: string, renewal?: string) =>
    events.filter((e) =>
      e.type === "certificate_issued" && e.fields.host === host &&
      (renewal === undefined || e.fields.renewal === renewal)
    );

  /** Writes pebble's root where curl reads it. */
  async function rootOf(pebble: Pebble, name: string): Promise<string> {
    const file = join(dir, `${name}-root.pem`);
    writeFileSync(file, await pebble.root());
    return file;
  }

  it("HTTP-01 through node B for a name held on node A; served by both; renewed by B while A is down", async () => {
    const [aHttp, aHttps, bHttp, bHttps, tlsPort] = await closedPorts(5);
    const ports = { a: { http: aHttp, https: aHttps }, b: { http: bHttp, https: bHttps } };
    // Pebble checks HTTP-01 on B's HTTP port only: an answer from A's would never be asked.
    const pebble = await startPebble({
      httpPort: ports.b.http,
      tlsPort,
      validitySeconds: VALIDITY_S,
      avoid: [aHttp, aHttps, bHttps],
    });
    const root = await rootOf(pebble, "http01");
    const prefix = "acme-http01";
    const at = (name: string, p: Ports) =>
      node({ name, prefix, pebble, challenge: "http-01", ports: p });
    const a = await at("a", ports.a);
    const b = await at("b", ports.b);
    const host = `web.${DOMAIN}`;

    const heldAt = Date.now();
    const client = await hold(a.daemon, "web");
    await waitFor(() => issued(a.events, host).length === 1, {
      timeoutMs: 30_000,
      message: `a certificate for ${host}: ${pebble.output().slice(-2000)}`,
    });
    await servedOn(root, host, [ports.a.https, ports.b.https], "/both");
    const servedMs = Date.now() - heldAt;
    const first = a.daemon.certificates.find(host)!;
    assert.equal(b.daemon.certificates.find(host)?.identity.cert, first.identity.cert);
    assert.equal(issued(b.events, host).length, 0, "node B ordered nothing");

    // Stored once, in the cluster's bucket: the chain, and the key sealed; nothing in A's data dir.
    const raw = (await (await bareBucket(nats.url, `${prefix}-certificates`)).get(`cert-${host}`))!;
    assert.ok(raw, "the certificate's record");
    assert.ok(!raw.value.includes("PRIVATE KEY"), "the private key is not stored in clear");
    assert.equal(existsSync(join(a.dataDir, "acme")), false);
    const bytes = Buffer.byteLength(raw.value);
    console.log(`acme-cluster-figure ${
      JSON.stringify({
        runtime: isDeno ? "deno" : "bun",
        held_to_served_on_both_ms: servedMs,
        stored_record_bytes: bytes,
        chain_bytes: Buffer.byteLength(first.identity.cert),
        key_pem_bytes: Buffer.byteLength(first.identity.key),
      })
    }`);
    // Well within a NATS message (1 MiB by default).
    assert.ok(bytes < 64 * 1024, `${bytes} bytes`);

    // Node A goes down; the client holds the name through B, which renews the certificate.
    await client.close();
    const renewedBeforeStop = issued(a.events, host, "true").length;
    a.daemon.stop();
    await a.daemon.stopped;
    await waitFor(async () => {
      try {
        await hold(b.daemon, "web");
        return true;
      } catch {
        return false; // A's claim not released yet
      }
    }, { timeoutMs: 20_000, intervalMs: 200, message: "the name held through node B" });
    await waitFor(() => issued(b.events, host, "true").length >= 1, {
      timeoutMs: VALIDITY_S * 1000 + 30_000,
      message: `a renewal by node B: ${pebble.output().slice(-2000)}`,
    });
    assert.equal(issued(a.events, host, "true").length, renewedBeforeStop, "A renewed nothing");
    const renewed = b.daemon.certificates.find(host)!;
    assert.ok(renewed.notAfter > first.notAfter);
    await servedOn(root, host, [ports.b.https], "/renewed");

    // A starts again: it serves the cluster's certificate from the start, with no order of its own.
    const again = await at("a", ports.a);
    assert.ok(again.daemon.certificates.find(host)!.notAfter >= renewed.notAfter);
    await servedOn(root, host, [ports.a.https, ports.b.https], "/again");
    assert.equal(issued(again.events, host).length, 0);
  });

  it("HTTP-01 through a node with an HTTP port and no HTTPS port", async () => {
    const [aHttp, aHttps, cHttp, tlsPort] = await closedPorts(4);
    const ports = { a: { http: aHttp, https: aHttps }, c: { http: cHttp, https: null } };
    const pebble = await startPebble({
      httpPort: ports.c.http,
      tlsPort,
      validitySeconds: 90 * 24 * 3600,
      avoid: [aHttp, aHttps],
    });
    const root = await rootOf(pebble, "http-only");
    const at = (name: string, p: Ports) =>
      node({ name, prefix: "acme-http-only", pebble, challenge: "http-01", ports: p });
    const a = await at("a", ports.a);
    await at("c", ports.c);
    const host = `plain.${DOMAIN}`;
    await hold(a.daemon, "plain");
    await waitFor(() => issued(a.events, host).length === 1, {
      timeoutMs: 30_000,
      message: `a certificate for ${host}: ${pebble.output().slice(-2000)}`,
    });
    await servedOn(root, host, [ports.a.https], "/plain");
  });

  it("TLS-ALPN-01 through node B's HTTPS port (Bun; Deno refuses tls-alpn-01 at start)", {
    skip: isDeno ? "Deno's TLS cannot serve the challenge certificate" : false,
  }, async () => {
    const [aHttps, bHttps, httpPort] = await closedPorts(3);
    const ports = { a: { http: null, https: aHttps }, b: { http: null, https: bHttps } };
    const pebble = await startPebble({
      httpPort,
      tlsPort: ports.b.https,
      validitySeconds: 90 * 24 * 3600,
      avoid: [aHttps],
    });
    const root = await rootOf(pebble, "alpn");
    const at = (name: string, p: Ports) =>
      node({ name, prefix: "acme-alpn", pebble, challenge: "tls-alpn-01", ports: p });
    const a = await at("a", ports.a);
    const b = await at("b", ports.b);
    const host = `alpn.${DOMAIN}`;
    await hold(a.daemon, "alpn");
    await waitFor(() => issued(a.events, host).length === 1, {
      timeoutMs: 30_000,
      message: `a certificate for ${host}: ${pebble.output().slice(-2000)}`,
    });
    await servedOn(root, host, [ports.a.https, ports.b.https], "/alpn");
    assert.equal(issued(b.events, host).length, 0, "node B ordered nothing");
  });
});
