import { afterEach, describe, it } from "node:test";
import assert from "node:assert/strict";
import { openTunnel } from "../tunnels/open_tunnel.ts";
import { ReverseTunnel } from "../tunnels/reverse_tunnel.ts";
import { Fixture } from "./_handler_fixture.ts";

let f: Fixture;

/** A port tunnel of alice on a free port among her allowed ones, claimed and bound. */
async function portTunnel(): Promise<ReverseTunnel> {
  const { context } = f;
  const opened = await openTunnel(f.client, "127.0.0.1", 0, {
    client: "alice",
    session: context.yamux,
    sessionId: context.sessionId,
    log: context.log,
    registry: f.registry,
    ports: f.ports,
  });
  assert.ok(opened.ok);
  return opened.tunnel;
}

/** A tunnel of alice holding `host`, claimed. */
async function hostTunnel(host: string): Promise<ReverseTunnel> {
  const tunnel = new ReverseTunnel({
    id: `t-${host}`,
    client: "alice",
    session: f.context.yamux,
    bindHost: host,
    port: 8080,
    host,
    log: f.context.log,
  });
  assert.ok((await f.registry.claimHost(f.tunnels.hostClaim(tunnel), tunnel)).ok);
  return tunnel;
}

describe("SessionTunnels", () => {
  afterEach(() => f.close());

  it("lists an added tunnel here and in the registry, under the session, and says it is up", async () => {
    f = new Fixture();
    const tunnel = await portTunnel();
    f.tunnels.add(tunnel, `127.0.0.1:${tunnel.port}`);
    assert.deepEqual(f.events, [{
      type: "tunnel_up",
      fields: {
        tunnel: tunnel.id,
        client: "alice",
        session: f.context.sessionId,
        bind: `127.0.0.1:${tunnel.port}`,
      },
    }]);
    assert.equal(f.tunnels.size, 1);
    assert.equal(f.tunnels.get(tunnel.id), tunnel);
    assert.deepEqual(f.tunnels.ids(), [tunnel.id]);
    assert.equal(f.registry.tunnel(tunnel.id), tunnel);
    assert.equal(f.tunnels.get("t-other"), undefined);
  });

  it("names the session and the node in the claims of a port and of a host name", async () => {
    f = new Fixture();
    const tunnel = await portTunnel();
    assert.deepEqual(f.tunnels.portClaim(tunnel), {
      bindHost: "127.0.0.1",
      port: tunnel.port,
      tunnel: tunnel.id,
      session: "s1",
      client: "alice",
      node: "n1",
    });
    const named = await hostTunnel("app.tunnels.example.com");
    assert.deepEqual(f.tunnels.hostClaim(named), {
      host: "app.tunnels.example.com",
      passthrough: false,
      tunnel: named.id,
      session: "s1",
      client: "alice",
      node: "n1",
    });
  });

  it("takes a port tunnel down: closed, forgotten, its port released and unbound, then told", async () => {
    f = new Fixture();
    const tunnel = await portTunnel();
    f.tunnels.add(tunnel, "test");
    f.events.length = 0; // its tunnel_up is add()'s own test
    tunnel.stats.connections = 3;
    tunnel.stats.aToB = 10;
    tunnel.stats.bToA = 20;
    tunnel.stats.errors = 1;
    await f.tunnels.remove(tunnel);
    assert.equal(tunnel.healthy, false, "closed");
    assert.equal(f.tunnels.size, 0);
    assert.equal(f.registry.tunnel(tunnel.id), undefined);
    assert.equal(await f.registry.portHolder("127.0.0.1", tunnel.port), undefined);
    assert.equal(f.ports.listener("127.0.0.1", tunnel.port), undefined);
    assert.deepEqual(f.events, [{
      type: "tunnel_down",
      fields: {
        tunnel: tunnel.id,
        client: "alice",
        session: "s1",
        connections: 3,
        bytesToClient: 10,
        bytesToVisitor: 20,
        errors: 1,
      },
    }]);
    assert.equal(f.logged("tunnel down")[0].tunnel, tunnel.id);
  });

  it("takes a tunnel by host name down, releasing its name", async () => {
    f = new Fixture();
    const tunnel = await hostTunnel("app.tunnels.example.com");
    f.tunnels.add(tunnel, "test");
    f.events.length = 0; // its tunnel_up is add()'s own test
    assert.equal(f.registry.hostRoute("app.tunnels.example.com"), tunnel);
    await f.tunnels.remove(tunnel);
    assert.equal(f.registry.hostRoute("app.tunnels.example.com"), undefined);
    assert.equal(f.registry.tunnel(tunnel.id), undefined);
    assert.deepEqual(f.events.map((e) => e.type), ["tunnel_down"]);
  });

  it("settles even when the registry fails to release", async () => {
    f = new Fixture();
    const tunnel = await portTunnel();
    f.tunnels.add(tunnel, "test");
    f.events.length = 0; // its tunnel_up is add()'s own test
    f.registry.releasePort = () => Promise.reject(new Error("registry away"));
    await f.tunnels.remove(tunnel);
    assert.equal(f.tunnels.size, 0);
  });

  it("takes every tunnel down at once when the session ends", async () => {
    f = new Fixture();
    const first = await portTunnel();
    const second = await hostTunnel("two.tunnels.example.com");
    f.tunnels.add(first, "test");
    f.events.length = 0; // its tunnel_up is add()'s own test
    f.tunnels.add(second, "test");
    f.events.length = 0; // its tunnel_up is add()'s own test
    f.tunnels.removeAll();
    assert.equal(f.tunnels.size, 0);
    assert.deepEqual(f.registry.tunnels(), []);
    assert.deepEqual(f.events.map((e) => e.fields.tunnel), [first.id, second.id]);
  });
});
