import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { Session } from "../../protocol/session.ts";
import type { Stream } from "../../protocol/stream.ts";
import { memoryPair } from "../../transport/memory.ts";
import { ResetReason } from "../../tunnel/stream/reset_reasons.ts";
import { VisitorGate } from "../../tunnel/policy/visitor_gate.ts";
import { Logger } from "../../util/log.ts";
import { echoClient, QUIET, received } from "./_echo_client.ts";
import { ReverseTunnel } from "./reverse_tunnel.ts";
import { ClientVisitors, type VisitorLimit, type VisitorRefusal } from "./visitor_limit.ts";

const log = new Logger({ level: "error", format: "json", sink: () => {} });

/** A visitor that stays connected until the test ends it: its outside end, and its text. */
function visitor(tunnel: ReverseTunnel) {
  const [outside, inside] = memoryPair();
  const text = received(outside);
  tunnel.visitor(inside);
  return { outside, text };
}

function limited(perTunnel: number, client: ClientVisitors, refusals: VisitorRefusal[]) {
  const limit: VisitorLimit = {
    perTunnel: () => perTunnel,
    client,
    refused: (r) => refusals.push(r),
  };
  return limit;
}

function tunnel(id: string, session: Session, visitorLimit?: VisitorLimit): ReverseTunnel {
  return new ReverseTunnel({
    id,
    client: "alice",
    session,
    bindHost: "127.0.0.1",
    port: 20100,
    visitorLimit,
    log,
  });
}

/** Waits until `condition` holds, a bounded number of turns. */
async function until(condition: () => boolean): Promise<void> {
  for (let i = 0; i < 200 && !condition(); i++) await new Promise((r) => setTimeout(r, 5));
  assert.ok(condition());
}

describe("ReverseTunnel", () => {
  it("is a local route owned by its client unless a group owns it", () => {
    const { near, far } = echoClient();
    const own = tunnel("t-1", near);
    assert.equal(own.owner, "client:alice");
    assert.equal(own.local, true);
    assert.equal(own.healthy, true);
    own.reportedHealthy = false;
    assert.equal(own.healthy, false);
    assert.equal(own.open("a", "b"), undefined, "no request streams while unhealthy");
    near.close();
    far.close();
  });

  it("takes new rules in place: an HTTP tunnel a new gate (its path kept), a port tunnel no HTTP rules", async () => {
    const session = { open: () => assert.fail("no stream") };
    const { HttpGate } = await import("../http/http_gate.ts");
    const first = { basicAuth: [], pathPrefix: "/api" };
    let told = 0;
    const http = new ReverseTunnel({
      id: "t-http",
      client: "alice",
      session,
      bindHost: "app.example.com",
      port: 80,
      host: "app.example.com",
      httpPolicy: first,
      gate: new HttpGate(first),
      policy: { http: first },
      log,
    });
    http.onPolicy = () => told++;
    const before = http.gate;
    await http.setPolicy({
      deny: ["192.0.2.1/32"],
      http: { requestHeaders: { set: { "x-a": "1" } }, pathPrefix: "/other" },
    });
    assert.notEqual(http.gate, before);
    assert.deepEqual(http.httpPolicy, {
      requestHeaders: { set: { "x-a": "1" } },
      pathPrefix: "/api",
    });
    assert.equal(http.gate!.guards, false, "nobody asked for credentials any more");
    assert.deepEqual(http.policy.http, http.httpPolicy, "the policy in force says the same");
    assert.equal(http.enter("192.0.2.1:5").ok, false);
    assert.equal(told, 1);
    // The same HTTP rules again keep the gate; two changes at once: the later stands.
    const kept = http.gate;
    await http.setPolicy({ http: { requestHeaders: { set: { "x-a": "1" } } } });
    assert.equal(http.gate, kept);
    const plain = new ReverseTunnel({
      id: "t-plain",
      client: "alice",
      session,
      bindHost: "web.example.com",
      port: 80,
      host: "web.example.com",
      log,
    });
    // The first waits for the gate's code; the second, without HTTP rules, does not.
    const overtaken = plain.setPolicy({ http: { basicAuth: [] } });
    const later = plain.setPolicy({ deny: ["192.0.2.3/32"] });
    await Promise.all([overtaken, later]);
    assert.equal(plain.httpPolicy, undefined);
    assert.equal(plain.gate, undefined);
    assert.deepEqual(plain.policy, { deny: ["192.0.2.3/32"] });

    const port = new ReverseTunnel({
      id: "t-port",
      client: "alice",
      session,
      bindHost: "127.0.0.1",
      port: 20100,
      log,
    });
    await port.setPolicy({ deny: ["192.0.2.2/32"], http: { basicAuth: [] } });
    assert.deepEqual(port.policy, { deny: ["192.0.2.2/32"] });
    assert.equal(port.gate, undefined);
  });

  it("refuses a visitor past its own cap at once, counted, and takes one again when one left", async () => {
    const { near, far } = echoClient();
    const refusals: VisitorRefusal[] = [];
    const t = tunnel("t-2", near, limited(2, new ClientVisitors(() => 100), refusals));
    const first = visitor(t), second = visitor(t);
    assert.equal(t.stats.active, 2);
    const third = visitor(t);
    assert.equal(await third.text, "", "closed at once");
    assert.deepEqual(refusals, ["tunnel_visitor_limit"]);
    assert.equal(t.stats.connections, 2);
    first.outside.end();
    await first.text;
    await until(() => t.stats.active === 1);
    const fourth = visitor(t);
    assert.equal(t.stats.active, 2);
    for (const v of [second, fourth]) v.outside.end();
    await Promise.all([second.text, fourth.text]);
    near.close();
    far.close();
  });

  it("counts a client's visitors across its tunnels against the client's cap", async () => {
    const { near, far } = echoClient();
    const refusals: VisitorRefusal[] = [];
    const account = new ClientVisitors(() => 2);
    const a = tunnel("t-a", near, limited(10, account, refusals));
    const b = tunnel("t-b", near, limited(10, account, refusals));
    const onA = visitor(a), onB = visitor(b);
    assert.equal(account.active, 2);
    const refused = visitor(b);
    assert.equal(await refused.text, "");
    assert.deepEqual(refusals, ["client_visitor_limit"]);
    onA.outside.end();
    await onA.text;
    await until(() => account.active === 1);
    const again = visitor(b);
    assert.equal(account.active, 2);
    for (const v of [onB, again]) v.outside.end();
    await Promise.all([onB.text, again.text]);
    await until(() => account.active === 0);
    near.close();
    far.close();
  });

  it("gives a client's place back when the client cannot be reached", async () => {
    const account = new ClientVisitors(() => 1);
    const t = new ReverseTunnel({
      id: "t-3",
      client: "alice",
      session: {
        open(): Stream {
          throw new Error("session closed");
        },
      },
      bindHost: "127.0.0.1",
      port: 20101,
      visitorLimit: limited(5, account, []),
      log,
    });
    assert.equal(await visitor(t).text, "");
    assert.equal(account.active, 0);
    assert.equal(t.stats.errors, 1);
  });

  it("holds a relayed HTTP stream by bandwidth rules put in force later, looking none up per chunk meanwhile", async () => {
    class Relaying extends ReverseTunnel {
      limits() {
        return this.relayThrottle()!;
      }
    }
    const account = new ClientVisitors(() => 10);
    const t = new Relaying({
      id: "t-live",
      client: "alice",
      session: { open: () => assert.fail("no stream") },
      bindHost: "app.example.com",
      port: 80,
      host: "app.example.com",
      visitorLimit: limited(10, account, []),
      log,
    });
    // Every lookup of the tunnel's or the client's buckets, counted.
    let lookups = 0;
    const gateThrottle = VisitorGate.prototype.throttle;
    const clientThrottle = ClientVisitors.prototype.throttle;
    VisitorGate.prototype.throttle = function (direction) {
      lookups++;
      return gateThrottle.call(this, direction);
    };
    ClientVisitors.prototype.throttle = function (direction) {
      lookups++;
      return clientThrottle.call(this, direction);
    };
    try {
      const { aToB, bToA } = t.limits();
      const made = lookups;
      for (let i = 0; i < 1000; i++) {
        assert.equal(aToB!.spend(16 * 1024), 0);
        assert.equal(bToA!.spend(16 * 1024), 0);
      }
      assert.equal(lookups, made, "no lookup per chunk while there is no rule");
      // The tunnel's rule, then the client's, put in force while the stream is open.
      await t.setPolicy({ bandwidth: { in: 1000 } });
      assert.ok(aToB!.spend(1_000_000) > 0, "the tunnel's new rule holds it");
      assert.equal(bToA!.spend(1_000_000), 0, "the other way has no rule");
      account.setBandwidth({ out: 1000 });
      assert.ok(bToA!.spend(1_000_000) > 0, "the client's new rule holds it");
      aToB!.spend(1); // each way sees the last change once
      const found = lookups;
      for (let i = 0; i < 100; i++) {
        aToB!.spend(1);
        bToA!.spend(1);
      }
      assert.equal(lookups, found, "no lookup per chunk while no rule changes");
      // Both lifted: nothing held from the next chunk on.
      await t.setPolicy({});
      account.setBandwidth(undefined);
      assert.equal(aToB!.spend(1_000_000), 0);
      assert.equal(bToA!.spend(1_000_000), 0);
    } finally {
      VisitorGate.prototype.throttle = gateThrottle;
      ClientVisitors.prototype.throttle = clientThrottle;
    }
  });

  it("resets a relayed visitor past the cap with LimitReached", async () => {
    const { near, far } = echoClient();
    const t = tunnel("t-4", near, limited(1, new ClientVisitors(() => 100), []));
    const held = visitor(t);
    const [x, y] = memoryPair();
    const otherNode = new Session(x, { client: true, config: QUIET });
    const arriving: Promise<Stream> = new Promise((resolve) => {
      new Session(y, { client: false, config: QUIET, onStream: resolve });
    });
    const fromOtherNode = otherNode.open();
    fromOtherNode.write(new Uint8Array([1]));
    const reset = new Promise<Error | undefined>((resolve) => fromOtherNode.onClose = resolve);
    t.relayed(await arriving, "198.51.100.7:4000", "127.0.0.1:20101", new Uint8Array(0));
    const error = await reset as Error & { resetCode?: number };
    assert.equal(error?.resetCode, ResetReason.LimitReached);
    held.outside.end();
    await held.text;
    near.close();
    far.close();
    otherNode.close();
  });
});
