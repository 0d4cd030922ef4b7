// A Follower over a real nats-server's `ports` bucket: the watch and the full read at start, the
// one-request check, and a stalled or ended watch caught and read again. The bucket is wrapped to
// count what each step asks of NATS and to stall the watch on demand.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { cleanup } from "../../testing/cleanup.ts";
import { waitFor } from "../../testing/wait.ts";
import type { KvBucket, KvEntry, NatsLink } from "./nats.ts";
import { Follower } from "./follower.ts";
import { countedBucket, testNatsLink } from "./_nats_link.ts";

let link: NatsLink & { url: string };

/** `bucket` with its requests counted and a watch that can be held (deliveries dropped). */
function instrumented(bucket: KvBucket) {
  const counted = countedBucket(bucket);
  const calls = Object.assign(counted.calls, { lastRevision: 0, watch: 0 });
  const control = Object.assign(counted.control, {
    hold: false,
    end: undefined as (() => void) | undefined,
  });
  const wrapped: KvBucket = {
    ...counted.bucket,
    lastRevision: () => (calls.lastRevision++, bucket.lastRevision()),
    async watch(options) {
      calls.watch++;
      const inner = await bucket.watch(options);
      let ended = false;
      control.end = () => {
        ended = true;
        inner.stop();
      };
      return {
        stop: () => inner.stop(),
        async *[Symbol.asyncIterator]() {
          for await (const entry of inner) {
            if (ended) return;
            // A held watch drops what it should deliver, as one whose consumer the server lost.
            if (!control.hold) yield entry;
          }
        },
      };
    },
  };
  return { bucket: wrapped, calls, control };
}

/** A follower of `bucket` keeping the latest value of each key in `records`. */
function follow(bucket: KvBucket) {
  const records = new Map<string, string>();
  const applied: KvEntry[] = [];
  let stalls = 0;
  const follower = new Follower({
    name: "ports",
    bucket,
    apply: (entry: KvEntry) => {
      applied.push(entry);
      if (entry.operation === "PUT") records.set(entry.key, entry.string());
      else records.delete(entry.key);
    },
    reconcile: (listed) => {
      for (const key of [...records.keys()]) if (!listed.has(key)) records.delete(key);
      return Promise.resolve();
    },
    onStall: () => stalls++,
  });
  return {
    follower,
    records,
    applied,
    get stalls() {
      return stalls;
    },
  };
}

describe("Follower", () => {
  before(async () => {
    link = await testNatsLink("follower");
  });
  after(async () => {
    link.close();
    await cleanup();
  });

  it("reads the bucket at start in one pass, then follows it by watch alone; a check is one request", async () => {
    const prefix = `a${crypto.randomUUID().slice(0, 6)}`;
    for (let i = 0; i < 50; i++) await link.ports.put(`${prefix}-${i}`, `v${i}`);
    const { bucket, calls } = instrumented(link.ports);
    const f = follow(bucket);
    await f.follower.start();
    assert.equal(f.records.get(`${prefix}-49`), "v49", "read whole at start");
    assert.equal(calls.latest, 1, "one pass over the bucket");
    const getsAtStart = calls.get;
    assert.equal(getsAtStart, 0, "no read per record");
    await link.ports.put(`${prefix}-new`, "fresh");
    await link.ports.delete(`${prefix}-0`);
    await waitFor(() =>
      f.records.get(`${prefix}-new`) === "fresh" && !f.records.has(`${prefix}-0`)
    );
    for (let i = 0; i < 3; i++) assert.equal(await f.follower.check(), true);
    assert.equal(calls.get, getsAtStart, "no record read by a check");
    assert.equal(calls.latest, 1, "no read of the bucket by a check");
    assert.equal(calls.lastRevision, 1 + 3, "one request per check (and one at start)");
    assert.equal(f.follower.reads, 1);
    assert.equal(f.stalls, 0);
    f.follower.stop();
  });

  it("does not let the start's read undo what the watch delivered meanwhile", async () => {
    const prefix = `d${crypto.randomUUID().slice(0, 6)}`;
    await link.ports.put(`${prefix}-revoked`, "held");
    const { bucket, control } = instrumented(link.ports);
    const f = follow(bucket);
    // The read has the record; before the follower applies it, the record is deleted and the
    // watch delivers the deletion.
    control.duringRead = async () => {
      await link.ports.delete(`${prefix}-revoked`);
      await waitFor(
        () => f.applied.some((e) => e.key === `${prefix}-revoked` && e.operation !== "PUT"),
        "the watch to deliver the deletion",
      );
    };
    await f.follower.start();
    assert.equal(f.records.has(`${prefix}-revoked`), false, "still deleted after the read");
    f.follower.stop();
  });

  it("finds a watch that fell behind within two checks and reads the bucket again", async () => {
    const prefix = `b${crypto.randomUUID().slice(0, 6)}`;
    const { bucket, control } = instrumented(link.ports);
    const f = follow(bucket);
    await f.follower.start();
    control.hold = true;
    await link.ports.put(`${prefix}-missed`, "while stalled");
    // The first check learns how far the bucket is; the watch has not delivered it.
    assert.equal(await f.follower.check(), true);
    assert.equal(f.records.has(`${prefix}-missed`), false, "the held watch dropped it");
    control.hold = false;
    assert.equal(await f.follower.check(), false, "fell behind: read again");
    assert.equal(f.records.get(`${prefix}-missed`), "while stalled");
    assert.equal(f.stalls, 1);
    assert.equal(f.follower.reads, 2);
    // The new watch follows: a later write arrives without another read.
    await link.ports.put(`${prefix}-after`, "followed");
    await waitFor(() => f.records.get(`${prefix}-after`) === "followed");
    assert.equal(await f.follower.check(), true);
    assert.equal(await f.follower.check(), true);
    assert.equal(f.follower.reads, 2);
    f.follower.stop();
  });

  it("reads again after its watch ended", async () => {
    const prefix = `c${crypto.randomUUID().slice(0, 6)}`;
    const { bucket, control, calls } = instrumented(link.ports);
    const f = follow(bucket);
    await f.follower.start();
    control.end!();
    await link.ports.put(`${prefix}-x`, "1");
    await waitFor(async () => !(await f.follower.check()));
    assert.equal(f.records.get(`${prefix}-x`), "1");
    assert.equal(calls.watch, 2, "a new watch");
    f.follower.stop();
  });
});
