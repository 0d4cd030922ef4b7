import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { memoryPair } from "../../transport/memory.ts";
import type { StreamHeader } from "../../tunnel/stream/stream_header.ts";
import { Logger } from "../../util/log.ts";
import { chooseRoute } from "../registry/route_choice.ts";
import { RelayRoute } from "./relay_route.ts";
import { echoClient, received } from "../tunnels/_echo_client.ts";

const log = new Logger({ level: "error", format: "json", sink: () => {} });
const CLAIM = { tunnel: "t-abc", session: "s7", client: "alice", node: "node-b" };

describe("RelayRoute", () => {
  it("sends a visitor of this node to the holding node under the tunnel's id", async () => {
    const { near: toB, far: nodeB, headers } = echoClient();
    const route = new RelayRoute({
      claim: CLAIM,
      opener: toB,
      up: () => true,
      bindHost: "127.0.0.1",
      port: 20123,
      log,
    });
    assert.equal(route.id, "t-abc");
    assert.equal(route.node, "node-b");
    assert.equal(route.local, false);
    const [outside, inside] = memoryPair();
    const echoed = received(outside);
    route.visitor(inside);
    outside.write(new TextEncoder().encode("ping"));
    outside.end();
    assert.equal(await echoed, "ping");
    const header = headers[0] as Extract<StreamHeader, { kind: "visitor" }>;
    assert.equal(header.kind, "visitor");
    assert.equal(header.tunnel, "t-abc");
    assert.equal(route.stats.connections, 1);
    toB.close();
    nodeB.close();
  });

  it("is healthy only while the way to its node is up, and opens no request stream when down", () => {
    let up = false;
    const route = new RelayRoute({
      claim: CLAIM,
      opener: { open: () => assert.fail("no stream while down") },
      up: () => up,
      bindHost: "app.example.com",
      port: 0,
      passthrough: true,
      log,
    });
    assert.equal(route.passthrough, true);
    assert.equal(route.healthy, false);
    assert.equal(route.open("192.0.2.1:1", "127.0.0.1:443"), undefined);
    up = true;
    assert.equal(route.healthy, true);
    route.stopAccepting();
    assert.equal(route.healthy, false);
  });

  it("checks a request's visitor by the tunnel's address rules, and takes changed rules in place", () => {
    const route = new RelayRoute({
      claim: { ...CLAIM, policy: { deny: ["192.0.2.5/32"] } },
      opener: { open: () => assert.fail("no stream") },
      up: () => true,
      bindHost: "app.example.com",
      port: 0,
      httpPolicy: { basicAuth: [] },
      log,
    });
    const refused = route.enter("192.0.2.5:4000");
    assert.equal(refused.ok, false);
    assert.equal(!refused.ok && refused.reason, "policy_address");
    assert.equal(route.enter("192.0.2.6:4000").ok, true);
    const gate = route.gate;
    assert.ok(gate?.guards);
    // The same HTTP rules keep the gate (and what it verified); other rules make a new one.
    route.update({ ...CLAIM, policy: { deny: ["192.0.2.6/32"] } }, { basicAuth: [] });
    assert.equal(route.gate, gate);
    assert.equal(route.enter("192.0.2.5:4000").ok, true);
    assert.equal(route.enter("192.0.2.6:4000").ok, false);
    route.update(CLAIM, { requestHeaders: { set: { "x-a": "1" } } });
    assert.notEqual(route.gate, gate);
    assert.equal(route.gate?.guards, false);
    route.update(CLAIM, undefined);
    assert.equal(route.gate, undefined);
    assert.equal(route.enter("192.0.2.6:4000").ok, true);
  });

  it("is chosen after this node's own routes, as a hop to another node", () => {
    const relay = new RelayRoute({
      claim: CLAIM,
      opener: { open: () => assert.fail("not opened") },
      up: () => true,
      bindHost: "127.0.0.1",
      port: 20124,
      log,
    });
    const own = { local: true, healthy: true, active: 9 };
    assert.equal(chooseRoute([relay, own], "least_connections", 0), own);
    assert.equal(chooseRoute([relay, { ...own, healthy: false }], "round_robin", 0), relay);
  });
});
