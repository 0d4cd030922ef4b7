import { afterEach, describe, it } from "node:test";
import assert from "node:assert/strict";
import type { PortClaim } from "../registry/registry.ts";
import { ReverseTunnel } from "../tunnels/reverse_tunnel.ts";
import { Fixture } from "./_handler_fixture.ts";
import { type HealthMessage, reportHealth } from "./health.ts";
import { offer, type OfferMessage } from "./offer.ts";

let f: Fixture;

/** Reports health as request 8 and returns the answer. */
async function report(fields: Omit<HealthMessage, "type" | "id">) {
  const message: HealthMessage = { type: "health", id: 8, ...fields };
  f.sent.length = 0;
  await reportHealth(f.context, f.client, message, f.answer(message));
  assert.equal(f.sent.length, 1);
  return f.sent[0] as Record<string, unknown>;
}

/** A tunnel of the session on 127.0.0.1:20001 (no listener: health needs none). */
function tunnel(): ReverseTunnel {
  const added = new ReverseTunnel({
    id: "t-1",
    client: "alice",
    session: f.context.yamux,
    bindHost: "127.0.0.1",
    port: 20001,
    log: f.context.log,
  });
  f.tunnels.add(added, "test");
  f.events.length = 0; // its tunnel_up is add()'s own test
  return added;
}

const OK = { type: "ok", id: 8 };

describe("reportHealth: a tunnel's", () => {
  afterEach(() => f.close());

  it("withdraws an unhealthy route and brings it back: logged, counted, told, recorded", async () => {
    f = new Fixture();
    const route = tunnel();
    const recorded: [PortClaim, boolean][] = [];
    f.registry.setRouteHealth = (claim, healthy) => {
      recorded.push([claim, healthy]);
      return Promise.resolve();
    };
    assert.deepEqual(await report({ tunnel: "t-1", healthy: false, detail: "refused" }), OK);
    assert.equal(route.reportedHealthy, false);
    assert.equal(route.healthy, false);
    assert.deepEqual(f.counted, ["route_unhealthy"]);
    assert.deepEqual(f.events, [{
      type: "route_health",
      fields: { tunnel: "t-1", client: "alice", session: "s1", healthy: 0, detail: "refused" },
    }]);
    assert.equal(f.logged("route withdrawn: unhealthy")[0].detail, "refused");
    assert.deepEqual(recorded, [[f.tunnels.portClaim(route), false]]);

    assert.deepEqual(await report({ tunnel: "t-1", healthy: true }), OK);
    assert.equal(route.healthy, true);
    assert.deepEqual(f.counted, ["route_unhealthy", "route_healthy"]);
    assert.equal(f.events[1].fields.healthy, 1);
    assert.equal(f.logged("route healthy again").length, 1);
    assert.deepEqual(recorded.map(([, healthy]) => healthy), [false, true]);
  });

  it("answers ok and changes nothing when the health is what it was", async () => {
    f = new Fixture();
    tunnel();
    assert.deepEqual(await report({ tunnel: "t-1", healthy: true }), OK);
    assert.deepEqual(f.counted, []);
    assert.deepEqual(f.events, []);
  });

  it("refuses a tunnel the session does not hold", async () => {
    f = new Fixture();
    const answer = await report({ tunnel: "t-2", healthy: false });
    assert.deepEqual(answer, {
      type: "error",
      id: 8,
      code: "not_found",
      message: "no tunnel t-2 in this session",
    });
    assert.equal(f.logged("health refused")[0].reason, "not_found");
  });
});

describe("reportHealth: an offer's", () => {
  afterEach(() => f.close());

  /** Offers `service` from the session. */
  async function offered(service: string): Promise<void> {
    const message: OfferMessage = { type: "offer", id: 1, service };
    await offer(f.context, f.client, message, f.answer(message));
    assert.deepEqual(f.sent.pop(), { type: "ok", id: 1 });
  }

  it("takes an unhealthy offer out of service and brings it back", async () => {
    f = new Fixture();
    await offered("db");
    assert.deepEqual(await report({ service: "db", healthy: false, detail: "down" }), OK);
    assert.equal(f.registry.services()[0].healthy, false);
    assert.equal(f.registry.service("db"), undefined, "no healthy offer to choose");
    assert.deepEqual(f.counted, ["route_unhealthy"]);
    assert.deepEqual(f.events, [{
      type: "route_health",
      fields: { service: "db", client: "alice", session: "s1", healthy: 0, detail: "down" },
    }]);
    assert.equal(f.logged("offer withdrawn: unhealthy")[0].service, "db");

    assert.deepEqual(await report({ service: "db", healthy: true }), OK);
    assert.equal(f.registry.service("db")?.session, "s1");
    assert.deepEqual(f.counted, ["route_unhealthy", "route_healthy"]);
    assert.equal(f.logged("offer healthy again").length, 1);
  });

  it("answers ok and changes nothing when the health is what it was", async () => {
    f = new Fixture();
    await offered("db");
    assert.deepEqual(await report({ service: "db", healthy: true }), OK);
    assert.deepEqual(f.counted, []);
    assert.deepEqual(f.events, []);
  });

  it("refuses a service this session does not offer", async () => {
    f = new Fixture();
    assert.deepEqual(await report({ service: "db", healthy: false }), {
      type: "error",
      id: 8,
      code: "not_found",
      message: "this session does not offer db",
    });
    assert.deepEqual(f.counted, []);
  });
});
