// Presence over a real nats-server's `nodes` bucket, whose entries expire after the presence TTL
// as in a cluster. Several Presence instances stand for several nodes; a node that died without
// leaving is an entry written straight into the bucket that nobody rewrites. Every test uses its
// own node names, so the tests share one server and one bucket.
import { after, afterEach, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { cleanup } from "../../testing/cleanup.ts";
import { waitFor } from "../../testing/wait.ts";
import { Logger } from "../../util/log.ts";
import type { KvBucket, NatsLink } from "./nats.ts";
import { type NodeInfo, Presence } from "./presence.ts";
import { bareBucket, testNatsLink } from "./_nats_link.ts";

const log = new Logger({ level: "error", format: "json", sink: () => {} });
/** Short, so that an entry nobody rewrites expires within the test (heartbeats every third). */
const TTL_MS = 1_000;

let link: NatsLink & { url: string };
let bucket: KvBucket;
let serial = 0;
const started: Presence[] = [];

/** A node name no other test uses. */
function unique(role: string): string {
  return `${role}-${++serial}-${crypto.randomUUID().slice(0, 6)}`;
}

/** A node's presence, started, with what it reports. */
async function presence(
  node: string,
  options: { run?: string; counts?: () => { sessions: number; tunnels: number } } = {},
) {
  const up: NodeInfo[] = [];
  const gone: NodeInfo[] = [];
  const beats: number[] = [];
  let selfLost = 0;
  const p = new Presence({
    bucket,
    self: {
      node,
      run: options.run ?? crypto.randomUUID(),
      advertise: `127.0.0.1:${20_000 + serial}`,
      version: "0.0.0-test",
      startedAt: Date.now(),
    },
    counts: options.counts ?? (() => ({ sessions: 0, tunnels: 0 })),
    ttlMs: TTL_MS,
    log,
  });
  p.onNodeUp = (info) => up.push(info);
  p.onNodeGone = (info) => gone.push(info);
  p.onBeat = (n) => beats.push(n);
  p.onSelfLost = () => selfLost++;
  started.push(p);
  await p.start();
  return {
    presence: p,
    up,
    gone,
    beats,
    get selfLost() {
      return selfLost;
    },
  };
}

/** A node's entry as a node writes it. */
function entry(node: string, run: string): string {
  const info: NodeInfo = {
    node,
    run,
    advertise: "127.0.0.1:1",
    version: "0.0.0-test",
    startedAt: Date.now(),
    at: Date.now(),
    sessions: 0,
    tunnels: 0,
  };
  return JSON.stringify(info);
}

describe("Presence", () => {
  before(async () => {
    link = await testNatsLink("presence-test", TTL_MS);
    bucket = link.nodes;
  });
  afterEach(async () => {
    await Promise.all(started.splice(0).map((p) => p.stop()));
  });
  after(async () => {
    await link?.close();
    await cleanup();
  });

  it("sees the nodes present when it starts, and each node that starts later", async () => {
    // Named so that the later node sorts first.
    const n1 = unique("zz");
    const n2 = unique("aa");
    const first = await presence(n1);
    const second = await presence(n2);
    // The newcomer read the bucket whole before start() resolved.
    assert.ok(second.presence.alive(n1, first.presence.run));
    assert.ok(second.up.some((info) => info.node === n1));
    const seen = await waitFor(() => first.up.find((info) => info.node === n2), `${n1} sees ${n2}`);
    assert.equal(seen.run, second.presence.run);
    assert.equal(first.presence.get(n2)?.advertise, second.presence.get(n2)?.advertise);
    assert.ok(first.presence.alive(n2));
    assert.ok(first.presence.alive(n2, second.presence.run));
    assert.equal(first.presence.alive(n2, "another-run"), false);
    // Every live node, itself included, by name.
    const names = first.presence.nodes().map((info) => info.node);
    assert.ok(names.includes(n1) && names.includes(n2));
    assert.deepEqual(names, [...names].sort((a, b) => a.localeCompare(b)));
    assert.ok(!first.up.some((info) => info.node === n1), "a node does not report itself");
  });

  it("beats: rewrites its entry with its live counts, and the others see them", async () => {
    const n1 = unique("n1");
    const n2 = unique("n2");
    let sessions = 0;
    const watcher = await presence(n1);
    const beating = await presence(n2, { counts: () => ({ sessions, tunnels: 2 * sessions }) });
    sessions = 3;
    await waitFor(() => beating.beats.length >= 2, "two heartbeats");
    assert.deepEqual(beating.beats.slice(0, 2), [1, 2]);
    const stored = JSON.parse((await bucket.get(n2))!.string()) as NodeInfo;
    assert.equal(stored.sessions, 3);
    assert.equal(stored.tunnels, 6);
    await waitFor(() => watcher.presence.get(n2)?.sessions === 3, `${n1} sees the new counts`);
    assert.deepEqual(watcher.gone, [], "a beating node is never gone");
  });

  it("reports a node gone when it leaves, and when its entry expires after it died", async () => {
    const n1 = unique("n1");
    const left = unique("left");
    const died = unique("died");
    const watcher = await presence(n1);
    const leaving = await presence(left);
    await waitFor(() => watcher.presence.alive(left), `${n1} sees ${left}`);
    await leaving.presence.stop();
    assert.notEqual((await bucket.get(left))?.operation, "PUT", "its entry removed");
    await waitFor(() => watcher.gone.some((info) => info.node === left), `${left} gone`);
    assert.equal(watcher.presence.alive(left), false);

    // A node that wrote its entry once and never again: gone once NATS expires the entry.
    await bucket.put(died, entry(died, "r1"));
    await waitFor(() => watcher.presence.alive(died, "r1"), `${n1} sees ${died}`);
    await waitFor(() => watcher.gone.some((info) => info.node === died), `${died} expired`);
    assert.equal(watcher.presence.alive(died), false);
  });

  it("ignores an entry that names another node than its key", async () => {
    const n1 = unique("n1");
    const forged = unique("forged");
    const named = unique("named");
    const later = unique("later");
    const watcher = await presence(n1);
    await bucket.put(forged, entry(named, "r1"));
    await bucket.put(later, entry(later, "r1"));
    // The watch delivers in order: once the later entry is seen, the forged one was handled.
    await waitFor(() => watcher.presence.alive(later), `${n1} sees ${later}`);
    assert.equal(watcher.presence.alive(named), false);
    assert.equal(watcher.presence.alive(forged), false);
    assert.ok(!watcher.up.some((info) => info.node === named));
    await bucket.delete(forged);
    await bucket.delete(later);
  });

  it("takes a new run of a node for its previous run gone and the new one up", async () => {
    const n1 = unique("n1");
    const n2 = unique("n2");
    const watcher = await presence(n1);
    // The previous run died a moment ago: its entry is still there when the node comes back.
    await bucket.put(n2, entry(n2, "old"));
    await waitFor(() => watcher.presence.alive(n2, "old"), `${n1} sees ${n2}'s old run`);
    const restarted = await presence(n2, { run: "new" });
    await waitFor(() => watcher.presence.alive(n2, "new"), `${n1} sees ${n2}'s new run`);
    assert.equal(watcher.presence.alive(n2, "old"), false);
    assert.deepEqual(watcher.gone.filter((i) => i.node === n2).map((i) => i.run), ["old"]);
    assert.deepEqual(watcher.up.filter((i) => i.node === n2).map((i) => i.run), ["old", "new"]);
    assert.equal(restarted.selfLost, 0);
  });

  it("notices its own entry lost, writes it again and says so, without taking itself for gone", async () => {
    const n1 = unique("n1");
    const self = await presence(n1);
    await bucket.delete(n1);
    await waitFor(() => self.selfLost > 0, "the loss noticed");
    const again = await bucket.get(n1);
    assert.equal(again?.operation, "PUT");
    assert.equal((JSON.parse(again!.string()) as NodeInfo).run, self.presence.run);
    assert.ok(self.presence.alive(n1));
    assert.deepEqual(self.gone, []);
    // Beats go on from the entry written again.
    const beats = self.beats.length;
    await waitFor(() => self.beats.length > beats, "a heartbeat after the loss");
    assert.equal(self.selfLost, 1);
  });

  it("takes its entry written by another run of its name for lost, and never itself for gone", async () => {
    const n1 = unique("n1");
    const self = await presence(n1);
    await bucket.put(n1, entry(n1, "an-impostor"));
    await waitFor(() => self.selfLost > 0, "the loss noticed");
    await waitFor(async () => {
      const stored = await bucket.get(n1);
      return stored && (JSON.parse(stored.string()) as NodeInfo).run === self.presence.run;
    }, "its own entry written again");
    assert.ok(self.presence.alive(n1, self.presence.run));
    assert.deepEqual(self.gone, []);
    assert.deepEqual(self.up, []);
  });

  it("takes no node up from an entry written by a NATS user without the cluster key", async () => {
    const bare = await bareBucket(link.url, "presence-test-nodes");
    const n1 = unique("n1");
    const ghost = unique("ghost");
    const later = unique("later");
    const watcher = await presence(n1);
    await bare.put(ghost, entry(ghost, "r1"));
    await bucket.put(later, entry(later, "r1"));
    // The watch delivers in order: once the later entry is seen, the forged one was handled.
    await waitFor(() => watcher.presence.alive(later), `${n1} sees ${later}`);
    assert.equal(watcher.presence.alive(ghost), false);
    assert.ok(!watcher.up.some((info) => info.node === ghost));
    // Nor does a node starting now, which reads the bucket whole.
    const newcomer = await presence(unique("n2"));
    assert.equal(newcomer.presence.alive(ghost), false);
    assert.ok(newcomer.presence.alive(later));
    assert.ok(!newcomer.presence.nodes().some((info) => info.node === ghost));
  });

  it("reads a live node's entry overwritten without the key as that node gone, until it beats", async () => {
    const bare = await bareBucket(link.url, "presence-test-nodes");
    const n1 = unique("n1");
    const n2 = unique("n2");
    const watcher = await presence(n1);
    const victim = await presence(n2);
    await waitFor(() => watcher.presence.alive(n2, victim.presence.run), `${n1} sees ${n2}`);
    await bare.put(n2, entry(n2, "an-impostor"));
    await waitFor(() => watcher.gone.some((info) => info.node === n2), `${n2} taken for gone`);
    assert.equal(watcher.presence.alive(n2, "an-impostor"), false);
    // Its next beat finds its entry changed, and it registers again.
    await waitFor(() => victim.selfLost > 0, `${n2} to notice`);
    await waitFor(() => watcher.presence.alive(n2, victim.presence.run), `${n2} back`);
    assert.deepEqual(watcher.up.filter((i) => i.node === n2).map((i) => i.run), [
      victim.presence.run,
      victim.presence.run,
    ]);
  });
});
