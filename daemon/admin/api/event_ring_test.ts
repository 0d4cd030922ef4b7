// The numbered event history: ids, eviction, resuming after an id, and subscribers.
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { EventRing } from "./event_ring.ts";
import { EventFeed } from "../../events.ts";
import type { DaemonEvent } from "../../events.ts";

const event = (n: number): DaemonEvent => ({ type: "drain", time: n, fields: { n } });

describe("EventRing", () => {
  it("numbers events from 1 and keeps the newest `capacity`", () => {
    const ring = new EventRing(3);
    assert.equal(ring.lastId, 0);
    assert.equal(ring.firstId, 1);
    for (let n = 1; n <= 5; n++) assert.equal(ring.push(event(n)).id, n);
    assert.equal(ring.firstId, 3);
    assert.equal(ring.lastId, 5);
    assert.equal(ring.get(2), undefined);
    assert.equal(ring.get(3)?.event.time, 3);
    assert.equal(ring.get(6), undefined);
  });

  it("gives what came after an id still kept, and flags ids lost or never issued", () => {
    const ring = new EventRing(3);
    for (let n = 1; n <= 5; n++) ring.push(event(n));
    assert.deepEqual(ring.after(3).events.map((e) => e.id), [4, 5]);
    assert.equal(ring.after(3).gap, false);
    assert.deepEqual(ring.after(2), { events: ring.after(2).events, gap: false });
    assert.deepEqual(ring.after(2).events.map((e) => e.id), [3, 4, 5]);
    assert.equal(ring.after(5).events.length, 0);
    assert.equal(ring.after(1).gap, true, "event 2 fell out");
    assert.deepEqual(ring.after(1).events.map((e) => e.id), [3, 4, 5]);
    assert.equal(ring.after(9).gap, true, "an id from another run");
    assert.equal(new EventRing(3).after(0).gap, false);
  });

  it("tells subscribers each event with its id, and stops after unsubscribe", () => {
    const ring = new EventRing(2);
    const feed = new EventFeed();
    const stop = ring.follow(feed);
    const seen: number[] = [];
    const unsubscribe = ring.subscribe((e) => seen.push(e.id));
    ring.subscribe(() => {
      throw new Error("a broken subscriber");
    });
    feed.publish("drain", {});
    feed.publish("drain", {});
    assert.equal(ring.subscriberCount, 2);
    unsubscribe();
    feed.publish("drain", {});
    assert.deepEqual(seen, [1, 2]);
    stop();
    feed.publish("drain", {});
    assert.equal(ring.lastId, 3);
  });

  it("rejects a capacity that is not a positive integer", () => {
    assert.throws(() => new EventRing(0), RangeError);
    assert.throws(() => new EventRing(1.5), RangeError);
  });
});
