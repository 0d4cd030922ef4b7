import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { type DaemonEvent, EventFeed } from "./events.ts";

describe("EventFeed", () => {
  it("sends each event, with its kind, time and fields, to every subscriber", () => {
    const feed = new EventFeed();
    const first: DaemonEvent[] = [];
    const second: DaemonEvent[] = [];
    feed.subscribe((event) => first.push(event));
    feed.subscribe((event) => second.push(event));
    const before = Date.now();
    feed.publish("tunnel_up", { tunnel: "t-1", client: "alice", port: 20_001 });
    const after = Date.now();
    assert.equal(first.length, 1);
    assert.deepEqual(second, first);
    const [event] = first;
    assert.equal(event.type, "tunnel_up");
    assert.deepEqual(event.fields, { tunnel: "t-1", client: "alice", port: 20_001 });
    assert.ok(event.time >= before && event.time <= after);
  });

  it("stops sending to a subscriber once it unsubscribed", () => {
    const feed = new EventFeed();
    const seen: string[] = [];
    const unsubscribe = feed.subscribe((event) => seen.push(event.type));
    feed.publish("drain", {});
    unsubscribe();
    feed.publish("session_closed", { session: "s1" });
    assert.deepEqual(seen, ["drain"]);
  });

  it("goes on to the other subscribers when one throws", () => {
    const feed = new EventFeed();
    const seen: string[] = [];
    feed.subscribe(() => {
      throw new Error("a broken subscriber");
    });
    feed.subscribe((event) => seen.push(event.type));
    assert.doesNotThrow(() => feed.publish("auth_failure", { client: "mallory" }));
    assert.deepEqual(seen, ["auth_failure"]);
  });

  it("keeps nothing: a subscriber gets only what is published after it subscribed", () => {
    const feed = new EventFeed();
    feed.publish("token_minted", { token: "tok_1" });
    const seen: string[] = [];
    feed.subscribe((event) => seen.push(event.type));
    feed.publish("token_revoked", { token: "tok_1" });
    assert.deepEqual(seen, ["token_revoked"]);
  });
});
