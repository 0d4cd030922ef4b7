// ACME's state in a cluster (kv_acme.ts) over a real nats-server: several storages over the same
// buckets stand for several nodes (links made by connectNats, so every bucket is signed as a
// node's is), and a bare NATS client reads and writes values as any NATS user could. Every test
// uses its own host names. Issuance itself runs against pebble in e2e/acme_cluster_test.ts.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { Buffer } from "node:buffer";
import { createServer, type Server } from "node:http";
import { cleanup } from "../../testing/cleanup.ts";
import { startNats } from "../../testing/nats.ts";
import { waitFor } from "../../testing/wait.ts";
import { hasOpenssl, makeTestIdentity } from "../../transport/_test_certificate.ts";
import { Logger } from "../../util/log.ts";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { register } from "../../testing/cleanup.ts";
import { FileAcmeStorage } from "../tls/acme_files.ts";
import * as x509 from "@peculiar/x509";
import { AcmeCertificates } from "../tls/acme.ts";
import { CertificateStore } from "../tls/certificates.ts";
import type { TlsIdentity } from "../../transport/tls/front.ts";
import { KvAcmeStorage, SecretSeal } from "./kv_acme.ts";
import type { KvBucket, NatsLink } from "./nats.ts";
import { bareBucket, connectTestLink, countedBucket, testClusterKey } from "./_nats_link.ts";

const NAME = "kv-acme-test";
const KEY = testClusterKey(NAME);
const OTHER_KEY = "another-cluster-key-of-24+chars";
const TTL_MS = 2_000;
const noOpenssl = hasOpenssl ? false : "openssl is not installed";

/** A log that keeps its lines. */
function keptLog(): { log: Logger; lines: Record<string, unknown>[] } {
  const lines: Record<string, unknown>[] = [];
  const log = new Logger({ level: "info", format: "json", sink: (l) => lines.push(JSON.parse(l)) });
  return { log, lines };
}

/** A self-signed certificate for `host` and its key, expiring `days` from now (past if < 0). */
async function certificateFor(host: string, days: number): Promise<TlsIdentity> {
  const algorithm = { name: "ECDSA", namedCurve: "P-256", hash: "SHA-256" };
  const keys = await crypto.subtle.generateKey(algorithm, true, ["sign", "verify"]);
  const notAfter = Date.now() + days * 24 * 3600 * 1000;
  const certificate = await x509.X509CertificateGenerator.createSelfSigned({
    name: `CN=${host}`,
    notBefore: new Date(notAfter - 90 * 24 * 3600 * 1000),
    notAfter: new Date(notAfter),
    signingAlgorithm: algorithm,
    keys,
    extensions: [new x509.SubjectAlternativeNameExtension([{ type: "dns", value: host }])],
  }, crypto);
  const pkcs8 = await crypto.subtle.exportKey("pkcs8", keys.privateKey);
  return {
    cert: certificate.toString("pem"),
    key: x509.PemConverter.encode(pkcs8, "PRIVATE KEY"),
  };
}

let serial = 0;
/** A host name no other test uses. */
function unique(role: string): string {
  return `${role}-${++serial}-${crypto.randomUUID().slice(0, 6)}.tunnels.test`;
}

describe("SecretSeal", () => {
  const seal = new SecretSeal([KEY]);
  const context = "tunnelmux-certificates\ncert-a.tunnels.test";

  it("opens what it sealed, and each write has its own nonce", () => {
    const a = seal.seal(context, "the private key");
    const b = seal.seal(context, "the private key");
    assert.equal(seal.open(context, a), "the private key");
    assert.equal(a.length, 1);
    assert.match(a[0].iv, /^[A-Za-z0-9_-]{16}$/);
    assert.notEqual(a[0].iv, b[0].iv);
    assert.notEqual(a[0].data, b[0].data);
    assert.ok(!Buffer.from(a[0].data, "base64url").toString("latin1").includes("private"));
  });

  it("refuses a copy tampered with, moved to another key, or sealed under another key", () => {
    const sealed = seal.seal(context, "the private key");
    const data = Buffer.from(sealed[0].data, "base64url");
    data[0] ^= 1;
    const tampered = [{ ...sealed[0], data: data.toString("base64url") }];
    assert.equal(seal.open(context, tampered), undefined);
    assert.equal(seal.open("tunnelmux-certificates\ncert-b.tunnels.test", sealed), undefined);
    const other = new SecretSeal([OTHER_KEY]).seal(context, "the private key");
    assert.equal(seal.open(context, other), undefined);
    // Another key's copy under this key's id does not open either.
    assert.equal(seal.open(context, [{ ...other[0], id: sealed[0].id }]), undefined);
    for (const garbage of [undefined, "x", [{}], [{ id: sealed[0].id, iv: 1, data: "" }]]) {
      assert.equal(seal.open(context, garbage), undefined);
    }
  });

  it("while the key rotates: seals under every key held, and completes what lacks one", () => {
    const rolling = new SecretSeal(["the-new-cluster-key-of-24+chars", KEY]);
    const both = rolling.seal(context, "secret");
    assert.equal(both.length, 2);
    assert.equal(seal.open(context, both), "secret");
    const old = seal.seal(context, "secret");
    assert.equal(seal.complete(context, old, "secret"), undefined);
    const completed = rolling.complete(context, old, "secret")!;
    assert.equal(completed.length, 2);
    assert.equal(
      new SecretSeal(["the-new-cluster-key-of-24+chars"]).open(context, completed),
      "secret",
    );
    assert.equal(rolling.complete(context, completed, "secret"), undefined);
  });
});

describe("KvAcmeStorage", () => {
  let url: string;
  let a: NatsLink;
  let b: NatsLink;
  let other: NatsLink;
  const storages: KvAcmeStorage[] = [];

  before(async () => {
    url = (await startNats()).url;
    a = await connectTestLink(url, NAME);
    b = await connectTestLink(url, NAME);
    other = await connectTestLink(url, NAME, { keys: [OTHER_KEY] });
  });
  after(async () => {
    for (const storage of storages) storage.stop();
    await cleanup();
  });

  /** A node's storage on `link`, whose orders bucket is `ordersKind` (its own TTL). */
  async function storage(
    link: NatsLink,
    options: {
      node?: string;
      keys?: string[];
      ordersKind?: string;
      ttlMs?: number;
      /** Buckets to use instead of the link's own (wrapped to count requests). */
      certificates?: KvBucket;
      orders?: KvBucket;
    } = {},
  ): Promise<{ storage: KvAcmeStorage; lines: Record<string, unknown>[] }> {
    const ttlMs = options.ttlMs ?? TTL_MS;
    const { log, lines } = keptLog();
    const created = new KvAcmeStorage({
      certificates: options.certificates ?? await link.bucket("certificates"),
      certificatesName: `${NAME}-certificates`,
      orders: options.orders ?? await link.bucket(options.ordersKind ?? "acme", ttlMs),
      ttlMs,
      keys: options.keys ?? [KEY],
      node: options.node ?? "n",
      log,
    });
    storages.push(created);
    return { storage: created, lines };
  }

  /** `storage` loaded, with what it found (at load and since), by host. */
  async function loaded(storage: KvAcmeStorage): Promise<Map<string, TlsIdentity[]>> {
    const found = new Map<string, TlsIdentity[]>();
    await storage.load((host, identity) => found.set(host, [...found.get(host) ?? [], identity]));
    return found;
  }

  it("leases a name to one of two nodes asking at once, and to the next once released", async () => {
    const [one, two] = [(await storage(a)).storage, (await storage(b)).storage];
    for (let round = 0; round < 5; round++) {
      const host = unique("race");
      const leases = await Promise.all([one.lease(host), two.lease(host)]);
      assert.equal(leases.filter((l) => l !== undefined).length, 1, `round ${round}`);
      // The winner itself is refused a second lease while it holds the first.
      assert.equal(await one.lease(host), undefined);
      await leases.find((l) => l !== undefined)!.release();
      const next = await two.lease(host);
      assert.ok(next, "free once released");
      await next.release();
    }
  });

  it("keeps a lease while its node lives, and lets another take it once it lapsed", async () => {
    const ttlMs = 3_000;
    const holder = (await storage(a, { ordersKind: "acme-lapse", ttlMs })).storage;
    const { storage: taker, lines } = await storage(b, { ordersKind: "acme-lapse", ttlMs });
    const host = unique("lapse");
    assert.ok(await holder.lease(host));
    // Over two TTLs the holder rewrites it: every try of the other node is refused.
    const tries: unknown[] = [];
    const until = Date.now() + 2 * ttlMs;
    while (Date.now() < until) {
      tries.push(await taker.lease(host));
      await new Promise((resolve) => setTimeout(resolve, 250));
    }
    assert.ok(tries.length > 4);
    assert.deepEqual(tries.filter((t) => t !== undefined), []);
    assert.equal(lines.at(-1)?.msg, "certificate ordered by another node");
    assert.equal(lines.at(-1)?.host, host);
    // The holder dies (stops rewriting): within about a TTL the lease lapses and is taken.
    holder.stop();
    let taken;
    await waitFor(async () => (taken = await taker.lease(host)) !== undefined, {
      timeoutMs: 4 * ttlMs,
      intervalMs: 100,
      message: "the lapsed lease taken",
    });
    await taken!.release();
  });

  it("stores a certificate once, its key sealed, and every node serves it, the newer in place of the older", async (t) => {
    if (noOpenssl) return t.skip(noOpenssl);
    const host = unique("cert");
    const { storage: writer } = await storage(a, { node: "writer" });
    const first = makeTestIdentity("first", `DNS:${host}`);
    await writer.save(host, first);
    const reader = (await storage(b)).storage;
    const found = await loaded(reader);
    assert.deepEqual(found.get(host), [first]);
    assert.deepEqual(await reader.latest(host), first);
    // As a NATS user sees it: the chain in clear, the key nowhere.
    const raw = (await (await bareBucket(url, `${NAME}-certificates`)).get(`cert-${host}`))!;
    assert.ok(raw.value.includes(first.cert.trim().split("\n")[1]));
    const keyBody = first.key.trim().split("\n").slice(1, -1).join("");
    assert.ok(!raw.value.replaceAll("\\n", "").includes(keyBody.slice(0, 40)));
    assert.ok(!raw.value.includes("PRIVATE KEY"));
    const record = JSON.parse(raw.value.slice(raw.value.indexOf("\n") + 1));
    assert.equal(record.node, "writer");
    // A newer certificate reaches the reader by its watch.
    const second = makeTestIdentity("second", `DNS:${host}`);
    await writer.save(host, second);
    await waitFor(() => found.get(host)?.length === 2, "the newer certificate followed");
    assert.deepEqual(found.get(host)![1], second);
  });

  it("refuses a record tampered with, unsigned, or written or sealed under another key", async (t) => {
    if (noOpenssl) return t.skip(noOpenssl);
    const { storage: reader, lines } = await storage(b);
    const found = await loaded(reader);
    const bucket: KvBucket = await a.bucket("certificates");
    const identity = makeTestIdentity("tampered", "DNS:x.tunnels.test");
    const bare = await bareBucket(url, `${NAME}-certificates`);

    // Signed with the cluster key, its sealed key changed: the signature checks, the key does not.
    const tampered = unique("tampered");
    const record = {
      host: tampered,
      cert: identity.cert,
      key: new SecretSeal([KEY]).seal(`${NAME}-certificates\ncert-${tampered}`, identity.key),
      node: "x",
      at: 0,
    };
    const data = Buffer.from(record.key[0].data, "base64url");
    data[3] ^= 0x40;
    record.key[0].data = data.toString("base64url");
    await bucket.put(`cert-${tampered}`, JSON.stringify(record));
    assert.equal(await reader.latest(tampered), undefined);

    // Signed with the cluster key, sealed under another: it does not open.
    const sealedElsewhere = unique("sealed-elsewhere");
    const context = `${NAME}-certificates\ncert-${sealedElsewhere}`;
    await bucket.put(
      `cert-${sealedElsewhere}`,
      JSON.stringify({
        host: sealedElsewhere,
        cert: identity.cert,
        key: new SecretSeal([OTHER_KEY]).seal(context, identity.key),
        node: "x",
        at: 0,
      }),
    );
    assert.equal(await reader.latest(sealedElsewhere), undefined);

    // Written by a node with another cluster key; written bare by a NATS user.
    const otherKey = unique("other-key");
    await (await storage(other, { keys: [OTHER_KEY] })).storage.save(otherKey, identity);
    assert.equal(await reader.latest(otherKey), undefined);
    const unsigned = unique("unsigned");
    await bare.put(`cert-${unsigned}`, JSON.stringify(record));
    assert.equal(await reader.latest(unsigned), undefined);

    // None of them reached the follower, and the two it could read were logged as unusable.
    const control = unique("control");
    await (await storage(a)).storage.save(control, identity);
    await waitFor(() => found.has(control), "the control record followed");
    for (const host of [tampered, sealedElsewhere, otherKey, unsigned]) {
      assert.equal(found.has(host), false, host);
    }
    const unusable = lines.filter((l) => l.msg === "stored certificate unusable").map((l) =>
      l.host
    );
    assert.ok(unusable.includes(tampered) && unusable.includes(sealedElsewhere));
  });

  it("while the cluster key rotates, a node holding the new key adds its copy to each record", async (t) => {
    if (noOpenssl) return t.skip(noOpenssl);
    const NEW = "the-new-cluster-key-of-24+chars";
    const host = unique("rotate");
    const identity = makeTestIdentity("rotate", `DNS:${host}`);
    await (await storage(a)).storage.save(host, identity);
    const bare = await bareBucket(url, `${NAME}-certificates`);
    const copies = async () => {
      const raw = (await bare.get(`cert-${host}`))!.value;
      return JSON.parse(raw.slice(raw.indexOf("\n") + 1)).key.length;
    };
    assert.equal(await copies(), 1);
    const newOnly = (await storage(await connectTestLink(url, NAME, { keys: [NEW] }), {
      keys: [NEW],
    })).storage;
    assert.equal(await newOnly.latest(host), undefined, "not readable under the new key yet");
    const rolling = await connectTestLink(url, NAME, { keys: [NEW, KEY] });
    const found = await loaded((await storage(rolling, { keys: [NEW, KEY] })).storage);
    assert.deepEqual(found.get(host), [identity]);
    await waitFor(async () => await copies() === 2, "the new key's copy added");
    assert.deepEqual(await newOnly.latest(host), identity);
    assert.deepEqual(await (await storage(b)).storage.latest(host), identity, "and the old key's");
  });

  it("keeps one account key for every node, sealed", async () => {
    // Their own bucket prefix's account: a fresh link on another prefix.
    const name = "kv-acme-account";
    const [x, y] = [await connectTestLink(url, name), await connectTestLink(url, name)];
    const node = (link: NatsLink) =>
      link.bucket("certificates").then(async (certificates) => {
        const created = new KvAcmeStorage({
          certificates,
          certificatesName: `${name}-certificates`,
          orders: await link.bucket("acme", TTL_MS),
          ttlMs: TTL_MS,
          keys: [testClusterKey(name)],
          node: "n",
          log: keptLog().log,
        });
        storages.push(created);
        return created;
      });
    let made = 0;
    const create = () => Promise.resolve(`ACCOUNT KEY ${++made}`);
    const [one, two] = await Promise.all([node(x), node(y)]);
    const keys = await Promise.all([one.accountKey(create), two.accountKey(create)]);
    assert.equal(keys[0], keys[1]);
    assert.equal(await (await node(x)).accountKey(create), keys[0]);
    const raw = (await (await bareBucket(url, `${name}-certificates`)).get("account"))!;
    assert.ok(!raw.value.includes("ACCOUNT KEY"));
  });

  it("answers every node's challenges on every node until removed, or until their node died", async () => {
    const { storage: orderer } = await storage(a, { ordersKind: "acme-answers" });
    const { storage: other } = await storage(b, { ordersKind: "acme-answers" });
    await other.load(() => {});
    await orderer.load(() => {});
    const host = unique("alpn");
    const http = {
      type: "http-01" as const,
      token: "tok-A_b9",
      keyAuthorization: "tok-A_b9.thumb",
    };
    const alpn = {
      type: "tls-alpn-01" as const,
      host,
      identity: { cert: "CHALLENGE CERT", key: "CHALLENGE KEY" },
    };
    await orderer.addChallenge(http);
    await orderer.addChallenge(alpn);
    // Answered here at once; on the other node once its watch delivered.
    assert.equal(orderer.httpAnswer(http.token), http.keyAuthorization);
    await waitFor(() => other.httpAnswer(http.token) === http.keyAuthorization, "HTTP-01 shared");
    await waitFor(() => other.alpnIdentity(host)?.cert === "CHALLENGE CERT", "TLS-ALPN-01 shared");
    assert.deepEqual(other.alpnIdentity(host), alpn.identity);
    // Kept alive past the TTL while the order runs.
    await new Promise((resolve) => setTimeout(resolve, 2 * TTL_MS));
    assert.equal(other.httpAnswer(http.token), http.keyAuthorization);
    await orderer.removeChallenge(http);
    assert.equal(orderer.httpAnswer(http.token), undefined);
    await waitFor(() => other.httpAnswer(http.token) === undefined, "HTTP-01 removed everywhere");
    // The orderer dies with its TLS-ALPN-01 answer up: it expires.
    orderer.stop();
    await waitFor(() => other.alpnIdentity(host) === undefined, {
      timeoutMs: 5 * TTL_MS,
      message: "a dead node's challenge expired",
    });
  });

  it("reads both buckets whole in one pass each, with no read per record", async () => {
    const ordersKind = "acme-one-pass";
    const { storage: writer } = await storage(a, { ordersKind });
    const hosts = Array.from({ length: 4 }, () => unique("one-pass"));
    const identities = await Promise.all(hosts.map((host) => certificateFor(host, 30)));
    for (const [i, host] of hosts.entries()) await writer.save(host, identities[i]);
    const tokens = ["one-pass-a", "one-pass-b", "one-pass-c"];
    for (const token of tokens) {
      await writer.addChallenge({ type: "http-01", token, keyAuthorization: `${token}.k` });
    }
    const certificates = countedBucket(await b.bucket("certificates"));
    const orders = countedBucket(await b.bucket(ordersKind, TTL_MS));
    const { storage: reader } = await storage(b, {
      node: "reader",
      certificates: certificates.bucket,
      orders: orders.bucket,
    });
    const found = await loaded(reader);
    for (const [i, host] of hosts.entries()) assert.deepEqual(found.get(host), [identities[i]]);
    for (const token of tokens) assert.equal(reader.httpAnswer(token), `${token}.k`);
    assert.deepEqual(certificates.calls, { get: 0, keys: 0, latest: 1 });
    assert.deepEqual(orders.calls, { get: 0, keys: 0, latest: 1 });
    for (const token of tokens) {
      await writer.removeChallenge({ type: "http-01", token, keyAuthorization: `${token}.k` });
    }
  });

  it("an answer removed while the bucket is read whole stays removed (the read is older)", async () => {
    const ordersKind = "acme-reread";
    const { storage: orderer } = await storage(a, { ordersKind });
    await orderer.load(() => {});
    const orders = countedBucket(await b.bucket(ordersKind, TTL_MS));
    const { storage: reader } = await storage(b, { node: "reader", orders: orders.bucket });
    const http = { type: "http-01" as const, token: "reread-1", keyAuthorization: "reread-1.k" };
    await orderer.addChallenge(http);
    await reader.load(() => {});
    assert.equal(reader.httpAnswer(http.token), http.keyAuthorization);
    // NATS came back: the watch restarts, and the bucket is read whole. That read holds the
    // answer; the answer is removed, and the new watch delivers the removal, before the read's
    // entries are looked at.
    orders.control.duringRead = async () => {
      await orderer.removeChallenge(http);
      await waitFor(() => reader.httpAnswer(http.token) === undefined, "the removal delivered");
    };
    await reader.refollow();
    assert.equal(orders.control.duringRead, undefined, "the removal came during the read");
    assert.equal(reader.httpAnswer(http.token), undefined, "not brought back by the older read");
  });

  it("a daemon joining the cluster brings its data directory's certificates and account key", async (t) => {
    if (noOpenssl) return t.skip(noOpenssl);
    const name = "kv-acme-bring";
    const link = await connectTestLink(url, name);
    const dataDir = mkdtempSync(join(tmpdir(), "tunnelmux-acme-bring-"));
    register(() => rmSync(dataDir, { recursive: true, force: true }));
    const files = new FileAcmeStorage(dataDir, keptLog().log);
    const [kept, newer, expired] = [unique("kept"), unique("newer"), unique("expired")];
    await files.save(kept, await certificateFor(kept, 1));
    await files.save(newer, await certificateFor(newer, 2));
    await files.save(expired, await certificateFor(expired, -1));
    await files.accountKey(() => Promise.resolve("THE DATA DIRECTORY'S ACCOUNT KEY"));
    const node = async () => {
      const created = new KvAcmeStorage({
        certificates: await link.bucket("certificates"),
        certificatesName: `${name}-certificates`,
        orders: await link.bucket("acme", TTL_MS),
        ttlMs: TTL_MS,
        keys: [testClusterKey(name)],
        node: "n",
        log: keptLog().log,
      });
      storages.push(created);
      return created;
    };
    // The cluster already has a later certificate for one name: that one stays.
    const later = await certificateFor(newer, 30);
    await (await node()).save(newer, later);
    const ca = createServer((_req, res) => res.writeHead(404).end());
    await new Promise<void>((resolve) => ca.listen(0, "127.0.0.1", resolve));
    const port = (ca.address() as { port: number }).port;
    const failed: unknown[] = [];
    const acme = new AcmeCertificates({
      config: {
        directory: `http://127.0.0.1:${port}/dir`,
        email: null,
        caCerts: null,
        challenge: "http-01",
      },
      dataDir,
      storage: await node(),
      store: new CertificateStore(),
      log: keptLog().log,
      publish: (_type, fields) => failed.push(fields),
    });
    try {
      await acme.load();
      const other = await node();
      assert.equal((await other.latest(kept))?.cert, (await files.latest(kept))?.cert);
      assert.equal((await other.latest(newer))?.cert, later.cert);
      assert.equal(await other.latest(expired), undefined, "an expired one is not brought");
      // An order (which fails at this CA) takes the account key: the data directory's.
      acme.want(unique("ordered"));
      await waitFor(() => failed.length > 0, "the order failed at the CA");
      let made = 0;
      const account = await other.accountKey(() => Promise.resolve(`made ${++made}`));
      assert.equal(account, "THE DATA DIRECTORY'S ACCOUNT KEY");
      assert.equal(made, 0);
    } finally {
      acme.stop();
      ca.close();
    }
  });

  it("a removed answer is gone at once on its node, however its rewrites interleave", async () => {
    // Rewritten every 100 ms (a third of 300), in a bucket whose entries live 2 s.
    const { log } = keptLog();
    const churn = new KvAcmeStorage({
      certificates: await a.bucket("certificates"),
      certificatesName: `${NAME}-certificates`,
      orders: await a.bucket("acme-churn", TTL_MS),
      ttlMs: 300,
      keys: [KEY],
      node: "n",
      log,
    });
    storages.push(churn);
    await churn.load(() => {});
    for (let round = 0; round < 30; round++) {
      const http = { type: "http-01" as const, token: `churn-${round}`, keyAuthorization: "k" };
      await churn.addChallenge(http);
      await new Promise((resolve) => setTimeout(resolve, (round * 37) % 250));
      await churn.removeChallenge(http);
      assert.equal(churn.httpAnswer(http.token), undefined, `round ${round}`);
      // And it stays gone once the watch delivered everything up to the deletion.
      await new Promise((resolve) => setTimeout(resolve, 20));
      assert.equal(churn.httpAnswer(http.token), undefined, `round ${round}, later`);
    }
  });

  it("two nodes wanting one name: one orders it, the other waits for its certificate", async (t) => {
    if (noOpenssl) return t.skip(noOpenssl);
    // Each node's CA takes the first request and never answers it: an order held in flight.
    const cas: { server: Server; requests: number; directory: string }[] = [];
    for (let i = 0; i < 2; i++) {
      const ca = { server: createServer(() => ca.requests++), requests: 0, directory: "" };
      await new Promise<void>((resolve) => ca.server.listen(0, "127.0.0.1", resolve));
      ca.directory = `http://127.0.0.1:${(ca.server.address() as { port: number }).port}/dir`;
      cas.push(ca);
    }
    const host = unique("one-order");
    const nodes: {
      acme: AcmeCertificates;
      lines: Record<string, unknown>[];
      storage: KvAcmeStorage;
      certificates: CertificateStore;
    }[] = [];
    for (const [i, link] of [a, b].entries()) {
      const { storage: kept, lines } = await storage(link, { ordersKind: "acme-one-order" });
      const certificates = new CertificateStore();
      const acme = new AcmeCertificates({
        config: { directory: cas[i].directory, email: null, caCerts: null, challenge: "http-01" },
        dataDir: "/nonexistent",
        storage: kept,
        store: certificates,
        log: keptLog().log,
        publish: () => {},
      });
      await acme.load();
      nodes.push({ acme, lines, storage: kept, certificates });
    }
    try {
      nodes[0].acme.want(host);
      await waitFor(() => cas[0].requests > 0, "the first node's order reached its CA");
      nodes[1].acme.want(host);
      await waitFor(
        () => nodes[1].lines.some((l) => l.msg === "certificate ordered by another node"),
        "the second node found the lease taken",
      );
      assert.equal(cas[1].requests, 0, "the second node ordered nothing");
      // The first node's certificate is stored: the second serves it, and orders nothing.
      const identity = makeTestIdentity("issued", `DNS:${host}`);
      await nodes[0].storage.save(host, identity);
      await waitFor(() => nodes[1].certificates.find(host) !== undefined, "served by the second");
      assert.equal(nodes[1].certificates.find(host)!.identity.cert, identity.cert);
      assert.equal(cas[1].requests, 0, "the second node ordered nothing");
    } finally {
      for (const node of nodes) node.acme.stop();
      for (const ca of cas) {
        ca.server.closeAllConnections();
        ca.server.close();
      }
    }
  });
});
