// The minted-token backend over a real nats-server's `tokens` bucket. Several backends over the
// one bucket stand for several nodes. Every test uses its own client names.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { cleanup } from "../../testing/cleanup.ts";
import { waitFor } from "../../testing/wait.ts";
import { hashToken } from "../config/token_hash.ts";
import type { TokenRecord } from "../tokens/file.ts";
import { TokenNameConflict } from "../tokens/store.ts";
import { kvTokenBackend, tokenKeyOf } from "./kv_tokens.ts";
import type { KvBucket, NatsLink } from "./nats.ts";
import { bareBucket, countedBucket, testNatsLink } from "./_nats_link.ts";

let link: NatsLink & { url: string };
let bucket: KvBucket;
let serial = 0;

/** A client name no other test uses. */
function unique(role: string): string {
  return `${role}-${++serial}-${randomBytes(3).toString("hex")}`;
}

/** A minted token's record for client `name`, with a fresh id. */
function record(name: string): TokenRecord {
  return {
    id: `tok_${randomBytes(8).toString("hex")}`,
    name,
    hash: hashToken(randomBytes(16).toString("hex")),
    scopes: { forward: ["127.0.0.1:80"] },
    createdAt: 1_700_000_000_000,
    expiresAt: null,
  };
}

/**
 * A node's backend following the bucket; `changes(...names)` are the changes it reported for
 * those client names, as `op name id` (the probes that found the watch started are left out).
 */
async function follower() {
  const backend = kvTokenBackend(bucket);
  const all: string[] = [];
  backend.follow!((r, op) => all.push(`${op} ${r.name} ${r.id}`));
  // The watch starts in the background: write probes from another node until one is reported.
  const prober = kvTokenBackend(bucket);
  await waitFor(async () => {
    await prober.add(record(unique("probe")), []);
    return all.length > 0;
  }, "the watch to start");
  const changes = (...names: string[]) =>
    all.filter((change) => names.includes(change.split(" ")[1]));
  return { backend, changes };
}

/** `inner` with a watch that can be held: it drops what it should deliver, as a stalled one. */
function holdable(inner: KvBucket) {
  const control = { hold: false };
  const wrapped: KvBucket = {
    ...inner,
    async watch(options) {
      const watch = await inner.watch(options);
      return {
        stop: () => watch.stop(),
        async *[Symbol.asyncIterator]() {
          for await (const entry of watch) if (!control.hold) yield entry;
        },
      };
    },
  };
  return { bucket: wrapped, control };
}

describe("kvTokenBackend", () => {
  before(async () => {
    link = await testNatsLink("tokens-test");
    bucket = link.tokens;
  });
  after(async () => {
    await link?.close();
    await cleanup();
  });

  it("keys a token by its client name, with dots escaped", () => {
    assert.equal(tokenKeyOf("laptop"), "name-laptop");
    assert.equal(tokenKeyOf("web.prod.eu"), "name-web_2eprod_2eeu");
    assert.equal(tokenKeyOf("a-b_c"), "name-a-b_c");
  });

  it("loads on one node the tokens minted on another, skipping entries that are not records", async () => {
    const minted = record(unique("bot"));
    await kvTokenBackend(bucket).add(minted, [minted]);
    await bucket.put(tokenKeyOf(unique("garbage")), "not json");
    await bucket.put(tokenKeyOf(unique("bad-id")), JSON.stringify({ ...minted, id: "tok_1" }));
    await bucket.put(tokenKeyOf(unique("no-hash")), JSON.stringify({ ...minted, hash: 7 }));
    const loaded = await kvTokenBackend(bucket).load();
    assert.deepEqual(loaded.filter((r) => r.name === minted.name), [minted]);
    for (const r of loaded) {
      assert.match(r.id, /^tok_[0-9a-f]{16}$/);
      assert.equal(typeof r.hash, "string");
    }
  });

  it("loads the bucket in one pass, with no read per record, and skips revoked records", async () => {
    const minted = Array.from({ length: 6 }, () => record(unique("many")));
    const minter = kvTokenBackend(bucket);
    for (const r of minted) await minter.add(r, [r]);
    await minter.remove(minted[5], []);
    const { bucket: counted, calls } = countedBucket(bucket);
    const loaded = await kvTokenBackend(counted).load();
    for (const r of minted.slice(0, 5)) {
      assert.deepEqual(loaded.filter((l) => l.name === r.name), [r]);
    }
    assert.ok(!loaded.some((l) => l.name === minted[5].name), "a revoked record is not loaded");
    assert.deepEqual(calls, { get: 0, keys: 0, latest: 1 });
  });

  it("refuses a second token of one name, minted on another node, as a name conflict", async () => {
    const name = unique("dup");
    const first = record(name);
    await kvTokenBackend(bucket).add(first, [first]);
    const second = record(name);
    await assert.rejects(kvTokenBackend(bucket).add(second, [second]), TokenNameConflict);
    assert.equal(JSON.parse((await bucket.get(tokenKeyOf(name)))!.string()).id, first.id);

    // Two nodes minting one name at the same instant: exactly one succeeds.
    const racing = unique("race");
    const outcomes = await Promise.allSettled(
      [record(racing), record(racing)].map((r) => kvTokenBackend(bucket).add(r, [r])),
    );
    assert.equal(outcomes.filter((o) => o.status === "fulfilled").length, 1);
    const refused = outcomes.find((o) => o.status === "rejected") as PromiseRejectedResult;
    assert.ok(refused.reason instanceof TokenNameConflict);
  });

  it("removes a token it knows by its id, and leaves a record it does not know", async () => {
    const name = unique("revoke");
    const minted = record(name);
    const node = kvTokenBackend(bucket);
    await node.add(minted, [minted]);
    // Another record of the name (an id this node does not know) is not removed.
    await node.remove({ ...minted, id: `tok_${"0".repeat(16)}` }, []);
    assert.equal((await bucket.get(tokenKeyOf(name)))?.operation, "PUT");
    // A node that loaded the record removes it.
    const other = kvTokenBackend(bucket);
    await other.load();
    await other.remove(minted, []);
    assert.notEqual((await bucket.get(tokenKeyOf(name)))?.operation, "PUT");
  });

  it("keeps a token minted anew on another node when a node behind revokes the old one", async () => {
    const name = unique("stale");
    const first = record(name);
    const behind = kvTokenBackend(bucket); // loads the first record, then follows nothing
    await behind.add(first, [first]);
    // Elsewhere: the first token revoked, and the name minted again.
    const elsewhere = kvTokenBackend(bucket);
    await elsewhere.load();
    await elsewhere.remove(first, []);
    const second = record(name);
    await elsewhere.add(second, [second]);
    // The node behind still knows the first record and is asked to revoke it.
    await behind.remove(first, []);
    const entry = await bucket.get(tokenKeyOf(name));
    assert.equal(entry?.operation, "PUT");
    assert.equal(JSON.parse(entry!.string()).id, second.id);
  });

  it("reports tokens minted and revoked on other nodes, but not its own mints", async () => {
    const { backend, changes } = await follower();
    const other = kvTokenBackend(bucket);
    const own = record(unique("own"));
    await backend.add(own, [own]);
    const minted = record(unique("theirs"));
    await other.add(minted, [minted]);
    const reported = () => changes(own.name, minted.name);
    await waitFor(() => reported().length > 0, "the mint reported");
    assert.deepEqual(reported(), [`added ${minted.name} ${minted.id}`]);

    await other.remove(minted, []);
    await waitFor(() => reported().length > 1, "the revocation reported");
    assert.deepEqual(reported().slice(1), [`removed ${minted.name} ${minted.id}`]);

    // The same name minted again (a new id): the new record is reported.
    const again = record(minted.name);
    await other.add(again, [again]);
    await waitFor(() => reported().length > 2, "the new mint reported");
    assert.deepEqual(reported().slice(2), [`added ${again.name} ${again.id}`]);
    // And the follower may now revoke it, knowing it.
    await backend.remove(again, []);
    assert.notEqual((await bucket.get(tokenKeyOf(again.name)))?.operation, "PUT");
  });

  it("reports a record replaced under its name as the old one removed and the new one added", async () => {
    const { changes } = await follower();
    const old = record(unique("replaced"));
    await kvTokenBackend(bucket).add(old, [old]);
    await waitFor(() => changes(old.name).length > 0, "the mint reported");
    const replacement = record(old.name);
    await bucket.put(tokenKeyOf(old.name), JSON.stringify(replacement));
    await waitFor(() => changes(old.name).length > 2, "the replacement reported");
    assert.deepEqual(changes(old.name), [
      `added ${old.name} ${old.id}`,
      `removed ${old.name} ${old.id}`,
      `added ${old.name} ${replacement.id}`,
    ]);
  });

  it("neither loads nor follows a record written by a NATS user without the cluster key", async () => {
    const bare = await bareBucket(link.url, "tokens-test-tokens");
    const { changes } = await follower();
    const forged = record(unique("forged"));
    await bare.put(tokenKeyOf(forged.name), JSON.stringify(forged));
    // Then a genuine mint: the watch delivers in order, so the forged one was handled before.
    const genuine = record(unique("genuine"));
    await kvTokenBackend(bucket).add(genuine, [genuine]);
    await waitFor(() => changes(genuine.name).length > 0, "the genuine mint reported");
    assert.deepEqual(changes(forged.name), []);
    const loaded = await kvTokenBackend(bucket).load();
    assert.ok(loaded.some((r) => r.id === genuine.id));
    assert.ok(!loaded.some((r) => r.id === forged.id || r.name === forged.name));
    // And the name is free to mint for real.
    const real = record(forged.name);
    await kvTokenBackend(bucket).add(real, [real]);
    assert.equal(JSON.parse((await bucket.get(tokenKeyOf(real.name)))!.string()).id, real.id);
  });

  it("finds a revocation its stalled watch missed by its checks, and reports it", async () => {
    const { bucket: held, control } = holdable(bucket);
    const backend = kvTokenBackend(held);
    const other = kvTokenBackend(bucket);
    const revoked = record(unique("revoked-unseen"));
    await other.add(revoked, [revoked]);
    assert.ok((await backend.load()).some((r) => r.id === revoked.id));
    const all: string[] = [];
    backend.follow!((r, op) => all.push(`${op} ${r.name} ${r.id}`));
    await waitFor(async () => {
      await other.add(record(unique("probe")), []);
      return all.length > 0;
    }, "the watch to start");
    // The watch stalls; the token is revoked on another node meanwhile.
    control.hold = true;
    await other.remove(revoked, []);
    const checks: boolean[] = [];
    while (checks.length < 3 && !checks.includes(false)) checks.push(await backend.check());
    assert.ok(checks.includes(false), `a check finds the watch behind: ${checks}`);
    assert.ok(
      all.includes(`removed ${revoked.name} ${revoked.id}`),
      `the revocation reported: ${all.join(", ")}`,
    );
    backend.stop();
  });
});
