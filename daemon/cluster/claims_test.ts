// ClusterClaims over a real nats-server's KV bucket. Each ClusterClaims instance stands for one
// node (its name and run); which node runs are alive is a set the test controls, as presence
// would. Every test uses its own keys, so the tests share one server and one bucket.
import { after, afterEach, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { cleanup } from "../../testing/cleanup.ts";
import { waitFor } from "../../testing/wait.ts";
import { Logger } from "../../util/log.ts";
import type { RouteClaim } from "../registry/registry.ts";
import { type ClaimRecord, ClusterClaims, routeClaim, type RouteKind } from "./claims.ts";
import type { KvBucket, KvEntry, NatsLink } from "./nats.ts";
import { bareBucket, testNatsLink } from "./_nats_link.ts";

const log = new Logger({ level: "error", format: "json", sink: () => {} });

/**
 * A claim on a name (the shape of a service's), enough to drive the common machinery; `label`
 * stands for a subject field that may change (as an HTTP tunnel's rules do).
 */
type NameClaim = RouteClaim & { readonly name: string; readonly label?: string };

const KIND: RouteKind<NameClaim> = {
  keyOf: (claim) => `name-${claim.name}`,
  subjectOf: (claim) => ({ name: claim.name, label: claim.label }),
  claimOf: (record, route) => ({
    ...routeClaim(record, route),
    name: record.name as string,
    ...(typeof record.label === "string" ? { label: record.label } : {}),
  }),
};

let link: NatsLink & { url: string };
let bucket: KvBucket;
let serial = 0;
const stops: (() => void)[] = [];

/** A name no other test uses. */
function unique(): string {
  return `n${++serial}-${crypto.randomUUID().slice(0, 8)}`;
}

/** Node runs alive, as `node/run`: the presence view every node of a test shares. */
type Alive = Set<string>;

interface NodeOptions {
  run?: string;
  alive?: Alive;
  ttlMs?: number;
  settled?: boolean;
  connected?: boolean;
  bucket?: KvBucket;
}

/** One node's view of the bucket, with its counters and the route events it reported. */
function node(name: string, options: NodeOptions = {}) {
  const run = options.run ?? "r1";
  const alive = options.alive ?? new Set<string>();
  const counts = new Map<string, number>();
  const events: string[] = [];
  const claims = new ClusterClaims<NameClaim>({
    bucket: options.bucket ?? bucket,
    kind: KIND,
    node: name,
    run: () => run,
    alive: (n, r) => alive.has(`${n}/${r}`),
    settled: () => options.settled ?? true,
    connected: () => options.connected ?? true,
    ttlMs: options.ttlMs ?? 60_000,
    onRoute: (op, claim) => events.push(`${op} ${claim.node}/${claim.tunnel}`),
    onChange: (claim) => events.push(`changed ${claim.node}/${claim.tunnel} ${claim.label}`),
    count: (event) => counts.set(event, (counts.get(event) ?? 0) + 1),
    noun: "name",
    log,
  });
  stops.push(() => claims.stop());
  alive.add(`${name}/${run}`);
  /** A claim of `key` by this node's route `tunnel`. */
  const claim = (key: string, tunnel: string, more: Partial<NameClaim> = {}): NameClaim => ({
    name: key,
    tunnel,
    session: `s-${tunnel}`,
    client: `client-${name}`,
    node: name,
    ...more,
  });
  return { claims, counts, events, claim, name, run };
}

/** The routes of `name`'s record in the bucket, as `node/tunnel`, or undefined without one. */
async function routesOf(name: string): Promise<string[] | undefined> {
  const entry = await bucket.get(`name-${name}`);
  if (entry?.operation !== "PUT") return undefined;
  const record = JSON.parse(entry.string()) as ClaimRecord;
  return record.routes.map((r) => `${r.node}/${r.tunnel}`);
}

async function entryOf(name: string): Promise<KvEntry> {
  const entry = await bucket.get(`name-${name}`);
  assert.ok(entry, `an entry for ${name}`);
  return entry;
}

describe("ClusterClaims", () => {
  before(async () => {
    link = await testNatsLink("claims-test");
    bucket = link.ports;
  });
  afterEach(() => {
    for (const stop of stops.splice(0)) stop();
  });
  after(async () => {
    await link?.close();
    await cleanup();
  });

  it("gives a free key to exactly one of many routes claiming it at once from two nodes", async () => {
    const alive: Alive = new Set();
    const a = node("n1", { alive });
    const b = node("n2", { alive });
    const name = unique();
    const claims = [
      ...[0, 1, 2, 3].map((i) => ({ at: a, claim: a.claim(name, `ta${i}`) })),
      ...[0, 1, 2, 3].map((i) => ({ at: b, claim: b.claim(name, `tb${i}`) })),
    ];
    const results = await Promise.all(claims.map(({ at, claim }) => at.claims.claim(claim)));
    const won = results.flatMap((result, i) => result.ok ? [claims[i].claim] : []);
    assert.equal(won.length, 1);
    const winner = won[0];
    for (const result of results) {
      if (result.ok) continue;
      assert.equal(result.reason, "taken");
      assert.equal(result.holder?.tunnel, winner.tunnel);
      assert.equal(result.holder?.node, winner.node);
    }
    assert.deepEqual(await routesOf(name), [`${winner.node}/${winner.tunnel}`]);
    const total = (event: string) => (a.counts.get(event) ?? 0) + (b.counts.get(event) ?? 0);
    assert.equal(total("registry_name_claimed"), 1);
    assert.equal(total("registry_name_taken"), 7);
  });

  it("lets shared routes of one owner hold a key together, from any node, and no other owner", async () => {
    const alive: Alive = new Set();
    const a = node("n1", { alive });
    const b = node("n2", { alive });
    const c = node("n3", { alive });
    const name = unique();
    const owner = `group:${name}`;
    // Two routes on each node at once: every compare-and-set that loses is tried again.
    const results = await Promise.all([
      a.claims.claim(a.claim(name, "ta1", { owner, shared: true })),
      b.claims.claim(b.claim(name, "tb1", { owner, shared: true })),
      a.claims.claim(a.claim(name, "ta2", { owner, shared: true })),
      b.claims.claim(b.claim(name, "tb2", { owner, shared: true })),
    ]);
    assert.deepEqual(results, [{ ok: true }, { ok: true }, { ok: true }, { ok: true }]);
    assert.deepEqual((await routesOf(name))?.sort(), ["n1/ta1", "n1/ta2", "n2/tb1", "n2/tb2"]);

    const other = await c.claims.claim(c.claim(name, "tc", { owner: "group:other", shared: true }));
    assert.equal(other.ok, false);
    assert.equal(!other.ok && other.reason, "taken");
    assert.equal(!other.ok && other.holder?.owner, owner);
    // The same owner, but a route that does not share: refused too.
    const alone = await c.claims.claim(c.claim(name, "tc2", { owner }));
    assert.equal(alone.ok, false);
    assert.equal((await routesOf(name))?.length, 4);
  });

  it("takes a non-shared claim of the holding owner as taken, not as a second route", async () => {
    const a = node("n1");
    const name = unique();
    assert.ok((await a.claims.claim(a.claim(name, "t1"))).ok);
    const second = await a.claims.claim(a.claim(name, "t2"));
    assert.equal(second.ok, false);
    assert.equal(!second.ok && second.holder?.tunnel, "t1");
    assert.deepEqual(await routesOf(name), ["n1/t1"]);
  });

  it("releases only the releasing node's own route, and the record with its last route", async () => {
    const alive: Alive = new Set();
    const a = node("n1", { alive });
    const b = node("n2", { alive });
    const name = unique();
    const owner = `group:${name}`;
    const ta = a.claim(name, "ta", { owner, shared: true });
    const tb = b.claim(name, "tb", { owner, shared: true });
    assert.ok((await a.claims.claim(ta)).ok);
    assert.ok((await b.claims.claim(tb)).ok);
    await b.claims.release(ta); // not b's route
    assert.deepEqual(await routesOf(name), ["n1/ta", "n2/tb"]);
    await b.claims.release(tb);
    assert.deepEqual(await routesOf(name), ["n1/ta"]);
    await a.claims.release(ta);
    assert.equal(await routesOf(name), undefined);
    assert.equal(await a.claims.read(`name-${name}`), undefined);
  });

  it("releases a route by its node and id: the same id on another node, or another run's, stays", async () => {
    const alive: Alive = new Set();
    const a = node("n1", { alive });
    const b = node("n2", { alive });
    const name = unique();
    const owner = `group:${name}`;
    // Tunnel ids are unique in their node only.
    const onA = a.claim(name, "t1", { owner, shared: true });
    const onB = b.claim(name, "t1", { owner, shared: true });
    assert.ok((await a.claims.claim(onA)).ok);
    assert.ok((await b.claims.claim(onB)).ok);
    // n1 restarted under the same name: the new run never claimed t1, so does not release it.
    const restarted = node("n1", { alive, run: "r2" });
    await restarted.claims.release(onA);
    assert.deepEqual(await routesOf(name), ["n1/t1", "n2/t1"]);
    await b.claims.release(onB);
    assert.deepEqual(await routesOf(name), ["n1/t1"]);
  });

  it("never loses a route added between a release's read and its write", async () => {
    const alive: Alive = new Set();
    const name = unique();
    const owner = `group:${name}`;
    const b = node("n2", { alive });
    const tb = b.claim(name, "tb", { owner, shared: true });
    // n1's reads of the record are followed, once, by n2 adding its route.
    let interleave: (() => Promise<unknown>) | undefined;
    const hooked: KvBucket = {
      ...bucket,
      async get(key) {
        const entry = await bucket.get(key);
        const step = interleave;
        interleave = undefined;
        await step?.();
        return entry;
      },
    };
    const a = node("n1", { alive, bucket: hooked });
    const ta = a.claim(name, "ta", { owner, shared: true });
    assert.ok((await a.claims.claim(ta)).ok);
    interleave = () => b.claims.claim(tb);
    await a.claims.release(ta);
    assert.equal(interleave, undefined, "n2 added its route during the release");
    assert.deepEqual(await routesOf(name), ["n2/tb"]);
  });

  it("takes over a record whose routes are all of dead node runs once it is older than the TTL", async () => {
    const alive: Alive = new Set();
    const a = node("n1", { alive });
    const name = unique();
    assert.ok((await a.claims.claim(a.claim(name, "ta"))).ok);

    // n1 is alive: its route is never stale, however old.
    const whileAlive = node("n2", { alive, ttlMs: 0 });
    assert.equal((await whileAlive.claims.claim(whileAlive.claim(name, "tb"))).ok, false);

    alive.delete("n1/r1");
    // Dead, but younger than the TTL (n1 may have just started and not be seen yet): kept.
    const young = node("n2", { alive, ttlMs: 60_000 });
    const refused = await young.claims.claim(young.claim(name, "tb"));
    assert.equal(refused.ok, false);
    assert.equal(!refused.ok && refused.holder?.tunnel, "ta");
    // Dead and old, but NATS has just come back (not settled): kept.
    const unsettled = node("n2", { alive, ttlMs: 0, settled: false });
    assert.equal((await unsettled.claims.claim(unsettled.claim(name, "tb"))).ok, false);
    assert.deepEqual(await routesOf(name), ["n1/ta"]);

    const b = node("n2", { alive, ttlMs: 0 });
    await waitFor(async () => (await b.claims.claim(b.claim(name, "tb"))).ok, "a take-over");
    assert.deepEqual(await routesOf(name), ["n2/tb"]);
    assert.equal((await b.claims.read(`name-${name}`))?.record.owner, "client:client-n2");
  });

  it("lets exactly one of two nodes take over the same stale record at once", async () => {
    const alive: Alive = new Set();
    const a = node("n1", { alive });
    const name = unique();
    assert.ok((await a.claims.claim(a.claim(name, "ta"))).ok);
    alive.delete("n1/r1");
    const b = node("n2", { alive, ttlMs: 0 });
    const c = node("n3", { alive, ttlMs: 0 });
    await waitFor(async () => {
      const read = await b.claims.read(`name-${name}`);
      return read && b.claims.isStale(read.record, read.created) &&
        c.claims.isStale(read.record, read.created);
    }, "the record to be stale");
    const [fromB, fromC] = await Promise.all([
      b.claims.claim(b.claim(name, "tb")),
      c.claims.claim(c.claim(name, "tc")),
    ]);
    assert.equal([fromB, fromC].filter((r) => r.ok).length, 1);
    assert.deepEqual(await routesOf(name), [fromB.ok ? "n2/tb" : "n3/tc"]);
  });

  it("takes the routes of this node's previous run for dead: a restarted node takes them over", async () => {
    const name = unique();
    const before = node("n1", { run: "old" });
    assert.ok((await before.claims.claim(before.claim(name, "t1"))).ok);
    const restarted = node("n1", { run: "new", ttlMs: 0 });
    assert.equal(restarted.claims.isLive({ ...route("n1", "old"), tunnel: "t1" }), false);
    assert.equal(restarted.claims.isLive({ ...route("n1", "new"), tunnel: "t1" }), true);
    await waitFor(
      async () => (await restarted.claims.claim(restarted.claim(name, "t2"))).ok,
      "the new run's claim",
    );
    assert.deepEqual(await routesOf(name), ["n1/t2"]);
  });

  it("refuses a claim as unavailable while NATS is not connected, writing nothing", async () => {
    const a = node("n1", { connected: false });
    const name = unique();
    assert.deepEqual(await a.claims.claim(a.claim(name, "t1")), {
      ok: false,
      reason: "unavailable",
    });
    assert.equal(a.counts.get("registry_failure"), 1);
    assert.equal(a.counts.get("registry_name_unavailable"), 1);
    assert.equal(await routesOf(name), undefined);
  });

  it("writes each route's health into its record, and reads it back from the records applied", async () => {
    const alive: Alive = new Set();
    const a = node("n1", { alive });
    const b = node("n2", { alive });
    const observer = node("n3", { alive });
    const name = unique();
    const key = `name-${name}`;
    const owner = `group:${name}`;
    const ta = a.claim(name, "ta", { owner, shared: true });
    assert.ok((await a.claims.claim(ta)).ok);
    assert.ok((await b.claims.claim(b.claim(name, "tb", { owner, shared: true }))).ok);

    await a.claims.setHealth(ta, false);
    observer.claims.apply(await entryOf(name));
    assert.equal(observer.claims.routeHealthy(key, "n1", "ta"), false);
    assert.equal(observer.claims.routeHealthy(key, "n2", "tb"), true);
    assert.equal(observer.claims.routeHealthy(key, "n9", "unknown"), true);
    assert.deepEqual(
      observer.claims.liveRoutes(key).map((r) => `${r.claim.tunnel} ${r.healthy}`),
      ["ta false", "tb true"],
    );

    await a.claims.setHealth(ta, true);
    observer.claims.apply(await entryOf(name));
    assert.equal(observer.claims.routeHealthy(key, "n1", "ta"), true);

    // A route's health on a record that is gone writes nothing back.
    const gone = unique();
    await a.claims.setHealth(a.claim(gone, "tx"), false);
    assert.equal(await routesOf(gone), undefined);
  });

  it("reports each route that comes or goes as records are applied, ignoring older revisions", async () => {
    const alive: Alive = new Set();
    const a = node("n1", { alive });
    const b = node("n2", { alive });
    const observer = node("n3", { alive });
    const name = unique();
    const owner = `group:${name}`;
    const ta = a.claim(name, "ta", { owner, shared: true });
    const tb = b.claim(name, "tb", { owner, shared: true });

    await a.claims.claim(ta);
    const first = await entryOf(name);
    observer.claims.apply(first);
    await b.claims.claim(tb);
    observer.claims.apply(await entryOf(name));
    observer.claims.apply(first); // late: changes nothing
    assert.deepEqual(observer.events, ["added n1/ta", "added n2/tb"]);
    assert.deepEqual(observer.claims.claims().map((c) => c.tunnel), ["ta", "tb"]);

    await a.claims.release(ta);
    observer.claims.apply(await entryOf(name));
    assert.deepEqual(observer.events.slice(2), ["removed n1/ta"]);

    // The deletion of the record arrives as a DEL entry.
    await b.claims.release(tb);
    const deleted = await entryOf(name);
    assert.equal(deleted.operation, "DEL");
    observer.claims.apply(deleted);
    assert.deepEqual(observer.events.slice(3), ["removed n2/tb"]);
    assert.equal(observer.claims.record(`name-${name}`), undefined);
    assert.deepEqual([...observer.claims.keys()], []);
  });

  it("writes a route's changed rules into its record, its health kept; watchers hear a change, not a new route", async () => {
    const alive: Alive = new Set();
    const a = node("n1", { alive });
    const observer = node("n3", { alive });
    const name = unique();
    const first = a.claim(name, "ta", { policy: { deny: ["10.0.0.1/32"] }, label: "first" });
    await a.claims.claim(first);
    await a.claims.setHealth(first, false);
    observer.claims.apply(await entryOf(name));

    await a.claims.update({ ...first, policy: { deny: ["10.0.0.2/32"] }, label: "second" });
    const entry = await entryOf(name);
    const record = JSON.parse(entry.string()) as ClaimRecord;
    assert.equal(record.label, "second");
    assert.deepEqual(record.routes[0].policy, { deny: ["10.0.0.2/32"] });
    assert.equal(record.routes[0].healthy, false, "its health stays as reported");
    observer.claims.apply(entry);
    assert.deepEqual(observer.events, ["added n1/ta", "changed n1/ta second"]);
    assert.deepEqual(observer.claims.claims()[0].policy, { deny: ["10.0.0.2/32"] });

    // Rules dropped: gone from the record (a field set to undefined is left out).
    await a.claims.update({ ...first, policy: undefined, label: undefined });
    const dropped = JSON.parse((await entryOf(name)).string()) as ClaimRecord;
    assert.equal("label" in dropped, false);
    assert.equal(dropped.routes[0].policy, undefined);

    // A periodic check writes a record again whose rules are not this node's any more.
    await a.claims.update({ ...first, label: "third" });
    const revision = (await entryOf(name)).revision;
    await bucket.update(`name-${name}`, JSON.stringify(dropped), revision);
    await a.claims.reassert({ rewrite: false });
    const rewritten = JSON.parse((await entryOf(name)).string()) as ClaimRecord;
    assert.equal(rewritten.label, "third");
    assert.deepEqual(rewritten.routes[0].policy, { deny: ["10.0.0.1/32"] });

    // A route this node no longer holds is not written back.
    await a.claims.release(first);
    await a.claims.update({ ...first, label: "late" });
    assert.equal(await routesOf(name), undefined);
  });

  it("forgets a record gone from the bucket, reporting each of its routes removed", async () => {
    const alive: Alive = new Set();
    const a = node("n1", { alive });
    const b = node("n2", { alive });
    const observer = node("n3", { alive });
    const name = unique();
    const owner = `group:${name}`;
    await a.claims.claim(a.claim(name, "ta", { owner, shared: true }));
    await b.claims.claim(b.claim(name, "tb", { owner, shared: true }));
    observer.claims.apply(await entryOf(name));
    observer.claims.forget(`name-${name}`);
    observer.claims.forget("name-never-seen");
    assert.deepEqual(observer.events, [
      "added n1/ta",
      "added n2/tb",
      "removed n1/ta",
      "removed n2/tb",
    ]);
    assert.deepEqual(observer.claims.claims(), []);
  });

  it("removes a gone node run's routes from the records it has seen, and records left empty", async () => {
    const alive: Alive = new Set();
    const a = node("n1", { alive });
    const b = node("n2", { alive });
    const observer = node("n3", { alive });
    const shared = unique();
    const alone = unique();
    const owner = `group:${shared}`;
    await a.claims.claim(a.claim(shared, "ta", { owner, shared: true }));
    await b.claims.claim(b.claim(shared, "tb", { owner, shared: true }));
    await a.claims.claim(a.claim(alone, "ta2"));
    observer.claims.apply(await entryOf(shared));
    observer.claims.apply(await entryOf(alone));

    // Still alive (it came back before this node acted): nothing is removed.
    await observer.claims.nodeGone("n1", "r1");
    assert.deepEqual(await routesOf(shared), ["n1/ta", "n2/tb"]);
    assert.deepEqual(await routesOf(alone), ["n1/ta2"]);

    alive.delete("n1/r1");
    await observer.claims.nodeGone("n1", "r1");
    assert.deepEqual(await routesOf(shared), ["n2/tb"]);
    assert.equal(await routesOf(alone), undefined);
  });

  it("skips a dead node's records whose release by another node its watch already brought", async () => {
    const alive: Alive = new Set();
    const a = node("n1", { alive });
    const names = [unique(), unique(), unique(), unique()];
    for (const [i, name] of names.entries()) await a.claims.claim(a.claim(name, `t${i}`));
    const read: string[] = [];
    const released = () => observer.claims;
    const counted: KvBucket = {
      ...bucket,
      async get(key) {
        read.push(key);
        if (read.length === 1) {
          // Meanwhile another node released all the others, and the watch brought it here.
          for (const other of names.map((n) => `name-${n}`).filter((k) => k !== key)) {
            await bucket.delete(other);
            released().forget(other);
          }
        }
        return await bucket.get(key);
      },
    };
    const observer = node("n3", { alive, bucket: counted });
    for (const name of names) observer.claims.apply(await entryOf(name));
    alive.delete("n1/r1");
    await observer.claims.nodeGone("n1", "r1");
    assert.equal(read.length, 1, `read only what no other node had released: ${read}`);
    for (const name of names) assert.equal(await routesOf(name), undefined);
  });

  it("deletes a record it applied whose routes are all dead, once the record is stale", async () => {
    const alive: Alive = new Set();
    const a = node("n1", { alive });
    const name = unique();
    assert.ok((await a.claims.claim(a.claim(name, "ta"))).ok);
    alive.delete("n1/r1");
    const observer = node("n3", { alive, ttlMs: 0 });
    observer.claims.apply(await entryOf(name));
    await waitFor(async () => (await routesOf(name)) === undefined, "the stale record's removal");
  });

  it("writes this node's routes again where they went missing, and gives up those another owner took", async () => {
    const alive: Alive = new Set();
    const a = node("n1", { alive });
    const b = node("n2", { alive });
    const missing = unique();
    const taken = unique();
    const kept = unique();
    const lost = a.claim(taken, "t2");
    const sick = a.claim(kept, "t3");
    await a.claims.claim(a.claim(missing, "t1"));
    await a.claims.claim(lost);
    await a.claims.claim(sick);
    await a.claims.setHealth(sick, false);
    const keptBefore = (await entryOf(kept)).revision;

    await bucket.delete(`name-${missing}`);
    await bucket.delete(`name-${taken}`);
    assert.ok((await b.claims.claim(b.claim(taken, "tb"))).ok);

    assert.deepEqual((await a.claims.reassert()).map((c) => c.tunnel), ["t2"]);
    assert.deepEqual(await routesOf(missing), ["n1/t1"]);
    assert.deepEqual(await routesOf(taken), ["n2/tb"]);
    // A route still there is written again (its revision moves), its health kept.
    const keptAfter = await entryOf(kept);
    assert.ok(keptAfter.revision > keptBefore);
    assert.equal((JSON.parse(keptAfter.string()) as ClaimRecord).routes[0].healthy, false);
    // The lost route is no longer this node's: the next check leaves it to its new owner.
    assert.deepEqual(await a.claims.reassert(), []);
    assert.deepEqual(await routesOf(taken), ["n2/tb"]);
  });
  it("removes a route released while NATS was away at the next check, so its key does not stay held", async () => {
    let away = false;
    // The bucket as a node sees it: every operation fails while NATS is away.
    const flaky = new Proxy(bucket, {
      get(target, prop, receiver) {
        const value = Reflect.get(target, prop, receiver);
        if (typeof value !== "function") return value;
        return (...args: unknown[]) => {
          if (away) return Promise.reject(new Error("NATS is away"));
          return value.apply(target, args);
        };
      },
    });
    const a = node("n1", { bucket: flaky });
    const b = node("n2");
    const name = unique();
    const route = a.claim(name, "t1");
    assert.ok((await a.claims.claim(route)).ok);
    away = true;
    await a.claims.release(route);
    assert.equal(a.counts.get("registry_failure"), 1);
    assert.deepEqual(await routesOf(name), ["n1/t1"], "still in the record while away");
    away = false;
    assert.deepEqual(await a.claims.reassert({ rewrite: false }), []);
    assert.equal(await routesOf(name), undefined, "removed once NATS is back");
    assert.ok((await b.claims.claim(b.claim(name, "tb"))).ok, "another node may take the key");
    // Removed once: the next check writes nothing of it.
    assert.deepEqual(await a.claims.reassert({ rewrite: false }), []);
    assert.deepEqual(await routesOf(name), ["n2/tb"]);
  });

  it("a periodic check (rewrite: false) writes no record that holds its route as it is, only missing ones", async () => {
    const alive: Alive = new Set();
    const a = node("n1", { alive });
    const held = unique();
    const sick = unique();
    const missing = unique();
    await a.claims.claim(a.claim(held, "t1"));
    const unwell = a.claim(sick, "t2");
    await a.claims.claim(unwell);
    await a.claims.setHealth(unwell, false);
    await a.claims.setHealth(unwell, true); // healthy again: `healthy: true` stored
    await a.claims.claim(a.claim(missing, "t3"));
    const before = [(await entryOf(held)).revision, (await entryOf(sick)).revision];
    await bucket.delete(`name-${missing}`);

    assert.deepEqual(await a.claims.reassert({ rewrite: false }), []);
    // Nothing written where the record already says what this node would write.
    assert.deepEqual([(await entryOf(held)).revision, (await entryOf(sick)).revision], before);
    assert.deepEqual(await routesOf(missing), ["n1/t3"]);
    // The default (after this node was away) still writes them again.
    await a.claims.reassert();
    assert.ok((await entryOf(held)).revision > before[0]);
  });

  it("applies no record a NATS user without the cluster key wrote, and a claim takes its key", async () => {
    const bare = await bareBucket(link.url, "claims-test-ports");
    const alive: Alive = new Set(["n9/r1"]);
    const a = node("n1", { alive });
    const name = unique();
    await bare.put(
      `name-${name}`,
      JSON.stringify({
        name,
        owner: "client:intruder",
        shared: false,
        client: "intruder",
        routes: [{ node: "n9", run: "r1", session: "s9", tunnel: "t9", client: "intruder" }],
      }),
    );
    // What a node's resync does: list the keys, read each, apply it.
    for await (const key of await bucket.keys()) {
      const entry = await bucket.get(key);
      if (entry) a.claims.apply(entry);
    }
    assert.equal(await bucket.get(`name-${name}`), null);
    assert.equal(await a.claims.read(`name-${name}`), undefined);
    assert.deepEqual(a.claims.liveRoutes(`name-${name}`), []);
    assert.deepEqual(a.events.filter((e) => e.endsWith("/t9")), []);
    assert.ok((await a.claims.claim(a.claim(name, "ta"))).ok);
    assert.deepEqual(await routesOf(name), ["n1/ta"]);
  });
});

/** A stored route of `node` in run `run`. */
function route(node: string, run: string) {
  return { node, run, session: "s", tunnel: "t", client: "c" };
}
