// GET /v1/cluster over a stand-in for the cluster (app.request on the sub-app, no NATS): the
// node list with each node's health, who did not answer, HA clients running short of nodes, and
// the port claims; and a daemon outside any cluster.
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { call, fakeCluster, served } from "./_fake_deps.ts";
import { clusterApi } from "./cluster.ts";

describe("cluster endpoint (over fakes)", () => {
  it("answers cluster: null on a daemon outside any cluster", async () => {
    const { status, body } = await call(served(clusterApi({})), "/v1/cluster");
    assert.deepEqual([status, body], [200, { cluster: null }]);
  });

  it("shows every node with its health, the silent ones, degraded HA clients and the ports", async () => {
    const node = (name: string) => ({
      node: name,
      run: "r",
      advertise: `${name}:7090`,
      version: "9.9.9",
      startedAt: Date.UTC(2020, 0, 1),
      at: Date.UTC(2020, 0, 2),
      sessions: 1,
      tunnels: 0,
    });
    const claim = {
      node: "n2",
      tunnel: "t-1",
      session: "s1",
      client: "alice",
      bindHost: "127.0.0.1",
      port: 9000,
    };
    const peer = { node: "n2", connected: true, streamsOut: 1, streamsIn: 2, rtt: 3 };
    const cluster = fakeCluster({
      view: { nodes: [node("n1"), node("n2"), node("n3")], peers: [peer], relays: [] },
      claims: [claim],
      answers: {
        health: {
          answers: [{ node: "n1", data: { state: "running" } }, {
            node: "n2",
            data: { state: "draining" },
          }],
          missing: ["n3"],
        },
        sessions: {
          answers: [
            { node: "n1", data: [{ client: "ha", ha: 3 }, { client: "solo" }] },
            { node: "n2", data: [{ client: "ha", ha: 3 }, { client: "both", ha: 2 }] },
            { node: "n3", data: [{ client: "both", ha: 2 }] },
          ],
          missing: [],
        },
      },
    });
    const { status, body } = await call(served(clusterApi({ cluster })), "/v1/cluster");
    assert.equal(status, 200);
    const shown = body.cluster;
    assert.equal(shown.node, "n1");
    assert.deepEqual(shown.nats, { state: "connected", server: "nats://127.0.0.1:4222" });
    assert.deepEqual(shown.nodes[0], {
      node: "n1",
      advertise: "n1:7090",
      version: "9.9.9",
      startedAt: "2020-01-01T00:00:00.000Z",
      lastHeartbeat: "2020-01-02T00:00:00.000Z",
      sessions: 1,
      tunnels: 0,
      health: { state: "running" },
    });
    assert.deepEqual(shown.nodes.map((n: { health: unknown }) => n.health), [
      { state: "running" },
      { state: "draining" },
      null,
    ]);
    assert.deepEqual(shown.missing, ["n3"]);
    // "ha" wants 3 nodes and has 2; "both" has its 2; "solo" asked for none.
    assert.deepEqual(shown.degraded, [{ client: "ha", wanted: 3, nodes: ["n1", "n2"] }]);
    assert.deepEqual(shown.peers, [peer]);
    assert.deepEqual(shown.relays, []);
    assert.deepEqual(shown.ports, [claim]);
    assert.deepEqual(cluster.asked.map((q) => q.kind).sort(), ["health", "sessions"]);
  });
});
