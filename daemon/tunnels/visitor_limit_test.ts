import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { ClientVisitors, VisitorAccounts } from "./visitor_limit.ts";

describe("ClientVisitors", () => {
  it("takes visitors up to its cap, reading the cap at each take, and gives them back", () => {
    let cap = 2;
    const account = new ClientVisitors(() => cap);
    assert.equal(account.take(), true);
    assert.equal(account.take(), true);
    assert.equal(account.take(), false);
    assert.equal(account.active, 2);
    account.give();
    assert.equal(account.take(), true);
    assert.equal(account.take(), false);
    cap = 3;
    assert.equal(account.take(), true);
    assert.equal(account.active, 3);
  });

  it("never counts below zero", () => {
    const account = new ClientVisitors(() => 1);
    account.give();
    assert.equal(account.active, 0);
    assert.equal(account.take(), true);
  });
});

describe("VisitorAccounts", () => {
  it("keeps one account per client, its cap from setCaps, the fallback for a client not set", () => {
    let fallback = 1;
    const accounts = new VisitorAccounts(() => fallback);
    accounts.setCaps([{ name: "alice", limits: { visitors: 3 } }]);
    const alice = accounts.of("alice");
    assert.equal(accounts.of("alice"), alice);
    assert.deepEqual([alice.take(), alice.take(), alice.take(), alice.take()], [
      true,
      true,
      true,
      false,
    ]);
    const bob = accounts.of("bob");
    assert.deepEqual([bob.take(), bob.take()], [true, false]);
    fallback = 2;
    assert.equal(bob.take(), true);
    // A reload that lowers alice's cap applies to her next visitor; those connected stay.
    accounts.setCaps([{ name: "alice", limits: { visitors: 1 } }]);
    alice.give();
    assert.equal(alice.take(), false);
    assert.equal(alice.active, 2);
  });
});

describe("VisitorAccounts: a client's bandwidth", () => {
  it("holds the client's bytes across its tunnels, each way on its own, set and changed by setCaps", () => {
    let now = 0;
    const accounts = new VisitorAccounts(() => 10, () => now);
    accounts.setCaps([{ name: "alice", limits: { visitors: 5, bandwidth: { out: 1000 } } }]);
    const alice = accounts.of("alice");
    assert.equal(alice.throttle("in"), undefined, "no limit in: nothing per chunk");
    const out = alice.throttle("out")!;
    assert.equal(out.spend(1000), 0, "a second's worth at once");
    // Another tunnel of alice's spends from the same bucket.
    assert.equal(accounts.of("alice").throttle("out")!.spend(500), 500);
    now += 500;
    assert.equal(out.spend(0), 0);
    accounts.setCaps([{ name: "alice", limits: { visitors: 5 } }]);
    assert.equal(alice.throttle("out"), undefined, "lifted by a reload");
    assert.equal(accounts.of("bob").throttle("out"), undefined);
  });

  it("moves an account's bandwidth generation when its limit is set or lifted, and only then", () => {
    const accounts = new VisitorAccounts(() => 10);
    const alice = accounts.of("alice");
    const at = alice.bandwidthGeneration;
    accounts.setCaps([{ name: "alice", limits: { visitors: 5 } }]);
    assert.equal(alice.bandwidthGeneration, at, "a reload that sets no bandwidth");
    accounts.setCaps([{ name: "alice", limits: { visitors: 5, bandwidth: { in: 1000 } } }]);
    const set = alice.bandwidthGeneration;
    assert.notEqual(set, at, "a limit set");
    accounts.setCaps([{ name: "alice", limits: { visitors: 4, bandwidth: { in: 2000 } } }]);
    assert.equal(alice.bandwidthGeneration, set, "a rate changed: the same bucket holds");
    accounts.setCaps([]);
    assert.notEqual(alice.bandwidthGeneration, set, "lifted");
  });
});
