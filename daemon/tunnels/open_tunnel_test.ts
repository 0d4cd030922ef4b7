// openTunnel with the in-memory registry and real loopback ports: a port is claimed before it is
// bound and its claim released when binding fails. Fixed ports are taken from 20000-32767 where
// they can be bound now; the client's allowed ports are such a range.
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { connect, createServer, type Server } from "node:net";
import { Session } from "../../protocol/session.ts";
import { memoryPair } from "../../transport/memory.ts";
import { waitFor } from "../../testing/wait.ts";
import { Logger } from "../../util/log.ts";
import { type ClientConfig, validateConfig } from "../config/mod.ts";
import { LocalRegistry } from "../registry/local_registry.ts";
import type { ClaimResult, PortClaim, Registry, RegistryChange } from "../registry/registry.ts";
import type { TokenRegistry } from "../tokens/store.ts";
import { openTunnel, type OpenTunnelOptions } from "./open_tunnel.ts";
import { TunnelPorts } from "./tunnel_ports.ts";

const log = new Logger({ level: "error", format: "json", sink: () => {} });
const QUIET = { enableKeepAlive: false };
/** The registry does not look into tokens here; a stand-in that is never called. */
const NO_TOKENS = {} as TokenRegistry;
const HOST = "127.0.0.1";

/** Whether `HOST:port` can be bound now (nobody listens on it). */
function canBind(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = createServer();
    server.once("error", () => resolve(false));
    server.listen(port, HOST, () => server.close(() => resolve(true)));
  });
}

/** `count` consecutive ports of 20000-32767 that can all be bound now. */
async function freeRange(count: number): Promise<number[]> {
  for (let attempt = 0; attempt < 100; attempt++) {
    const from = 20_000 + Math.floor(Math.random() * (12_768 - count));
    const range = Array.from({ length: count }, (_, i) => from + i);
    if ((await Promise.all(range.map((p) => canBind(p)))).every(Boolean)) return range;
  }
  throw new Error(`no ${count} free ports in 20000-32767`);
}

/** A foreign listener on `port` (someone else's service on this host). */
function hold(port: number): Promise<Server> {
  return new Promise((resolve, reject) => {
    const server = createServer((socket) => socket.destroy());
    server.once("error", reject);
    server.listen(port, HOST, () => resolve(server));
  });
}

/** Client `name` as configured, allowed the ports `from`-`to` and any of them (0). */
function clientConfig(name: string, from: number, to: number): ClientConfig {
  const result = validateConfig({
    listen: { admin: null },
    clients: [{
      name,
      token: `open-tunnel-test-token-${name}-0123456789`,
      expose: { ports: [`${from}-${to}`, 0], bindHosts: [HOST, "192.0.2.1"] },
    }],
  });
  assert.deepEqual(result.errors, []);
  return result.config!.clients[0];
}

/** A node: its registry (with the changes it reported), its ports, and a client session. */
function setup(registry: Registry = new LocalRegistry({ node: "n1", tokens: NO_TOKENS })) {
  const [daemonEnd, clientEnd] = memoryPair();
  const streams: number[] = [];
  const client = new Session(clientEnd, {
    client: true,
    config: QUIET,
    onStream: (stream) => streams.push(stream.id),
  });
  const session = new Session(daemonEnd, { client: false, config: QUIET });
  const ports = new TunnelPorts(log);
  const changes: string[] = [];
  registry.watch((change: RegistryChange) => {
    if (change.kind === "port") changes.push(`${change.op} ${change.claim.port}`);
  });
  const options = (more: Partial<OpenTunnelOptions> = {}): OpenTunnelOptions => ({
    client: "alice",
    session,
    sessionId: "s1",
    log,
    registry,
    ports,
    ...more,
  });
  const close = () => {
    for (const listener of ports.listeners()) listener.close();
    session.close();
    client.close();
  };
  return { registry, ports, options, streams, changes, close };
}

/** A claim of `port` by another client's tunnel. */
function othersClaim(port: number, more: Partial<PortClaim> = {}): PortClaim {
  return {
    bindHost: HOST,
    port,
    tunnel: "t-bob",
    session: "s9",
    client: "bob",
    node: "n1",
    ...more,
  };
}

describe("openTunnel", () => {
  it("binds the port asked for, keeps it claimed for the tunnel, and sends its visitors to the client", async () => {
    const node = setup();
    const [port] = await freeRange(1);
    const alice = clientConfig("alice", port, port);
    try {
      const result = await openTunnel(alice, HOST, port, node.options({ label: "web" }));
      assert.ok(result.ok);
      const { tunnel } = result;
      assert.equal(tunnel.port, port);
      assert.equal(tunnel.bindHost, HOST);
      assert.equal(tunnel.owner, "client:alice");
      assert.equal(tunnel.label, "web");
      assert.match(tunnel.id, /^t-[0-9a-f]{12}$/);
      const holder = await node.registry.portHolder(HOST, port);
      assert.deepEqual(
        [holder?.tunnel, holder?.session, holder?.client, holder?.node, holder?.shared],
        [tunnel.id, "s1", "alice", "n1", false],
      );
      assert.deepEqual(node.ports.listener(HOST, port)?.routes, [tunnel]);
      const visitor = connect(port, HOST);
      visitor.on("error", () => {});
      await waitFor(() => node.streams.length === 1, "the visitor's stream at the client");
      visitor.destroy();
    } finally {
      node.close();
    }
  });

  it("for port 0, takes an allowed port that is neither claimed nor bound by anyone else", async () => {
    const node = setup();
    const range = await freeRange(8);
    const alice = clientConfig("alice", range[0], range[7]);
    const free = range[5];
    const claimedByBob = [range[0], range[2], range[4], range[6]];
    const boundByOthers = await Promise.all([range[1], range[3], range[7]].map(hold));
    try {
      for (const port of claimedByBob) {
        assert.ok((await node.registry.claimPort(othersClaim(port, { tunnel: `t-${port}` }))).ok);
      }
      const result = await openTunnel(alice, HOST, 0, node.options());
      assert.ok(result.ok);
      assert.equal(result.tunnel.port, free);
      assert.equal((await node.registry.portHolder(HOST, free))?.tunnel, result.tunnel.id);
      for (const port of claimedByBob) {
        assert.equal((await node.registry.portHolder(HOST, port))?.client, "bob");
      }
      for (const server of boundByOthers) {
        const port = (server.address() as { port: number }).port;
        assert.equal(await node.registry.portHolder(HOST, port), undefined, `${port} released`);
      }
    } finally {
      for (const server of boundByOthers) server.close();
      node.close();
    }
  });

  it("refuses a port another tunnel holds in the registry as port_in_use, leaving its claim", async () => {
    const node = setup();
    const [port] = await freeRange(1);
    const alice = clientConfig("alice", port, port);
    try {
      assert.ok((await node.registry.claimPort(othersClaim(port))).ok);
      const result = await openTunnel(alice, HOST, port, node.options());
      assert.equal(result.ok, false);
      assert.equal(!result.ok && result.code, "port_in_use");
      assert.equal(!result.ok && result.message, `port ${port} on ${HOST} is in use`);
      assert.equal((await node.registry.portHolder(HOST, port))?.tunnel, "t-bob");
      assert.equal(node.ports.listener(HOST, port), undefined);
      assert.equal(await canBind(port), true);
    } finally {
      node.close();
    }
  });

  it("releases its claim when the port is bound by another program", async () => {
    const node = setup();
    const [port] = await freeRange(1);
    const alice = clientConfig("alice", port, port);
    const foreign = await hold(port);
    try {
      const result = await openTunnel(alice, HOST, port, node.options());
      assert.equal(!result.ok && result.code, "port_in_use");
      assert.equal(await node.registry.portHolder(HOST, port), undefined);
      assert.deepEqual(node.changes, [`claimed ${port}`, `released ${port}`]);
    } finally {
      foreign.close();
      node.close();
    }
  });

  it("says how many ports it tried when every allowed port is in use", async () => {
    const node = setup();
    const range = await freeRange(2);
    const alice = clientConfig("alice", range[0], range[1]);
    try {
      for (const port of range) {
        await node.registry.claimPort(othersClaim(port, { tunnel: `t-${port}` }));
      }
      const result = await openTunnel(alice, HOST, 0, node.options());
      assert.equal(!result.ok && result.code, "port_in_use");
      assert.equal(!result.ok && result.message, `every port tried (2) on ${HOST} is in use`);
    } finally {
      node.close();
    }
  });

  it("refuses an address this host cannot bind as not_allowed at once, releasing its claim", async () => {
    const node = setup();
    const range = await freeRange(4);
    const alice = clientConfig("alice", range[0], range[3]);
    try {
      // TEST-NET-1: no interface of this host has it, so no other port would bind either.
      const result = await openTunnel(alice, "192.0.2.1", 0, node.options());
      assert.equal(!result.ok && result.code, "not_allowed");
      assert.match(!result.ok ? result.message : "", /^cannot listen on 192\.0\.2\.1: /);
      assert.equal(node.changes.length, 2, "one port tried");
      const [claimed, released] = node.changes;
      assert.equal(claimed.replace("claimed", "released"), released);
    } finally {
      node.close();
    }
  });

  it("tries the port another route of its owner took at the same instant, when told to join it", async () => {
    const range = await freeRange(7);
    // Outside the client's own picks: only the join leads there.
    const joinPort = range[6];
    /** A cluster registry's answer when a member on another node named a port a moment ago. */
    class Racing extends LocalRegistry {
      told = false;
      override claimPort(claim: PortClaim): Promise<ClaimResult> {
        if (this.told || claim.port === joinPort) return super.claimPort(claim);
        this.told = true;
        return Promise.resolve({ ok: false, reason: "taken", join: joinPort });
      }
    }
    const node = setup(new Racing({ node: "n1", tokens: NO_TOKENS }));
    const alice = clientConfig("alice", range[0], range[5]);
    try {
      const result = await openTunnel(
        alice,
        HOST,
        0,
        node.options({ owner: "group:web", shared: true }),
      );
      assert.ok(result.ok);
      assert.equal(result.tunnel.port, joinPort);
    } finally {
      node.close();
    }
  });

  it("joins the port its owner holds when a shared tunnel asks for any port", async () => {
    const node = setup();
    const range = await freeRange(8);
    const alice = clientConfig("alice", range[0], range[7]);
    const bob = clientConfig("bob", range[0], range[7]);
    const group = { owner: "group:web", shared: true, balance: "least_connections" } as const;
    try {
      const first = await openTunnel(alice, HOST, 0, node.options(group));
      assert.ok(first.ok);
      const second = await openTunnel(
        bob,
        HOST,
        0,
        node.options({ ...group, client: "bob", sessionId: "s2" }),
      );
      assert.ok(second.ok);
      assert.equal(second.tunnel.port, first.tunnel.port);
      assert.equal(second.tunnel.owner, "group:web");
      const listener = node.ports.listener(HOST, first.tunnel.port);
      assert.deepEqual(listener?.routes, [first.tunnel, second.tunnel]);
      assert.equal(listener?.balance, "least_connections");
      assert.deepEqual(node.changes, [
        `claimed ${first.tunnel.port}`,
        `claimed ${first.tunnel.port}`,
      ]);
      // A tunnel of another owner asking for any port gets another one.
      const other = await openTunnel(alice, HOST, 0, node.options());
      assert.ok(other.ok);
      assert.notEqual(other.tunnel.port, first.tunnel.port);
    } finally {
      node.close();
    }
  });

  it("says so when the port its owner holds in the cluster is bound here by another program", async () => {
    const node = setup();
    const [port] = await freeRange(1);
    const alice = clientConfig("alice", port, port);
    // The group's port, held by a member on another node; here a foreign program has it.
    const claim = othersClaim(port, { node: "n2", owner: "group:web", shared: true });
    assert.ok((await node.registry.claimPort(claim)).ok);
    const foreign = await hold(port);
    try {
      const result = await openTunnel(
        alice,
        HOST,
        0,
        node.options({ owner: "group:web", shared: true }),
      );
      assert.equal(!result.ok && result.code, "port_in_use");
      assert.equal(
        !result.ok && result.message,
        `port ${port} (held by group:web in the cluster) is in use on ${HOST} on this node`,
      );
      assert.equal((await node.registry.portHolder(HOST, port))?.node, "n2", "the member's kept");
    } finally {
      foreign.close();
      node.close();
    }
  });

  it("refuses as unavailable when the registry cannot be reached, binding nothing", async () => {
    /** A registry whose shared store is out of reach (a cluster's NATS, away). */
    class Unreachable extends LocalRegistry {
      override claimPort(): Promise<ClaimResult> {
        return Promise.resolve({ ok: false, reason: "unavailable" });
      }
    }
    const node = setup(new Unreachable({ node: "n1", tokens: NO_TOKENS }));
    const [port] = await freeRange(1);
    try {
      const result = await openTunnel(
        clientConfig("alice", port, port),
        HOST,
        port,
        node.options(),
      );
      assert.equal(!result.ok && result.code, "unavailable");
      assert.deepEqual(node.ports.listeners(), []);
    } finally {
      node.close();
    }
  });
});
