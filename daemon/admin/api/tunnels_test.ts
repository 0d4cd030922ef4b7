// Tunnel endpoints and drain over real HTTP: reverse tunnels and services listed with counters that
// move, an operator closing a tunnel, and a drain that turns /readyz to 503 and sends GoAway.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { errorCode, type Fixture, startFixture } from "../_admin_fixture.ts";
import { tcpExchange } from "../../../transport/_test_util.ts";
import { waitFor } from "../../../testing/wait.ts";

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
