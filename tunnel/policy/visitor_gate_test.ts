import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { VisitorGate, visitorIp } from "./visitor_gate.ts";
import { formatIp } from "../../util/net/address.ts";

const reasons = (gate: VisitorGate, ...remotes: string[]) =>
  remotes.map((r) => {
    const entry = gate.enter(r);
    return entry.ok ? "ok" : entry.reason;
  });

describe("visitor gate", () => {
  it("reads the visitor's address in every spelling a transport gives", () => {
    assert.equal(formatIp(visitorIp("127.0.0.2:4000")!), "127.0.0.2");
    assert.equal(formatIp(visitorIp("[2001:db8::1]:4000")!), "2001:db8::1");
    assert.equal(formatIp(visitorIp("2001:db8::1")!), "2001:db8::1");
    assert.equal(visitorIp("unknown"), undefined);
    assert.equal(formatIp(visitorIp("0.0.0.0:1")!), "0.0.0.0");
    assert.equal(formatIp(visitorIp("255.255.255.255")!), "255.255.255.255");
    assert.equal(formatIp(visitorIp("[::ffff:192.0.2.1]:80")!), "::ffff:192.0.2.1");
    // Not canonical IPv4: refused, as the address parser refuses them.
    for (
      const odd of ["010.0.0.1:1", "256.0.0.1:1", "1.2.3:4", "1.2.3.4.5:6", "1..2.3:4", ".1.2.3"]
    ) {
      assert.equal(visitorIp(odd), undefined, odd);
    }
  });

  it("counts an IPv4 visitor and its IPv4-mapped spelling as one address", () => {
    const gate = new VisitorGate({ connectionsPerVisitor: 1 });
    const first = gate.enter("192.0.2.1:1000");
    assert.ok(first.ok);
    assert.deepEqual(gate.enter("[::ffff:192.0.2.1]:1001"), {
      ok: false,
      reason: "policy_visitor_connections",
    });
    assert.ok(gate.enter("192.0.2.2:1000").ok);
    assert.equal(gate.addresses, 2);
    first.leave();
    assert.ok(gate.enter("[::ffff:192.0.2.1]:1002").ok);
  });

  it("refuses by address, deny before allow; an unreadable address only under an allow list", () => {
    const gate = new VisitorGate({ allow: ["127.0.0.0/8"], deny: ["127.0.0.3/32"] });
    assert.deepEqual(reasons(gate, "127.0.0.2:1", "127.0.0.3:1", "10.0.0.1:1", "unknown"), [
      "ok",
      "policy_address",
      "policy_address",
      "policy_address",
    ]);
    assert.deepEqual(reasons(new VisitorGate({ deny: ["10.0.0.0/8"] }), "unknown"), ["ok"]);
  });

  it("limits new connections per address per second, each address on its own", () => {
    let now = 0;
    const gate = new VisitorGate({ connectionsPerSecond: 2 }, { now: () => now });
    assert.deepEqual(reasons(gate, "127.0.0.2:1", "127.0.0.2:2", "127.0.0.2:3", "127.0.0.4:1"), [
      "ok",
      "ok",
      "policy_rate",
      "ok",
    ]);
    now += 500;
    assert.deepEqual(reasons(gate, "127.0.0.2:4", "127.0.0.2:5"), ["ok", "policy_rate"]);
  });

  it("limits new connections to the tunnel, all visitors together", () => {
    let now = 0;
    const gate = new VisitorGate({ tunnelConnectionsPerSecond: 2 }, { now: () => now });
    assert.deepEqual(reasons(gate, "127.0.0.2:1", "127.0.0.3:1", "127.0.0.4:1"), [
      "ok",
      "ok",
      "policy_tunnel_rate",
    ]);
    now += 1000;
    assert.deepEqual(reasons(gate, "127.0.0.4:1"), ["ok"]);
  });

  it("limits connections at once per address, freed when one leaves", () => {
    const gate = new VisitorGate({ connectionsPerVisitor: 2 });
    const a = gate.enter("127.0.0.2:1"), b = gate.enter("[::ffff:127.0.0.2]:2");
    assert.ok(a.ok && b.ok);
    assert.deepEqual(reasons(gate, "127.0.0.2:3"), ["policy_visitor_connections"]);
    a.leave();
    a.leave(); // twice is once
    const c = gate.enter("127.0.0.2:4");
    assert.ok(c.ok);
    assert.deepEqual(reasons(gate, "127.0.0.2:5"), ["policy_visitor_connections"]);
  });

  it("keeps its address table bounded, forgetting idle addresses first", () => {
    let now = 0;
    const gate = new VisitorGate({ connectionsPerSecond: 1, connectionsPerVisitor: 5 }, {
      now: () => now,
      maxAddresses: 100,
    });
    const visit = (remote: string) => {
      const entry = gate.enter(remote);
      if (entry.ok) entry.leave();
    };
    const held = gate.enter("10.0.0.1:1"); // stays connected: must not be forgotten
    assert.ok(held.ok);
    for (let i = 0; i < 1000; i++) visit(`10.1.${i >> 8}.${i & 255}:1`);
    assert.ok(gate.addresses <= 100, `${gate.addresses} addresses`);
    now += 10_000;
    for (let i = 0; i < 1000; i++) visit(`10.2.${i >> 8}.${i & 255}:1`);
    assert.ok(gate.addresses <= 100);
    // The connected address is remembered: its connection still counts against its cap.
    gate.update({ connectionsPerVisitor: 1 });
    assert.deepEqual(reasons(gate, "10.0.0.1:2"), ["policy_visitor_connections"]);
  });

  it("changes rules in place on update, keeping connections counted", () => {
    const gate = new VisitorGate({});
    assert.ok(gate.idle);
    assert.equal(gate.throttle("in"), undefined);
    gate.update({ connectionsPerVisitor: 1, bandwidth: { out: 1000 } });
    const a = gate.enter("127.0.0.2:1");
    assert.ok(a.ok);
    assert.deepEqual(reasons(gate, "127.0.0.2:2"), ["policy_visitor_connections"]);
    assert.ok(gate.throttle("out"));
    assert.equal(gate.throttle("in"), undefined);
    gate.update({ connectionsPerVisitor: 2, deny: ["127.0.0.9/32"] });
    assert.deepEqual(reasons(gate, "127.0.0.2:3", "127.0.0.2:4", "127.0.0.9:1"), [
      "ok",
      "policy_visitor_connections",
      "policy_address",
    ]);
    gate.update({});
    assert.ok(gate.idle);
    assert.deepEqual(reasons(gate, "127.0.0.9:1"), ["ok"]);
  });

  it("moves its bandwidth generation when a bandwidth limit is set or lifted, and only then", () => {
    const gate = new VisitorGate({ connectionsPerVisitor: 1 });
    const at = gate.bandwidthGeneration;
    gate.update({ connectionsPerVisitor: 2, deny: ["192.0.2.1/32"] });
    assert.equal(gate.bandwidthGeneration, at, "no bandwidth rule changed");
    gate.update({ bandwidth: { in: 1000 } });
    const set = gate.bandwidthGeneration;
    assert.notEqual(set, at, "a limit set");
    gate.update({ bandwidth: { in: 2000 } });
    assert.equal(gate.bandwidthGeneration, set, "a rate changed: the same bucket holds");
    gate.update({ bandwidth: { in: 2000, out: 10 } });
    const more = gate.bandwidthGeneration;
    assert.notEqual(more, set, "the other way's limit set");
    gate.update({ bandwidth: { out: 10 } });
    assert.notEqual(gate.bandwidthGeneration, more, "a limit lifted");
  });

  it("holds bytes by the tunnel's bandwidth with the bucket's arithmetic", () => {
    let now = 0;
    const gate = new VisitorGate({ bandwidth: { in: 1000 } }, { now: () => now });
    const throttle = gate.throttle("in")!;
    assert.equal(throttle.spend(1000), 0);
    assert.equal(throttle.spend(500), 500);
    now += 500;
    assert.equal(throttle.spend(100), 100);
  });
});
