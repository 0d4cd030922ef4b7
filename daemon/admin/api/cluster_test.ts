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
    assert.deepEqual(shown.counts, { nodes: 3, ports: 1, routes: 1, relays: 0 });
    assert.equal(shown.nextCursor, null);
    // Health answers without `ha` (nodes of an older version): every node's sessions were asked.
    assert.deepEqual(cluster.asked.map((q) => q.kind).sort(), ["health", "sessions"]);
  });

  it("finds degraded --ha clients in the health answers alone, and shows health without them", async () => {
    const cluster = fakeCluster({
      answers: {
        health: {
          answers: [
            { node: "n1", data: { state: "running", ha: [{ client: "ha", wanted: 3 }] } },
            { node: "n2", data: { state: "running", ha: [{ client: "ha", wanted: 3 }] } },
            // Malformed entries (another version, a bug) are passed over, not trusted.
            { node: "n3", data: { state: "running", ha: [null, { client: 7 }, { client: "x" }] } },
          ],
          missing: [],
        },
      },
      view: {
        nodes: ["n1", "n2", "n3"].map((node) => ({
          node,
          advertise: `${node}:7090`,
          version: "9.9.9",
          startedAt: 0,
          at: 0,
          sessions: 1,
          tunnels: 0,
        })),
      },
    });
    const { body } = await call(served(clusterApi({ cluster })), "/v1/cluster");
    assert.deepEqual(body.cluster.degraded, [{ client: "ha", wanted: 3, nodes: ["n1", "n2"] }]);
    assert.deepEqual(body.cluster.nodes[0].health, { state: "running" });
    assert.deepEqual(cluster.asked.map((q) => q.kind), ["health"]);
  });

  it("pages 2,500 routes and this node's relays in one order with one cursor, counting all", async () => {
    // 2,000 ports on n2 and n3 (one route each), and 250 ports of a group with a route on both.
    const claims = [];
    for (let port = 20_000; port < 22_000; port++) {
      claims.push({ node: port % 2 ? "n3" : "n2", tunnel: `t-${port.toString(16)}`, port });
    }
    for (let port = 30_000; port < 30_250; port++) {
      for (const node of ["n3", "n2"]) {
        claims.push({ node, tunnel: `t-${port.toString(16)}`, port });
      }
    }
    const routes = claims.map((c) => ({ ...c, session: "s1", client: "c", bindHost: "127.0.0.1" }));
    const relays = claims.map((c) => ({
      ...c,
      bound: true,
      connections: 0,
      bytesToOwner: 0,
      bytesFromOwner: 0,
    })).reverse();
    const cluster = fakeCluster({ claims: routes, view: { relays } });
    const app = served(clusterApi({ cluster }));
    const seenPorts: string[] = [], seenRelays: string[] = [];
    let cursor: string | null = null;
    let pages = 0;
    do {
      const query: string = cursor
        ? `?limit=1000&cursor=${encodeURIComponent(cursor)}`
        : "?limit=1000";
      const { status, body } = await call(app, `/v1/cluster${query}`);
      assert.equal(status, 200);
      const shown = body.cluster;
      assert.deepEqual(shown.counts, { nodes: 0, ports: 2250, routes: 2500, relays: 2500 });
      assert.ok(shown.ports.length <= 1000);
      type Key = { port: number; node: string; tunnel: string };
      seenPorts.push(...shown.ports.map((r: Key) => `${r.port}/${r.node}/${r.tunnel}`));
      seenRelays.push(...shown.relays.map((r: Key) => `${r.port}/${r.node}/${r.tunnel}`));
      cursor = shown.nextCursor;
      pages++;
    } while (cursor !== null && pages < 10);
    assert.equal(pages, 3);
    assert.equal(new Set(seenPorts).size, 2500);
    // Every relay once, in the same order as the routes.
    assert.deepEqual(seenRelays, seenPorts);
    assert.equal(seenPorts[2000], "30000/n2/t-7530", "a port's routes by node");
    assert.equal(seenPorts[2001], "30000/n3/t-7530");
    // The default page is 100.
    const first = await call(app, "/v1/cluster");
    assert.equal(first.body.cluster.ports.length, 100);
    assert.equal(first.body.cluster.nextCursor, "20099/n3/t-4e83");
  });

  it("refuses a bad limit or cursor with a 400 naming it", async () => {
    const app = served(clusterApi({ cluster: fakeCluster() }));
    for (
      const query of ["limit=0", "limit=1001", "limit=ten", "cursor=9000", "cursor=70000/n1/t-1"]
    ) {
      const { status, body } = await call(app, `/v1/cluster?${query}`);
      assert.equal(status, 400, query);
      assert.match(JSON.stringify(body), /limit|cursor/, query);
    }
  });
});
