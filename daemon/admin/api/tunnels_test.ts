// Tunnel endpoints, first over small fakes (app.request on the sub-app: listings, a tunnel's
// routes on one node and in a cluster, certificates, closes here and on other nodes, and every
// error code), then over real HTTP: reverse tunnels and services listed with counters that move,
// an operator closing a tunnel, and a drain that turns /readyz to 503 and sends GoAway.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { errorCode, type Fixture, startFixture } from "../_admin_fixture.ts";
import { tcpExchange } from "../../../transport/_test_util.ts";
import { waitFor } from "../../../testing/wait.ts";
import { fakeSession, fakeTunnel, memoryRegistry } from "../../registry/_fake_handles.ts";
import type { PortClaim } from "../../registry/registry.ts";
import {
  assertError,
  call,
  fakeCertificates,
  type FakeCluster,
  fakeCluster,
  served,
  servedCertificate,
} from "./_fake_deps.ts";
import { tunnelsApi } from "./tunnels.ts";

/** The tunnel endpoints over an in-memory registry (node n1), and a certificate for a.test. */
function tunnelsOver(cluster?: FakeCluster) {
  const registry = memoryRegistry("n1");
  const certificates = fakeCertificates([servedCertificate(["a.test"], Date.UTC(2030, 0, 1))]);
  return { registry, app: served(tunnelsApi({ registry, cluster, certificates })) };
}

/** A port claim of `tunnel` on 127.0.0.1:9000. */
function claimOf(node: string, tunnel: string, session: string): PortClaim {
  return { node, tunnel, session, client: "alice", bindHost: "127.0.0.1", port: 9000 };
}

describe("tunnel endpoints (over fakes)", () => {
  it("lists this node's tunnels oldest first, and the services", async () => {
    const { registry, app } = tunnelsOver();
    registry.addSession(fakeSession("s1", { tunnels: ["t-1", "t-2"] }));
    registry.addTunnel(fakeTunnel("t-2", { createdAt: 2, host: "a.test", port: 443 }), "s1");
    registry.addTunnel(fakeTunnel("t-1", { createdAt: 1 }), "s1");
    await registry.offerService({
      name: "box",
      client: "alice",
      session: "s1",
      node: "n1",
      healthy: true,
      stats: { connections: 2, active: 1, aToB: 10, bToA: 20 },
      yamux: { open: () => assert.fail("nothing connects") },
    });
    const { status, body } = await call(app, "/v1/tunnels");
    assert.equal(status, 200);
    assert.deepEqual(body.tunnels.map((t: { id: string }) => t.id), ["t-1", "t-2"]);
    assert.equal(body.tunnels[0].session, "s1");
    assert.equal(body.tunnels[0].certificate, null);
    assert.deepEqual(body.tunnels[1].certificate.names, ["a.test"], "its name's certificate");
    assert.deepEqual(body.services, [{
      name: "box",
      client: "alice",
      session: "s1",
      node: "n1",
      owner: "client:alice",
      healthy: true,
      connections: 2,
      active: 1,
      bytesToOfferer: 10,
      bytesFromOfferer: 20,
    }]);
    assert.equal(body.missing, undefined, "a node's own listing names nobody missing");
  });

  it("lists every node's tunnels with scope=cluster; 400 for another scope or no cluster", async () => {
    const cluster = fakeCluster({
      answers: { tunnels: { answers: [{ node: "n2", data: [{ id: "t-9" }] }], missing: [] } },
    });
    const { app } = tunnelsOver(cluster);
    const { body } = await call(app, "/v1/tunnels?scope=cluster");
    assert.deepEqual(body, { tunnels: [{ node: "n2", id: "t-9" }], services: [], missing: [] });
    await assertError(app, "/v1/tunnels?scope=nodes", 400, "bad_request");
    await assertError(tunnelsOver().app, "/v1/tunnels?scope=cluster", 400, "bad_request");
  });

  it("shows each tunnel's visitor policy in force, and no secret of it", async () => {
    const { registry, app } = tunnelsOver();
    registry.addSession(fakeSession("s1"));
    const policy = {
      allow: ["203.0.113.0/24"],
      connectionsPerVisitor: 3,
      bandwidth: { in: 1024 },
      http: { oidc: { issuer: "https://idp.test", clientId: "c", clientSecret: "hush" } },
    };
    registry.addTunnel(fakeTunnel("t-1", { policy }), "s1");
    registry.addTunnel(fakeTunnel("t-2", { createdAt: 1 }), "s1");
    const listed = await call(app, "/v1/tunnels");
    const byId = new Map(listed.body.tunnels.map((t: { id: string }) => [t.id, t]));
    const shown = (byId.get("t-1") as { policy: typeof policy }).policy;
    assert.deepEqual(shown.allow, ["203.0.113.0/24"]);
    assert.equal(shown.connectionsPerVisitor, 3);
    assert.deepEqual(shown.bandwidth, { in: 1024 });
    assert.equal(shown.http.oidc.clientSecret, "(set)");
    assert.doesNotMatch(JSON.stringify(listed.body), /hush/);
    assert.deepEqual((byId.get("t-2") as { policy: unknown }).policy, {});
    const one = await call(app, "/v1/tunnels/t-1");
    assert.deepEqual(one.body.policy.allow, ["203.0.113.0/24"]);
  });

  it("shows a tunnel with the routes of its port on a single node", async () => {
    const { registry, app } = tunnelsOver();
    registry.addSession(fakeSession("s1"));
    registry.addTunnel(fakeTunnel("t-1", { owner: "group:g", createdAt: 1 }), "s1");
    const sibling = fakeTunnel("t-2", { client: "bob", owner: "group:g", reportedHealthy: false });
    registry.addTunnel(sibling, "s9"); // its session gone
    registry.addTunnel(fakeTunnel("t-3", { port: 9001 }), "s1"); // another port
    const { status, body } = await call(app, "/v1/tunnels/t-1");
    assert.equal(status, 200);
    assert.equal(body.id, "t-1");
    assert.equal(body.owner, "group:g");
    assert.deepEqual(body.routes, [
      { node: "n1", client: "alice", session: "s1", tunnel: "t-1", healthy: true },
      { node: "n1", client: "bob", session: null, tunnel: "t-2", healthy: false },
    ]);
  });

  it("shows a group's UDP members as the routes of their UDP port, not the TCP port's", async () => {
    const { registry, app } = tunnelsOver();
    registry.addSession(fakeSession("s1"));
    const udp = (id: string, client: string) => ({
      ...fakeTunnel(id, { client, owner: "group:dns", createdAt: 1 }),
      protocol: "udp" as const,
    });
    registry.addTunnel(udp("t-1", "alice"), "s1");
    registry.addTunnel(udp("t-2", "bob"), "s9");
    registry.addTunnel(fakeTunnel("t-3", { owner: "group:dns" }), "s1"); // TCP, same number
    const { body } = await call(app, "/v1/tunnels/t-1");
    assert.equal(body.protocol, "udp");
    assert.equal(body.owner, "group:dns");
    assert.deepEqual(body.routes, [
      { node: "n1", client: "alice", session: "s1", tunnel: "t-1", healthy: true },
      { node: "n1", client: "bob", session: null, tunnel: "t-2", healthy: true },
    ]);
    const tcp = await call(app, "/v1/tunnels/t-3");
    assert.deepEqual(tcp.body.routes.map((r: { tunnel: string }) => r.tunnel), ["t-3"]);
  });

  it("shows a tunnel with the routes of its port from the cluster's claims", async () => {
    const cluster = fakeCluster({
      claims: [
        claimOf("n1", "t-1", "s1"),
        claimOf("n2", "t-7", "s5"),
        { ...claimOf("n2", "t-8", "s6"), port: 9001 },
      ],
      routeHealthy: (_port, node, tunnel) => !(node === "n2" && tunnel === "t-7"),
    });
    const { registry, app } = tunnelsOver(cluster);
    registry.addSession(fakeSession("s1"));
    registry.addTunnel(fakeTunnel("t-1", { reportedHealthy: false }), "s1");
    const { body } = await call(app, "/v1/tunnels/t-1");
    assert.deepEqual(body.routes, [
      // This node's route: as its tunnel says; another node's: as its record says.
      { node: "n1", client: "alice", session: "s1", tunnel: "t-1", healthy: false },
      { node: "n2", client: "alice", session: "s5", tunnel: "t-7", healthy: false },
    ]);
  });

  it("answers 400 for a malformed tunnel id and 404 for one not on this node", async () => {
    const { app } = tunnelsOver(fakeCluster());
    await assertError(app, "/v1/tunnels/T-1", 400, "bad_request");
    const message = await assertError(app, "/v1/tunnels/t-1", 404, "not_found");
    assert.match(message, /on this node/);
  });

  it("lists the HTTPS port's certificates without their keys", async () => {
    const { app } = tunnelsOver();
    const { status, body } = await call(app, "/v1/certificates");
    assert.equal(status, 200);
    assert.deepEqual(body, {
      certificates: [{
        names: ["a.test"],
        notBefore: "1970-01-01T00:00:00.000Z",
        notAfter: "2030-01-01T00:00:00.000Z",
        source: "file",
      }],
    });
  });

  it("closes a tunnel of this node through its session (204); 404 when nobody has it", async () => {
    const { registry, app } = tunnelsOver();
    const session = fakeSession("s1", { tunnels: ["t-1"] });
    registry.addSession(session);
    registry.addTunnel(fakeTunnel("t-1"), "s1");
    const closed = await call(app, "/v1/tunnels/t-1", { method: "DELETE" });
    assert.equal(closed.status, 204);
    assert.deepEqual(session.calls, ["closeTunnel t-1 closed by an operator"]);
    await assertError(app, "/v1/tunnels/t-2", 404, "not_found", { method: "DELETE" });
    await assertError(app, "/v1/tunnels/x", 400, "bad_request", { method: "DELETE" });
  });

  it("closes a tunnel held on another node through the cluster; 404 naming silent nodes", async () => {
    const cluster = fakeCluster({
      answers: {
        "close-tunnel": ({ data }) => ({
          answers: [{ node: "n2", data: { found: (data as { id: string }).id === "t-7" } }],
          missing: ["n3"],
        }),
      },
    });
    const { app } = tunnelsOver(cluster);
    const closed = await call(app, "/v1/tunnels/t-7", { method: "DELETE" });
    assert.equal(closed.status, 204);
    assert.deepEqual(cluster.asked, [{ kind: "close-tunnel", data: { id: "t-7" } }]);
    const message = await assertError(app, "/v1/tunnels/t-8", 404, "not_found", {
      method: "DELETE",
    });
    assert.match(message, /no answer from n3/);
  });
});

interface TunnelJson {
  id: string;
  client: string;
  session: string | null;
  bind: string;
  label: string | null;
  connections: number;
  active: number;
  bytesFromVisitors: number;
  bytesToVisitors: number;
  errors: number;
}

interface ListJson {
  tunnels: TunnelJson[];
  services: { name: string; client: string; session: string }[];
}

describe("admin API: tunnels", () => {
  let f: Fixture;
  before(async () => f = await startFixture());
  after(() => f.stop());

  const list = async (): Promise<ListJson> => {
    const response = await f.api("/v1/tunnels");
    assert.equal(response.status, 200);
    return await response.json() as ListJson;
  };

  it("lists tunnels and services with counters, and closes a tunnel on DELETE", async () => {
    const client = await f.client();
    const session = f.sessionId(client);
    const tunnel = await client.expose({ local: `127.0.0.1:${f.echo.port}`, label: "web" });
    await client.offer("box", `127.0.0.1:${f.echo.port}`);
    const before = (await list()).tunnels.find((t) => t.id === tunnel.id)!;
    assert.deepEqual(
      { ...before, bytesFromVisitors: 0, bytesToVisitors: 0 },
      {
        ...before,
        client: "alice",
        session,
        bind: `127.0.0.1:${tunnel.remotePort}`,
        label: "web",
        connections: 0,
        active: 0,
        errors: 0,
        bytesFromVisitors: 0,
        bytesToVisitors: 0,
      },
    );
    const payload = new Uint8Array(3000).fill(7);
    assert.deepEqual(await tcpExchange(tunnel.remotePort, payload), payload);
    await waitFor(async () => {
      const t = (await list()).tunnels.find((t) => t.id === tunnel.id)!;
      return t.connections === 1 && t.bytesFromVisitors === 3000 && t.bytesToVisitors === 3000;
    }, "the tunnel counters to move");
    const services = (await list()).services;
    assert.deepEqual(services.map((s) => [s.name, s.client, s.session]), [[
      "box",
      "alice",
      session,
    ]]);

    const closedNotice = new Promise<string>((resolve) =>
      client.on("error", (error) => error.code === "tunnel_closed" && resolve(error.message))
    );
    const deleted = await f.api(`/v1/tunnels/${tunnel.id}`, { method: "DELETE" });
    assert.equal(deleted.status, 204);
    assert.match(await closedNotice, /closed by an operator/);
    assert.equal(f.daemon.registry.tunnel(tunnel.id) !== undefined, false);
    assert.equal((await list()).tunnels.some((t) => t.id === tunnel.id), false);
    const refused = await tcpExchange(tunnel.remotePort, payload).then(
      () => "connected",
      () => "refused",
    );
    assert.equal(refused, "refused");
    const again = await f.api(`/v1/tunnels/${tunnel.id}`, { method: "DELETE" });
    assert.equal(again.status, 404);
    assert.equal(await errorCode(again), "not_found");
    await client.close();
  });
});

describe("admin API: drain", () => {
  let f: Fixture;
  before(async () => f = await startFixture());
  after(() => f.stop());

  it("drains: 202, /readyz 503, clients get GoAway, a second drain 409, /healthz stays 200", async () => {
    const client = await f.client();
    const session = client.session!;
    // A stream in flight keeps the session open through the drain, so the GoAway is seen before
    // the daemon closes the session (an idle session is closed at once).
    const busy = client.echo();
    const echoed = new Promise<void>((resolve) => busy.onData = () => resolve());
    busy.write(new Uint8Array(100));
    await echoed;
    assert.equal((await f.api("/readyz")).status, 200);
    const response = await f.api("/v1/drain", {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ graceMs: 10_000 }),
    });
    assert.equal(response.status, 202);
    assert.deepEqual(await response.json(), { state: "draining", graceMs: 10_000 });
    const ready = await fetch(f.admin.url + "/readyz");
    assert.equal(ready.status, 503);
    assert.equal(await errorCode(ready), "not_ready");
    await waitFor(() => session.remoteGoAway, "the client to get GoAway");
    assert.equal(session.stats.framesIn.goAway, 1);
    assert.throws(() => client.echo(), "no new streams after GoAway");
    busy.end();
    await session.closed;
    const second = await f.api("/v1/drain", { method: "POST" });
    assert.equal(second.status, 409);
    assert.equal(await errorCode(second), "conflict");
    const health = await fetch(f.admin.url + "/healthz");
    assert.equal(health.status, 200);
    assert.deepEqual(await health.json(), { status: "ok" });
    await waitFor(() => f.daemon.state === "stopped", "the drain to finish");
    assert.equal((await fetch(f.admin.url + "/readyz")).status, 503);
  });
});
