import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { Counters } from "./counters.ts";

describe("Counters", () => {
  it("count up from 0, each name on its own", () => {
    const counters = new Counters();
    assert.equal(counters.get("auth_failure"), 0);
    counters.count("auth_failure");
    counters.count("auth_failure");
    counters.count("handshake_timeout");
    assert.equal(counters.get("auth_failure"), 2);
    assert.equal(counters.get("handshake_timeout"), 1);
    assert.equal(counters.get("never_counted"), 0);
  });

  it("snapshot every counter counted, as a fresh object the counters do not follow", () => {
    const counters = new Counters();
    assert.deepEqual(counters.snapshot(), {});
    counters.count("a");
    counters.count("b");
    counters.count("b");
    const snapshot = counters.snapshot();
    assert.deepEqual(snapshot, { a: 1, b: 2 });
    snapshot.a = 99;
    counters.count("a");
    assert.equal(counters.get("a"), 2);
    assert.deepEqual(snapshot, { a: 99, b: 2 });
    assert.notEqual(counters.snapshot(), counters.snapshot());
  });
});
