import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { HandshakeAdmission, type PendingConnection } from "./admission.ts";

function connections() {
  const closed: string[] = [];
  const make = (remoteAddress: string): PendingConnection => ({
    remoteAddress,
    close: () => closed.push(remoteAddress),
  });
  return { closed, make };
}

describe("HandshakeAdmission", () => {
  it("admits up to the bound, then closes the oldest pending connection for each newcomer", () => {
    const { closed, make } = connections();
    const admission = new HandshakeAdmission(() => ({ pending: 3, pendingPerSource: 10 }));
    for (let i = 1; i <= 3; i++) assert.equal(admission.add(make(`10.0.0.${i}:1`)), 0);
    assert.equal(admission.add(make("10.0.0.4:1")), 1);
    assert.equal(admission.add(make("10.0.0.5:1")), 1);
    assert.deepEqual(closed, ["10.0.0.1:1", "10.0.0.2:1"]);
    assert.equal(admission.size, 3);
    assert.equal(admission.evicted, 2);
  });

  it("a settled connection frees its place and is never evicted", () => {
    const { closed, make } = connections();
    const admission = new HandshakeAdmission(() => ({ pending: 2, pendingPerSource: 10 }));
    const legit = make("10.0.0.1:1");
    admission.add(legit);
    admission.add(make("10.0.0.2:1"));
    admission.settle(legit); // authenticated
    admission.settle(legit); // and later closed: harmless
    assert.equal(admission.add(make("10.0.0.3:1")), 0);
    assert.equal(admission.add(make("10.0.0.4:1")), 1);
    assert.deepEqual(closed, ["10.0.0.2:1"]);
  });

  it("a flooding source evicts its own connections, not another source's", () => {
    const { closed, make } = connections();
    const admission = new HandshakeAdmission(() => ({ pending: 100, pendingPerSource: 4 }));
    admission.add(make("192.0.2.7:5000")); // someone else, pending
    for (let i = 0; i < 1000; i++) admission.add(make(`10.9.9.9:${1024 + i}`));
    assert.equal(admission.size, 5);
    assert.equal(closed.length, 996);
    assert.ok(closed.every((a) => a.startsWith("10.9.9.9:")));
    assert.ok(!closed.includes("192.0.2.7:5000"));
  });

  it("groups IPv6 sources by address, and reads its limits at every admission", () => {
    const { closed, make } = connections();
    let limits = { pending: 10, pendingPerSource: 1 };
    const admission = new HandshakeAdmission(() => limits);
    admission.add(make("[::1]:1"));
    admission.add(make("[::1]:2"));
    assert.deepEqual(closed, ["[::1]:1"]);
    limits = { pending: 1, pendingPerSource: 1 };
    admission.add(make("[2001:db8::1]:1"));
    assert.deepEqual(closed, ["[::1]:1", "[::1]:2"]);
  });
});
