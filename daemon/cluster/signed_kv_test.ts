// Signed records over a real nats-server: links made by connectNats (so every bucket is wrapped
// as a node's is) for two nodes with the cluster key and one with another key, and a bare NATS
// client writing values straight into the buckets, as any NATS user could.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { cleanup } from "../../testing/cleanup.ts";
import { startNats } from "../../testing/nats.ts";
import { waitFor } from "../../testing/wait.ts";
import { Logger } from "../../util/log.ts";
import { isRevisionConflict, type KvEntry, type NatsLink } from "./nats.ts";
import { RecordKeys, RefusedRecords } from "./signed_kv.ts";
import { type BareBucket, bareBucket, connectTestLink } from "./_nats_link.ts";

const NAME = "signed-kv-test";
const KEY = "a-shared-cluster-key-of-24+chars";
const OTHER_KEY = "another-cluster-key-of-24+chars";

/** A log that keeps its lines. */
function keptLog(): { log: Logger; lines: Record<string, unknown>[] } {
  const lines: Record<string, unknown>[] = [];
  const log = new Logger({ level: "info", format: "json", sink: (l) => lines.push(JSON.parse(l)) });
  return { log, lines };
}

/** Counters as a node keeps them. */
function counter(): { count: (event: string) => void; get: (event: string) => number } {
  const values = new Map<string, number>();
  return {
    count: (event) => values.set(event, (values.get(event) ?? 0) + 1),
    get: (event) => values.get(event) ?? 0,
  };
}

let serial = 0;
/** A KV key no other test uses. */
function unique(role: string): string {
  return `${role}-${++serial}-${crypto.randomUUID().slice(0, 6)}`;
}

async function keysOf(link: NatsLink): Promise<string[]> {
  const keys: string[] = [];
  for await (const key of await link.ports.keys()) keys.push(key);
  return keys;
}

describe("RecordKeys", () => {
  const keys = new RecordKeys([KEY]);
  const value = keys.seal("tunnelmux-ports", "port-20100", '{"port":20100}');

  it("opens a record sealed for the same bucket and key", () => {
    assert.deepEqual(keys.open("tunnelmux-ports", "port-20100", value), {
      record: '{"port":20100}',
    });
    assert.match(value, /^tmkv1 [0-9a-f]{8}:[A-Za-z0-9_-]{43}\n\{"port":20100\}$/);
  });

  it("refuses it under another key or bucket, changed, bare, or signed with another key", () => {
    const refused = (bucket: string, key: string, text: string) =>
      keys.open(bucket, key, text).refused;
    assert.equal(refused("tunnelmux-ports", "port-20101", value), "forged");
    assert.equal(refused("tunnelmux-hosts", "port-20100", value), "forged");
    assert.equal(
      refused("tunnelmux-ports", "port-20100", value.replace("20100}", "20101}")),
      "forged",
    );
    assert.equal(refused("tunnelmux-ports", "port-20100", '{"port":20100}'), "unsigned");
    assert.equal(refused("tunnelmux-ports", "port-20100", ""), "unsigned");
    const other = new RecordKeys([OTHER_KEY]).seal("tunnelmux-ports", "port-20100", "{}");
    assert.equal(refused("tunnelmux-ports", "port-20100", other), "another key");
  });
});

describe("RecordKeys under several keys (a key rotation)", () => {
  const OLD = KEY;
  const NEW = "a-new-cluster-key-of-24+chars!!";
  const open = (readers: string[], writers: string[]) =>
    new RecordKeys(readers).open("b", "k", new RecordKeys(writers).seal("b", "k", "r"));

  it("sign with every key, and open when the writer and the reader share any", () => {
    assert.equal(new RecordKeys([NEW, OLD]).seal("b", "k", "r").split(" ").length, 3);
    assert.equal(open([OLD], [NEW, OLD]).record, "r");
    assert.equal(open([NEW, OLD], [OLD]).record, "r");
    assert.equal(open([OLD, NEW], [NEW]).record, "r");
  });

  it("refuse a record signed only with keys the reader does not hold", () => {
    assert.equal(open([NEW], [OLD]).refused, "another key");
    assert.equal(open([OLD], [NEW]).refused, "another key");
  });
});

describe("RefusedRecords", () => {
  it("counts each revision of a key once, warns once per key and at most ten a minute", () => {
    const { log, lines } = keptLog();
    const counts = counter();
    const refusals = new RefusedRecords(log, counts.count);
    const now = Date.now;
    let clock = 1_000_000;
    Date.now = () => clock;
    try {
      refusals.report("p-ports", "ports", "port-1", 5, "unsigned");
      refusals.report("p-ports", "ports", "port-1", 5, "unsigned"); // read again
      refusals.report("p-ports", "ports", "port-1", 6, "unsigned"); // written again
      assert.equal(counts.get("registry_unverified_ports"), 2);
      assert.equal(lines.length, 1);
      assert.deepEqual(
        [lines[0].level, lines[0].bucket, lines[0].key, lines[0].revision, lines[0].reason],
        ["warn", "p-ports", "port-1", 5, "unsigned"],
      );
      // A flood: 100 keys in a minute, 10 warnings in all.
      for (let i = 0; i < 100; i++) refusals.report("p-tokens", "tokens", `name-${i}`, 1, "forged");
      assert.equal(counts.get("registry_unverified_tokens"), 100);
      assert.equal(lines.length, 10);
      // A minute later, the next warning says how many were left out.
      clock += 60_000;
      refusals.report("p-nodes", "nodes", "n9", 1, "another key");
      assert.equal(lines.length, 11);
      assert.equal(lines[10].unlogged, 91);
      assert.equal(lines[10].key, "n9");
    } finally {
      Date.now = now;
    }
  });
});

describe("signed buckets", () => {
  let url: string;
  let a: NatsLink;
  let b: NatsLink;
  let other: NatsLink;
  let ports: BareBucket;
  let services: BareBucket;
  const aLog = keptLog();
  const aCounts = counter();

  before(async () => {
    url = (await startNats()).url;
    a = await connectTestLink(url, NAME, { keys: [KEY], log: aLog.log, count: aCounts.count });
    b = await connectTestLink(url, NAME, { keys: [KEY] });
    other = await connectTestLink(url, NAME, { keys: [OTHER_KEY] });
    ports = await bareBucket(url, `${NAME}-ports`);
    services = await bareBucket(url, `${NAME}-services`);
  });
  after(cleanup);

  it("stores a record as an envelope that another node with the key reads as written", async () => {
    const key = unique("port");
    const record = JSON.stringify({ owner: "client:laptop", routes: [] });
    const revision = await a.ports.put(key, record);
    const stored = await ports.get(key);
    assert.equal(stored?.revision, revision);
    assert.notEqual(stored?.value, record);
    assert.ok(stored?.value.startsWith("tmkv1 ") && stored.value.endsWith(`\n${record}`));
    const read = await b.ports.get(key);
    assert.deepEqual([read?.operation, read?.revision, read?.string()], ["PUT", revision, record]);
    assert.ok((await keysOf(b)).includes(key));
    // The node with another key believes none of it.
    assert.equal(await other.ports.get(key), null);
    assert.ok(!(await keysOf(other)).includes(key));
  });

  it("reads a value written without the key as absent, and a watch as a deletion", async () => {
    const seen: KvEntry[] = [];
    const watch = await a.ports.watch({ include: "updates" });
    void (async () => {
      for await (const entry of watch) seen.push(entry);
    })();
    const held = unique("held");
    const bare = unique("bare");
    const tampered = unique("tampered");
    const foreign = unique("foreign");
    const last = unique("last");
    // The watch starts in the background: write until it reports.
    await waitFor(async () => {
      await b.ports.put(held, "signed");
      return seen.some((e) => e.key === held);
    }, "the watch to start");
    const heldRevision = (await a.ports.get(held))!.revision;
    const sealed = (await ports.get(held))!.value;
    // A NATS user overwrites a record a node believed, and writes others from nothing.
    await ports.put(held, '{"owner":"client:intruder","routes":[]}');
    await ports.put(bare, '{"owner":"client:intruder","routes":[]}');
    await ports.put(tampered, sealed.replace(/\nsigned$/, "\nchanged"));
    await other.ports.put(foreign, '{"owner":"client:other","routes":[]}');
    await b.ports.put(last, "signed");
    await waitFor(() => seen.some((e) => e.key === last), "the watch to reach the last write");
    watch.stop();

    const after = seen.filter((e) => e.key !== last && e.revision > heldRevision);
    assert.deepEqual(after.map((e) => [e.key, e.operation, e.string()]), [
      [held, "DEL", ""],
      [bare, "DEL", ""],
      [tampered, "DEL", ""],
      [foreign, "DEL", ""],
    ]);
    for (const key of [held, bare, tampered, foreign]) {
      assert.equal(await a.ports.get(key), null, key);
    }
    const listed = await keysOf(a);
    assert.ok(listed.includes(last));
    for (const key of [held, bare, tampered, foreign]) assert.ok(!listed.includes(key), key);
    // The one-pass read gives the believed records, opened, and nothing of the others.
    const latest = new Map<string, string>();
    for await (const entry of await a.ports.latest()) latest.set(entry.key, entry.string());
    assert.equal(latest.get(last), "signed");
    for (const key of [held, bare, tampered, foreign]) assert.ok(!latest.has(key), key);

    // Each value counted once however often it was read (watch, get, listing), warned once.
    assert.equal(aCounts.get("registry_unverified_ports"), 4);
    const warnings = aLog.lines.filter((l) =>
      l.msg === "cluster record refused: not signed with the cluster key"
    );
    assert.deepEqual(
      warnings.map((l) => [l.bucket, l.key, l.reason]),
      [
        [`${NAME}-ports`, held, "unsigned"],
        [`${NAME}-ports`, bare, "unsigned"],
        [`${NAME}-ports`, tampered, "forged"],
        [`${NAME}-ports`, foreign, "another key"],
      ],
    );
    // Written again: counted again, not warned again.
    await ports.put(bare, "{}");
    assert.equal(await a.ports.get(bare), null);
    assert.equal(aCounts.get("registry_unverified_ports"), 5);
    assert.equal(aLog.lines.filter((l) => l.key === bare).length, 1);
  });

  it("refuses a signed record copied to another key or another bucket", async () => {
    const key = unique("port");
    await a.ports.put(key, "signed");
    const sealed = (await ports.get(key))!.value;
    const copy = unique("copy");
    await ports.put(copy, sealed);
    await services.put(key, sealed);
    assert.equal(await b.ports.get(copy), null);
    assert.equal(await b.services.get(key), null);
    assert.equal((await b.ports.get(key))?.string(), "signed");
  });

  it("creates over a value not believed, at its revision: of two nodes, one wins", async () => {
    const key = unique("forged");
    await ports.put(key, '{"owner":"client:intruder","routes":[]}');
    const outcomes = await Promise.allSettled([a.ports.create(key, "A"), b.ports.create(key, "B")]);
    const won = outcomes.flatMap((o, i) => o.status === "fulfilled" ? ["AB"[i]] : []);
    assert.equal(won.length, 1, JSON.stringify(outcomes));
    const lost = outcomes.find((o) => o.status === "rejected") as PromiseRejectedResult;
    assert.ok(isRevisionConflict(lost.reason), String(lost.reason));
    assert.equal((await a.ports.get(key))?.string(), won[0]);
    // A record believed is not taken so.
    await assert.rejects(a.ports.create(key, "C"), (e) => isRevisionConflict(e));
    // A record signed with another key is, to this node, as good as none.
    const foreign = unique("foreign");
    await other.ports.create(foreign, "D");
    await a.ports.create(foreign, "E");
    assert.equal((await b.ports.get(foreign))?.string(), "E");
  });

  it("keeps compare-and-set: update at a revision, delete at the previous sequence", async () => {
    const key = unique("cas");
    const first = await a.ports.create(key, "1");
    await assert.rejects(b.ports.create(key, "x"), (e) => isRevisionConflict(e));
    const second = await b.ports.update(key, "2", first);
    await assert.rejects(a.ports.update(key, "3", first), (e) => isRevisionConflict(e));
    await assert.rejects(a.ports.delete(key, { previousSeq: first }), (e) => isRevisionConflict(e));
    assert.equal((await a.ports.get(key))?.string(), "2");
    await a.ports.delete(key, { previousSeq: second });
    assert.notEqual((await b.ports.get(key))?.operation, "PUT");
    assert.ok(!(await keysOf(b)).includes(key));
    // Deleted: free to create again.
    assert.ok(await b.ports.create(key, "4") > second);
  });

  it("while the key rotates: [new, old] and [old] read each other's records; [new] and [old] do not", async () => {
    const NEW = "a-new-cluster-key-of-24+chars!!";
    const rolling = await connectTestLink(url, NAME, { keys: [NEW, KEY] });
    const rolled = await connectTestLink(url, NAME, { keys: [NEW] });
    const [fromRolling, fromOld, fromRolled] = [unique("rolling"), unique("old"), unique("rolled")];
    await rolling.ports.put(fromRolling, "rolling");
    await a.ports.put(fromOld, "old");
    await rolled.ports.put(fromRolled, "rolled");
    assert.equal((await a.ports.get(fromRolling))?.string(), "rolling");
    assert.equal((await rolling.ports.get(fromOld))?.string(), "old");
    assert.equal((await rolling.ports.get(fromRolled))?.string(), "rolled");
    assert.equal((await rolled.ports.get(fromRolling))?.string(), "rolling");
    // After the roll, a node with only the old key and one with only the new ignore each other.
    assert.equal(await rolled.ports.get(fromOld), null);
    assert.equal(await a.ports.get(fromRolled), null);
  });
});
