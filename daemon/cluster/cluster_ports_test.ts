// ClusterPorts over a real nats-server's `ports` bucket: what ports add to the claims machinery
// (claims.ts, tested beside it): an owner key per shared tunnel, so that routes of one group
// asking for different ports agree on one, and registry changes per route. Each ClusterPorts
// stands for one node; which node runs are alive is a set the test controls, as presence would.
import { after, afterEach, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { cleanup } from "../../testing/cleanup.ts";
import { waitFor } from "../../testing/wait.ts";
import { Logger } from "../../util/log.ts";
import type { PortClaim, RegistryChange } from "../registry/registry.ts";
import { ClusterPorts, ownerKeyOf, portKeyOf } from "./cluster_ports.ts";
import type { KvBucket, KvEntry, NatsLink } from "./nats.ts";
import { bareBucket, testNatsLink } from "./_nats_link.ts";

const log = new Logger({ level: "error", format: "json", sink: () => {} });

let link: NatsLink & { url: string };
let bucket: KvBucket;
let serial = 0;
const stops: (() => void)[] = [];

/** Ports of one test: 20000 + 10 per test, so no two tests use one key. */
function portsOfTest(): number[] {
  const base = 20_000 + 10 * ++serial;
  return [base, base + 1, base + 2, base + 3];
}

/** Node runs alive, as `node/run`. */
type Alive = Set<string>;

interface NodeOptions {
  alive?: Alive;
  ttlMs?: number;
}

/** One node's view of the ports, and the registry changes it reported. */
function node(name: string, options: NodeOptions = {}) {
  const alive = options.alive ?? new Set<string>();
  const changes: RegistryChange[] = [];
  const ports = new ClusterPorts({
    bucket,
    node: name,
    run: () => "r1",
    alive: (n, r) => alive.has(`${n}/${r}`),
    settled: () => true,
    connected: () => true,
    ttlMs: options.ttlMs ?? 60_000,
    count: () => {},
    log,
    emit: (change) => changes.push(change),
  });
  stops.push(() => ports.stop());
  alive.add(`${name}/r1`);
  const claim = (port: number, tunnel: string, more: Partial<PortClaim> = {}): PortClaim => ({
    bindHost: "127.0.0.1",
    port,
    tunnel,
    session: `s-${tunnel}`,
    client: `client-${name}`,
    node: name,
    ...more,
  });
  return { ports, changes, claim };
}

/** The port an owner's key names in the bucket, or undefined. */
async function ownerKeyPort(owner: string): Promise<number | undefined> {
  const entry = await bucket.get(ownerKeyOf(owner));
  return entry?.operation === "PUT" ? JSON.parse(entry.string()).port : undefined;
}

/** The routes of `port`'s record in the bucket, as `node/tunnel`, or undefined. */
async function routesOf(port: number): Promise<string[] | undefined> {
  const entry = await bucket.get(portKeyOf(port));
  if (entry?.operation !== "PUT") return undefined;
  return JSON.parse(entry.string()).routes.map((r: PortClaim) => `${r.node}/${r.tunnel}`);
}

async function entryOf(port: number): Promise<KvEntry> {
  const entry = await bucket.get(portKeyOf(port));
  assert.ok(entry, `an entry for port ${port}`);
  return entry;
}

describe("ClusterPorts", () => {
  before(async () => {
    link = await testNatsLink("ports-test");
    bucket = link.ports;
  });
  afterEach(() => {
    for (const stop of stops.splice(0)) stop();
  });
  after(async () => {
    await link?.close();
    await cleanup();
  });

  it("keys a port by its number, and an owner by its name in hex, so any name is key-safe", () => {
    assert.equal(portKeyOf(20_001), "port-20001");
    assert.equal(ownerKeyOf("group:a"), "owner-67726f75703a61");
    assert.notEqual(ownerKeyOf("group:a"), ownerKeyOf("group:b"));
    assert.match(ownerKeyOf("client:ünïcode name/with.dots"), /^owner-[0-9a-f]+$/);
  });

  it("keeps TCP and UDP ports apart: one number held by two clients, conflicts per protocol", async () => {
    const [p1] = portsOfTest();
    assert.equal(portKeyOf(p1, "udp"), `udp-${p1}`);
    const alive: Alive = new Set();
    const a = node("n1", { alive });
    const b = node("n2", { alive });
    const c = node("n3", { alive });
    assert.deepEqual(await a.ports.claim(a.claim(p1, "tcp-a")), { ok: true });
    assert.deepEqual(await b.ports.claim(b.claim(p1, "udp-b", { protocol: "udp" })), { ok: true });
    const third = await c.ports.claim(c.claim(p1, "udp-c", { protocol: "udp" }));
    assert.equal(third.ok, false, "a second client's UDP claim of the same port is refused");
    assert.equal((third as { reason?: string }).reason, "taken");
    assert.deepEqual(await routesOf(p1), ["n1/tcp-a"]);
    const udp = await bucket.get(portKeyOf(p1, "udp"));
    assert.equal(udp?.operation, "PUT");
    const record = JSON.parse(udp!.string());
    assert.equal(record.protocol, "udp");
    assert.deepEqual(record.routes.map((r: PortClaim) => `${r.node}/${r.tunnel}`), ["n2/udp-b"]);
    // One node's view, as its watch feeds it: both records of the one number, each its own.
    const observer = node("n4", { alive });
    observer.ports.apply(udp!);
    observer.ports.apply(await entryOf(p1));
    assert.equal(observer.ports.holder(p1, "udp")?.tunnel, "udp-b");
    assert.equal(observer.ports.holder(p1, "udp")?.protocol, "udp");
    assert.equal(observer.ports.holder(p1)?.tunnel, "tcp-a");
    assert.equal(observer.ports.holder(p1)?.protocol, undefined);
    assert.deepEqual(
      observer.changes.map((c) => c.kind === "port" && `${c.op} ${c.claim.protocol ?? "tcp"}`),
      ["claimed udp", "claimed tcp"],
    );
    await b.ports.release(b.claim(p1, "udp-b", { protocol: "udp" }));
    assert.notEqual((await bucket.get(portKeyOf(p1, "udp")))?.operation, "PUT", "UDP freed");
    assert.deepEqual(await routesOf(p1), ["n1/tcp-a"], "TCP kept");
  });

  it("tells a shared route asking for another port to join the port its owner holds", async () => {
    const [p1, p2] = portsOfTest();
    const owner = `group:join-${p1}`;
    const a = node("n1");
    const b = node("n2");
    assert.deepEqual(await a.ports.claim(a.claim(p1, "ta", { owner, shared: true })), { ok: true });
    assert.equal(await ownerKeyPort(owner), p1);
    assert.deepEqual(await b.ports.claim(b.claim(p2, "tb", { owner, shared: true })), {
      ok: false,
      reason: "taken",
      join: p1,
    });
    assert.equal(await routesOf(p2), undefined);
    assert.deepEqual(await b.ports.claim(b.claim(p1, "tb", { owner, shared: true })), { ok: true });
    assert.deepEqual(await routesOf(p1), ["n1/ta", "n2/tb"]);
  });

  it("lets a group hold a UDP port beside its TCP port: the owner's key is TCP's alone", async () => {
    const [p1, p2] = portsOfTest();
    const owner = `group:udp-${p1}`;
    const a = node("n1");
    const b = node("n2");
    assert.deepEqual(await a.ports.claim(a.claim(p1, "ta", { owner, shared: true })), { ok: true });
    const udp = { owner, shared: true, protocol: "udp" as const };
    assert.deepEqual(await a.ports.claim(a.claim(p2, "ua", udp)), { ok: true });
    assert.deepEqual(await b.ports.claim(b.claim(p2, "ub", udp)), { ok: true });
    assert.equal(await ownerKeyPort(owner), p1, "the key still names the TCP port");
    const record = JSON.parse((await bucket.get(portKeyOf(p2, "udp")))!.string());
    assert.deepEqual(record.routes.map((r: PortClaim) => `${r.node}/${r.tunnel}`), [
      "n1/ua",
      "n2/ub",
    ]);
    // The UDP port's last member going leaves the TCP port's key alone.
    await a.ports.release(a.claim(p2, "ua", udp));
    await b.ports.release(b.claim(p2, "ub", udp));
    assert.equal(await ownerKeyPort(owner), p1);
  });

  it("makes shared routes of one owner asking for two ports at once agree on one", async () => {
    const [p1, p2] = portsOfTest();
    const owner = `group:race-${p1}`;
    const a = node("n1");
    const b = node("n2");
    const [fromA, fromB] = await Promise.all([
      a.ports.claim(a.claim(p1, "ta", { owner, shared: true })),
      b.ports.claim(b.claim(p2, "tb", { owner, shared: true })),
    ]);
    assert.equal([fromA, fromB].filter((r) => r.ok).length, 1);
    const [won, told] = fromA.ok ? [p1, fromB] : [p2, fromA];
    assert.equal(!told.ok && told.join, won);
    assert.equal(await ownerKeyPort(owner), won);
    assert.equal(await routesOf(won === p1 ? p2 : p1), undefined);
  });

  it("joins the port an owner's key names while that port's record is not written yet", async () => {
    const [p1, p2] = portsOfTest();
    const owner = `group:early-${p1}`;
    // Another node has named p1 for the owner and is about to write p1's record.
    await bucket.create(ownerKeyOf(owner), JSON.stringify({ port: p1 }));
    const b = node("n2");
    const result = await b.ports.claim(b.claim(p2, "tb", { owner, shared: true }));
    assert.equal(!result.ok && result.join, p1);
    assert.equal(await routesOf(p2), undefined);
  });

  it("moves an owner's key from a port whose record is stale to the port claimed now", async () => {
    const [p1, p2] = portsOfTest();
    const owner = `group:moved-${p1}`;
    const alive: Alive = new Set();
    const a = node("n1", { alive });
    assert.ok((await a.ports.claim(a.claim(p1, "ta", { owner, shared: true }))).ok);
    alive.delete("n1/r1"); // n1 died holding p1
    const b = node("n2", { alive, ttlMs: 0 });
    await waitFor(
      async () => (await b.ports.claim(b.claim(p2, "tb", { owner, shared: true }))).ok,
      "the claim of p2",
    );
    assert.equal(await ownerKeyPort(owner), p2);
    assert.deepEqual(await routesOf(p2), ["n2/tb"]);
  });

  it("lets a shared route take over the stale port its owner's key names", async () => {
    const [p1] = portsOfTest();
    const owner = `group:again-${p1}`;
    const alive: Alive = new Set();
    const a = node("n1", { alive });
    assert.ok((await a.ports.claim(a.claim(p1, "ta", { owner, shared: true }))).ok);
    alive.delete("n1/r1"); // the only member died; another comes back for the same port
    const b = node("n2", { alive, ttlMs: 0 });
    // Until the record is older than the TTL, a member joins its dead routes instead.
    const written = (await entryOf(p1)).created.getTime();
    await waitFor(() => Date.now() > written, "the record to be stale");
    assert.ok((await b.ports.claim(b.claim(p1, "tb", { owner, shared: true }))).ok);
    assert.deepEqual(await routesOf(p1), ["n2/tb"]);
    assert.equal(await ownerKeyPort(owner), p1);
  });

  it("drops an owner's key with its port's last route, so a port that could not be bound is not kept", async () => {
    const [p1, p2] = portsOfTest();
    const owner = `group:drop-${p1}`;
    const a = node("n1");
    const b = node("n2");
    const ta = a.claim(p1, "ta", { owner, shared: true });
    const tb = b.claim(p1, "tb", { owner, shared: true });
    assert.ok((await a.ports.claim(ta)).ok);
    assert.ok((await b.ports.claim(tb)).ok);
    await a.ports.release(ta);
    assert.equal(await ownerKeyPort(owner), p1, "kept while n2 still serves p1");
    await b.ports.release(tb);
    assert.equal(await ownerKeyPort(owner), undefined);
    assert.equal(await routesOf(p1), undefined);
    // Nothing left to join: another port is the owner's now.
    assert.deepEqual(await a.ports.claim(a.claim(p2, "ta2", { owner, shared: true })), {
      ok: true,
    });
    assert.equal(await ownerKeyPort(owner), p2);
  });

  it("answers an owner's port from its view, else from the owner's key in the bucket", async () => {
    const [p1] = portsOfTest();
    const owner = `group:where-${p1}`;
    const alive: Alive = new Set();
    const a = node("n1", { alive });
    assert.ok((await a.ports.claim(a.claim(p1, "ta", { owner, shared: true }))).ok);

    // A node that has not seen the record yet reads the owner's key.
    const fresh = node("n3", { alive });
    assert.equal(await fresh.ports.ownerPort(owner, "127.0.0.1"), p1);
    assert.equal(await fresh.ports.ownerPort("group:nobody", "127.0.0.1"), undefined);

    // With the key gone, the view answers: on any address, as the route is another node's.
    await bucket.delete(ownerKeyOf(owner));
    assert.equal(await fresh.ports.ownerPort(owner, "127.0.0.1"), undefined);
    fresh.ports.apply(await entryOf(p1));
    assert.equal(await fresh.ports.ownerPort(owner, "127.0.0.1"), p1);
    assert.equal(await fresh.ports.ownerPort(owner, "127.0.0.2"), p1);
    // Routes only of this node count on their own address only.
    a.ports.apply(await entryOf(p1));
    assert.equal(await a.ports.ownerPort(owner, "127.0.0.1"), p1);
    assert.equal(await a.ports.ownerPort(owner, "127.0.0.2"), undefined);
    // A dead owner's record is no owner's port.
    alive.delete("n1/r1");
    assert.equal(await fresh.ports.ownerPort(owner, "127.0.0.1"), undefined);
  });

  it("reports a port change per route, and lists the live routes by port", async () => {
    const [p1, p2] = portsOfTest();
    const alive: Alive = new Set();
    const a = node("n1", { alive });
    const observer = node("n3", { alive });
    const high = a.claim(p2, "t2");
    const low = a.claim(p1, "t1");
    await a.ports.claim(high);
    await a.ports.claim(low);
    observer.ports.apply(await entryOf(p2));
    observer.ports.apply(await entryOf(p1));
    assert.deepEqual(observer.changes.map((c) => c.kind === "port" && `${c.op} ${c.claim.port}`), [
      `claimed ${p2}`,
      `claimed ${p1}`,
    ]);
    const claimed = observer.changes[0];
    assert.equal(claimed.kind === "port" && claimed.claim.tunnel, "t2");
    assert.equal(claimed.kind === "port" && claimed.claim.node, "n1");
    assert.equal(claimed.kind === "port" && claimed.claim.bindHost, "127.0.0.1");
    const mine = (c: PortClaim) => c.port === p1 || c.port === p2;
    assert.deepEqual(observer.ports.claims().filter(mine).map((c) => c.port), [p1, p2]);
    assert.equal(observer.ports.holder(p1)?.tunnel, "t1");
    assert.ok([...observer.ports.keys()].includes(portKeyOf(p1)));

    await a.ports.release(low);
    observer.ports.apply(await entryOf(p1));
    assert.deepEqual(observer.changes.slice(2).map((c) => c.kind === "port" && c.op), ["released"]);
    assert.equal(observer.ports.holder(p1), undefined);
    alive.delete("n1/r1");
    assert.equal(observer.ports.holder(p2), undefined, "a dead node's route holds nothing");
  });

  it("writes a route's health into its port's record", async () => {
    const [p1] = portsOfTest();
    const a = node("n1");
    const observer = node("n3");
    const claim = a.claim(p1, "t1");
    await a.ports.claim(claim);
    await a.ports.setHealth(claim, false);
    observer.ports.apply(await entryOf(p1));
    assert.equal(observer.ports.routeHealthy(p1, "n1", "t1"), false);
    assert.equal(observer.ports.routeHealthy(p1, "n1", "t-other"), true);
  });

  it("lets a claim take a port or an owner key that a NATS user without the cluster key wrote", async () => {
    const bare = await bareBucket(link.url, "ports-test-ports");
    const [p1, p2, p3] = portsOfTest();
    const owner = `group:forged-${p1}`;
    // A record naming a node run that presence says is alive: believed, it would be held.
    const alive: Alive = new Set(["n9/r1"]);
    const forged = (port: number, recordOwner: string) =>
      JSON.stringify({
        bindHost: "127.0.0.1",
        port,
        owner: recordOwner,
        shared: true,
        client: "intruder",
        routes: [{ node: "n9", run: "r1", session: "s9", tunnel: "t9", client: "intruder" }],
      });
    await bare.put(portKeyOf(p1), forged(p1, "client:intruder"));
    await bare.put(portKeyOf(p2), forged(p2, owner));
    await bare.put(ownerKeyOf(owner), JSON.stringify({ port: p2 }));
    const a = node("n1", { alive });
    assert.deepEqual(await a.ports.claim(a.claim(p1, "ta")), { ok: true });
    assert.deepEqual(await routesOf(p1), ["n1/ta"]);
    // The owner's key named p2 (a forged record of the owner): a member asking for p3 is not
    // told to join p2, and p3 becomes the owner's port.
    assert.equal(await a.ports.ownerPort(owner, "127.0.0.1"), undefined);
    assert.deepEqual(await a.ports.claim(a.claim(p3, "tc", { owner, shared: true })), { ok: true });
    assert.equal(await ownerKeyPort(owner), p3);
    assert.equal(a.ports.holder(p2), undefined);
  });
});
