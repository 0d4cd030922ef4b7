// The cluster from outside: daemon processes joined through one real nats-server (built from the
// Go module proxy into .cache/tools), clients as processes and through the SDK, visitors as plain
// sockets. Nodes share this machine, so each binds tunnel ports on its own loopback address
// (cluster.tunnelHost 127.0.0.N) and they keep the same port numbers, as on separate hosts.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { connect as tlsConnect } from "node:tls";
import { hasOpenssl, makeTestIdentity } from "../transport/_test_certificate.ts";
import { connect as sdkConnect, connectHa, hashPassword } from "../client/mod.ts";
import {
  assertSameBytes,
  cleanup,
  daemonConfig,
  type DaemonProcess,
  newToken,
  pattern,
  sleep,
  startClient,
  startDaemon,
  startEchoServer,
  startTcpServer,
  tcpConnect,
  tcpRoundTrip,
  type TestServer,
  waitFor,
  withTimeout,
} from "../testing/mod.ts";
import { createServer } from "node:net";
import { Agent, createServer as createHttpServer, request as httpRequest } from "node:http";
import { exportJWK, generateKeyPair, SignJWT } from "jose";

/** Whether `host`:`port` can be bound now. */
function canBind(port: number, host = "127.0.0.1"): Promise<boolean> {
  return new Promise((resolve) => {
    const server = createServer();
    server.once("error", () => resolve(false));
    server.listen(port, host, () => server.close(() => resolve(true)));
  });
}

/**
 * A listener holding `host`:`port` (closing each connection), or undefined when the port is taken.
 */
function holdPort(port: number, host = "127.0.0.1"): Promise<{ close(): void } | undefined> {
  return new Promise((resolve) => {
    const server = createServer((socket) => socket.destroy());
    server.once("error", () => resolve(undefined));
    server.listen(port, host, () => resolve({ close: () => server.close() }));
  });
}
import { type NatsServer, startNats, startNatsCluster } from "../testing/nats.ts";
import { bareBucket } from "../daemon/cluster/_nats_link.ts";
import { hashToken } from "../daemon/config/token_hash.ts";
import { startToxiproxy } from "../testing/toxiproxy.ts";

const KEY = "cluster-key-for-the-e2e-tests-0123456789";
/** What a node logs when it refuses a record not signed with its cluster key. */
const REFUSED = "cluster record refused: not signed with the cluster key";
const ADMIN = "admin-token-for-the-cluster-tests-0123456";
const TTL_MS = 2_000;

/** Options of {@linkcode startNode}. */
interface NodeOptions {
  /** The cluster key (default {@linkcode KEY}). */
  key?: string;
  /** More `cluster` settings (replicas, tls, visitors, …). */
  cluster?: Record<string, unknown>;
  /** More environment. */
  env?: Record<string, string>;
  /** Bound on the start. */
  timeoutMs?: number;
  /** More top-level config (e.g. `groups`), and client settings (e.g. `groups`). */
  config?: Record<string, unknown>;
  /** More settings of client `laptop`. */
  client?: Record<string, unknown>;
  /** `--listen-tcp` (default a free port). */
  listenTcp?: string;
}

/**
 * Starts node `index` (1-based) of a cluster on `servers`: client `laptop` with `token`, tunnel
 * ports on 127.0.0.`index`, the admin API on a free loopback port.
 */
async function startNode(
  servers: NatsServer | NatsServer[],
  index: number,
  token: string,
  options: NodeOptions = {},
): Promise<DaemonProcess> {
  return await startDaemon({
    config: nodeConfig(servers, index, token, options),
    env: {
      TUNNELMUX_CLUSTER_KEY: options.key ?? KEY,
      TUNNELMUX_ADMIN_TOKEN: ADMIN,
      ...options.env,
    },
    args: ["--listen-admin", "127.0.0.1:0"],
    timeoutMs: options.timeoutMs,
    listenTcp: options.listenTcp,
  });
}

/**
 * The config of node `index` (see {@linkcode startNode}), its relay listener on 127.0.0.1:0: it
 * binds a free port and advertises that one (no port picked ahead that another process could take).
 */
function nodeConfig(
  servers: NatsServer | NatsServer[],
  index: number,
  token: string,
  options: NodeOptions,
): Record<string, unknown> {
  return daemonConfig([{
    name: "laptop",
    token,
    expose: { ports: ["20000-32767", 0] },
    services: { offer: ["*"], use: ["*"] },
    ...options.client,
  }], {
    ...options.config,
    cluster: {
      servers: [servers].flat().map((s) => s.url),
      node: `n${index}`,
      listen: "127.0.0.1:0",
      tunnelHost: `127.0.0.${index}`,
      presenceTtlMs: TTL_MS,
      ...options.cluster,
    },
  });
}

/** Calls node `daemon`'s admin API. */
async function admin(
  daemon: DaemonProcess,
  path: string,
  init: { method?: string; body?: unknown } = {},
): Promise<{ status: number; body: Record<string, unknown> }> {
  // The admin API starts a moment after the tunnel listeners a started daemon is waited for.
  const base = await waitFor(() => /admin API on (http:\/\/\S+)/.exec(daemon.stdout())?.[1], {
    timeoutMs: 15_000,
    message: "the admin API's address on stdout",
  });
  const response = await fetch(new URL(path, base), {
    method: init.method ?? "GET",
    headers: { authorization: `Bearer ${ADMIN}`, "content-type": "application/json" },
    body: init.body === undefined ? undefined : JSON.stringify(init.body),
  });
  return { status: response.status, body: await response.json() };
}

/** Echoes `bytes` through `host:port`, retrying while the relay there is not up yet. */
async function echoVia(host: string, port: number, bytes: Uint8Array): Promise<Uint8Array> {
  let back: Uint8Array | undefined;
  await waitFor(async () => {
    back = await tcpRoundTrip(port, bytes, { host, timeoutMs: 10_000 });
    return back.length === bytes.length;
  }, { timeoutMs: 20_000, intervalMs: 100, message: `an echo through ${host}:${port}` });
  return back!;
}

/**
 * Tries `attempt` 40 times in a row (a bounded loop from the moment of a failure): how many did
 * not answer `expected`, and when the run of good answers that ends the loop began (0: never).
 */
async function failover(
  attempt: () => Promise<string>,
  expected: string,
): Promise<{ failures: number; wholeAt: number }> {
  let failures = 0;
  let wholeAt = 0;
  for (let i = 0; i < 40; i++) {
    const answer = await attempt().catch(() => "");
    if (answer !== expected) {
      failures++;
      wholeAt = 0;
    } else if (wholeAt === 0) wholeAt = Date.now();
  }
  return { failures, wholeAt };
}

/** The address of `node`'s HTTP listener, from its start log. */
function httpAddressOf(node: DaemonProcess): string {
  const running = node.logs().find((e) => e.msg === "daemon running");
  return running!.http as string;
}

/**
 * A GET of `path` (default `/hi`) to `address` with `Host: host`, from the address `from`: the
 * status and body.
 */
function httpGet(
  address: string,
  host: string,
  headers: Record<string, string> = {},
  { path = "/hi", from }: { path?: string; from?: string } = {},
): Promise<{ status: number; body: string }> {
  const [hostname, port] = [address.slice(0, address.lastIndexOf(":")), address.split(":").pop()];
  return new Promise((resolve, reject) => {
    const options = {
      host: hostname,
      port: Number(port),
      path,
      headers: { host, ...headers },
      ...(from ? { localAddress: from } : {}),
    };
    httpRequest(options, (res) => {
      let body = "";
      res.setEncoding("utf8").on("data", (d: string) => body += d);
      res.on("end", () => resolve({ status: res.statusCode!, body }));
    }).on("error", reject).end();
  });
}

/** Nodes 1 to 3 of a cluster on `nats`, started in turn. */
async function threeNodes(nats: NatsServer, token: string): Promise<DaemonProcess[]> {
  const nodes: DaemonProcess[] = [];
  for (let i = 1; i <= 3; i++) nodes.push(await startNode(nats, i, token));
  return nodes;
}

/** A local service that answers every connection with its own name, then closes. */
function named(name: string): Promise<TestServer> {
  return startTcpServer((socket) => {
    socket.on("error", () => {});
    socket.end(name);
  });
}

describe("cluster: three daemons and one NATS", () => {
  const token = newToken("laptop");
  let nats: NatsServer;
  let echo: TestServer;
  const nodes: DaemonProcess[] = [];

  before(async () => {
    nats = await startNats();
    echo = await startEchoServer();
    for (let i = 1; i <= 3; i++) nodes.push(await startNode(nats, i, token));
  });
  after(cleanup);

  it("a visitor on node B reaches a tunnel held on node A (1 MiB both ways)", async () => {
    const client = await startClient({
      server: nodes[0].tcpUrl,
      token,
      args: ["--expose", `0=127.0.0.1:${echo.port}`],
    });
    const { host, port } = await client.waitForTunnel();
    assert.equal(host, "127.0.0.1", "node A binds its own tunnel host");
    const payload = pattern(1024 * 1024, 7);
    assertSameBytes(await echoVia("127.0.0.2", port, payload), payload, "through node B");
    assertSameBytes(await echoVia("127.0.0.3", port, payload), payload, "through node C");
    assertSameBytes(await echoVia("127.0.0.1", port, payload), payload, "at the owner");
    await client.stop();
    // The tunnel is gone: its port is released everywhere, relays included.
    await waitFor(
      () =>
        tcpRoundTrip(port, payload, { host: "127.0.0.2", timeoutMs: 2_000 }).then(
          () => false,
          () => true,
        ),
      { timeoutMs: 15_000, message: "node B to stop relaying the closed tunnel" },
    );
  });

  it("each node binds its relay listener on port 0 and advertises the port it got", async () => {
    const bound = nodes.map((n) => n.clusterAddress);
    for (const [i, node] of nodes.entries()) {
      assert.match(node.clusterAddress, /^127\.0\.0\.1:\d+$/);
      assert.notEqual(node.clusterAddress, "127.0.0.1:0");
      assert.equal(node.clusterAdvertise, node.clusterAddress, `n${i + 1} on stdout`);
      const running = node.logs().find((e) => e.msg === "daemon running");
      assert.deepEqual([running?.cluster, running?.advertise], [bound[i], bound[i]]);
      const { listeners } = (await admin(node, "/v1/info")).body as {
        listeners: Record<string, string>;
      };
      assert.deepEqual([listeners.cluster, listeners.advertise], [bound[i], bound[i]]);
    }
    assert.equal(new Set(bound).size, 3, "a port of its own each");
    // What the other nodes read (presence), as any node's admin API shows it.
    const cluster = (await admin(nodes[2], "/v1/cluster")).body.cluster as {
      nodes: { node: string; advertise: string }[];
    };
    assert.deepEqual(
      cluster.nodes.map((n) => [n.node, n.advertise]),
      bound.map((address, i) => [`n${i + 1}`, address]),
    );
    // The relay sessions came up on those addresses (the visitor tests relay through them).
    await waitFor(async () => {
      const view = (await admin(nodes[0], "/v1/cluster")).body.cluster as {
        peers: { node: string; connected: boolean }[];
      };
      return view.peers.filter((p) => p.connected).length === 2;
    }, { timeoutMs: 15_000, message: "node A's relay sessions with B and C" });
  });

  it("a tunnel's visitor policy holds for visitors every node relays to it", async () => {
    const client = await startClient({
      server: nodes[0].tcpUrl,
      token,
      args: ["--expose", `0=127.0.0.1:${echo.port}`, "--deny-ip", "127.0.0.5"],
    });
    const { port } = await client.waitForTunnel();
    const bytes = pattern(1024, 5);
    await echoVia("127.0.0.2", port, bytes); // node B relays by now
    /** A visit of node B's relay of the tunnel from `from`: the bytes echoed before it closed. */
    const visitFrom = async (from: string) => {
      const socket = await tcpConnect(port, "127.0.0.2", from);
      try {
        return await withTimeout(
          new Promise<number>((resolve) => {
            let got = 0;
            socket.on("data", (d: Uint8Array) => {
              got += d.length;
              if (got >= bytes.length) resolve(got);
            });
            socket.once("end", () => resolve(got));
            socket.once("close", () => resolve(got));
            socket.write(bytes);
          }),
          15_000,
          `a visit from ${from}`,
        );
      } finally {
        socket.destroy();
      }
    };
    assert.equal(await visitFrom("127.0.0.6"), bytes.length, "allowed through node B");
    assert.equal(await visitFrom("127.0.0.5"), 0, "denied by the holding node, though relayed");
    await client.stop();
  });

  it("a service offered on node A is used from node C", async () => {
    await startClient({
      server: nodes[0].tcpUrl,
      token,
      args: ["--offer", `echo-svc=127.0.0.1:${echo.port}`],
    });
    const user = await startClient({
      server: nodes[2].tcpUrl,
      token,
      args: ["--use", "127.0.0.1:0=echo-svc"],
    });
    const entry = await user.waitForLog((e) => e.msg === "using service");
    const port = Number(String(entry.listen).split(":").pop());
    const payload = pattern(256 * 1024, 3);
    assertSameBytes(await echoVia("127.0.0.1", port, payload), payload, "service via node C");
  });

  it("a token minted on node A works on node B; revoked on node C, its session on B closes", async () => {
    const minted = await admin(nodes[0], "/v1/tokens", {
      method: "POST",
      body: { name: "minted-laptop", expose: { ports: ["20000-32767", 0] } },
    });
    assert.equal(minted.status, 201, JSON.stringify(minted.body));
    const client = await startClient({
      server: nodes[1].tcpUrl,
      token: String(minted.body.token),
      args: ["--expose", `0=127.0.0.1:${echo.port}`, "--no-reconnect"],
    });
    const { port } = await client.waitForTunnel();
    const payload = pattern(4096, 11);
    assertSameBytes(await echoVia("127.0.0.2", port, payload), payload, "minted token's tunnel");
    // Every node holds the port: the owner (node B) for the session, A and C to relay its visitors.
    const hosts = ["127.0.0.1", "127.0.0.2", "127.0.0.3"];
    const held = async () => (await Promise.all(hosts.map((h) => canBind(port, h)))).map((f) => !f);
    await waitFor(async () => (await held()).every(Boolean), "every node to listen on the port");
    const revokedAt = Date.now();
    const revoked = await admin(nodes[2], `/v1/tokens/${minted.body.id}`, { method: "DELETE" });
    assert.equal(revoked.status, 200, JSON.stringify(revoked.body));
    const { code } = await client.exited;
    const closedMs = Date.now() - revokedAt;
    console.log(
      `cluster-figure ${
        JSON.stringify({ figure: "revocation_to_session_closed_ms", value: closedMs })
      }`,
    );
    assert.notEqual(code, 0, "the client's session was closed by the revocation");
    // The session's claim goes with it, and with the claim every node's relay of the port.
    await waitFor(async () => (await held()).every((h) => !h), {
      timeoutMs: 10_000,
      message: "every node to let the port go",
    });
    console.log(
      `cluster-figure ${
        JSON.stringify({
          figure: "revocation_to_port_released_on_every_node_ms",
          value: Date.now() - revokedAt,
          nodes: hosts.length,
        })
      }`,
    );
    await nodes[1].waitForLog((e) => e.msg === "closing a session whose credential was revoked");
    // And the token no longer opens a session anywhere.
    await assert.rejects(
      sdkConnect(nodes[0].tcpUrl, { token: String(minted.body.token), reconnect: false }),
      (e: Error & { code?: string }) => e.code === "unauthorized",
    );
  });

  it("the admin API of any node sees and acts on the whole cluster", async () => {
    // Events of every node, followed from node C.
    const base = /admin API on (http:\/\/\S+)/.exec(nodes[2].stdout())![1];
    const feed = await fetch(new URL("/v1/events?scope=cluster", base), {
      headers: { authorization: `Bearer ${ADMIN}` },
    });
    assert.equal(feed.status, 200);
    const reader = feed.body!.getReader();
    let seen = "";
    const a = await startClient({
      server: nodes[0].tcpUrl,
      token,
      args: ["--expose", `0=127.0.0.1:${echo.port}`, "--no-reconnect"],
    });
    const b = await startClient({
      server: nodes[1].tcpUrl,
      token,
      args: ["--expose", `0=127.0.0.1:${echo.port}`, "--no-reconnect"],
    });
    const { port: portA } = await a.waitForTunnel();
    await b.waitForTunnel();
    await waitFor(async () => {
      const { value } = await reader.read();
      seen += new TextDecoder().decode(value);
      return /event: tunnel_up\ndata: .*"node":"n1"/.test(seen);
    }, { timeoutMs: 15_000, message: "node A's tunnel_up on node C's cluster feed" });
    await reader.cancel();

    const cluster = (await admin(nodes[1], "/v1/cluster")).body.cluster as Record<string, unknown>;
    const names = (cluster.nodes as { node: string; health: unknown }[]).map((n) => n.node);
    assert.deepEqual(names, ["n1", "n2", "n3"]);
    assert.deepEqual(cluster.missing, []);
    assert.equal((cluster.nats as { state: string }).state, "connected");
    assert.ok((cluster.nodes as { health: unknown }[]).every((n) => n.health !== null));

    const sessions = (await admin(nodes[2], "/v1/sessions?scope=cluster")).body;
    const holders = (sessions.sessions as { node: string }[]).map((s) => s.node);
    assert.ok(holders.includes("n1") && holders.includes("n2"), JSON.stringify(sessions));
    assert.deepEqual(sessions.missing, []);
    const tunnels = (await admin(nodes[2], "/v1/tunnels?scope=cluster")).body;
    const tunnelA = (tunnels.tunnels as { node: string; id: string; bind: string }[])
      .find((t) => t.node === "n1" && t.bind.endsWith(`:${portA}`));
    assert.ok(tunnelA, JSON.stringify(tunnels));

    // Close A's tunnel from node B, kick B's session from node C.
    const closed = await fetch(
      new URL(
        `/v1/tunnels/${tunnelA.id}`,
        /admin API on (http:\/\/\S+)/.exec(nodes[1].stdout())![1],
      ),
      {
        method: "DELETE",
        headers: { authorization: `Bearer ${ADMIN}` },
      },
    );
    assert.equal(closed.status, 204);
    await a.waitForLog((e) => /closed by an operator/.test(String(e.msg)));
    const sessionB = (sessions.sessions as { node: string; id: string; client: string }[])
      .find((s) => s.node === "n2" && s.client === "laptop")!;
    const kicked = await admin(nodes[2], `/v1/sessions/${sessionB.id}?node=n2`, {
      method: "DELETE",
    });
    assert.equal(kicked.status, 202, JSON.stringify(kicked.body));
    const { code } = await b.exited;
    assert.notEqual(code, 0, "B's client lost its session");

    const metrics = await (await fetch(new URL("/metrics", base), {
      headers: { authorization: `Bearer ${ADMIN}` },
    })).text();
    assert.match(metrics, /^tunnelmux_cluster_nodes 3$/m);
    assert.match(metrics, /^tunnelmux_cluster_nats_connected 1$/m);
    assert.match(
      metrics,
      /^tunnelmux_cluster_relay_streams_total\{peer="n1",direction="out"\} \d+$/m,
    );
    await a.stop();
  });

  it("two clients racing for one port on two nodes: exactly one wins", async () => {
    const a = await sdkConnect(nodes[0].tcpUrl, { token, reconnect: false });
    const b = await sdkConnect(nodes[1].tcpUrl, { token, reconnect: false });
    try {
      for (let round = 0; round < 5; round++) {
        const port = 20_000 + Math.floor(Math.random() * 12_000);
        const results = await Promise.allSettled([
          a.expose({ local: `127.0.0.1:${echo.port}`, remotePort: port }),
          b.expose({ local: `127.0.0.1:${echo.port}`, remotePort: port }),
        ]);
        const won = results.filter((r) => r.status === "fulfilled");
        const lost = results.filter((r) => r.status === "rejected") as PromiseRejectedResult[];
        assert.equal(won.length, 1, `port ${port}: ${JSON.stringify(results)}`);
        assert.equal(lost[0].reason.code, "port_in_use");
        assert.match(lost[0].reason.message, new RegExp(`port ${port}`));
        for (const r of won) {
          await (r as PromiseFulfilledResult<{ close(): Promise<void> }>).value.close();
        }
      }
    } finally {
      await a.close();
      await b.close();
    }
  });

  it("a node with another cluster key gets no relay session, and none of its records is believed", async () => {
    const intruder = await startNode(nats, 4, token, {
      key: "a-wrong-key-that-is-long-enough-0000",
    });
    // Its presence is refused: no node takes it for up, none dials it.
    await nodes[0].waitForLog((e) =>
      e.msg === REFUSED && e.bucket === "tunnelmux-nodes" && e.key === "n4"
    );
    const listed = (await admin(nodes[0], "/v1/cluster")).body.cluster as {
      nodes: { node: string }[];
      missing: string[];
    };
    assert.deepEqual(listed.nodes.map((n) => n.node), ["n1", "n2", "n3"]);
    assert.deepEqual(listed.missing, []);
    const seenByIntruder = (await admin(intruder, "/v1/cluster")).body.cluster as {
      nodes: { node: string }[];
    };
    assert.deepEqual(seenByIntruder.nodes.map((n) => n.node), ["n4"]);

    // A token minted on it works there only.
    const minted = await admin(intruder, "/v1/tokens", {
      method: "POST",
      body: { name: "intruder-bot", expose: { ports: ["20000-32767", 0] } },
    });
    assert.equal(minted.status, 201, JSON.stringify(minted.body));
    const mintedToken = String(minted.body.token);
    await (await sdkConnect(intruder.tcpUrl, { token: mintedToken, reconnect: false })).close();
    for (const node of [nodes[0], nodes[1]]) {
      await node.waitForLog((e) => e.msg === REFUSED && e.key === "name-intruder-bot");
      await assert.rejects(
        sdkConnect(node.tcpUrl, { token: mintedToken, reconnect: false }),
        (e: Error & { code?: string }) => e.code === "unauthorized",
      );
    }

    // A port its client holds does not keep an honest node's client from it.
    const onIntruder = await sdkConnect(intruder.tcpUrl, { token, reconnect: false });
    const onA = await sdkConnect(nodes[0].tcpUrl, { token, reconnect: false });
    try {
      const held = await onIntruder.expose({ local: echo.address });
      await nodes[0].waitForLog((e) => e.msg === REFUSED && e.key === `port-${held.remotePort}`);
      const taken = await onA.expose({ local: echo.address, remotePort: held.remotePort });
      assert.equal(taken.remotePort, held.remotePort);
      await intruder.kill();
      const payload = pattern(1000, 9);
      assertSameBytes(
        await echoVia("127.0.0.1", held.remotePort, payload),
        payload,
        "at the owner",
      );
      assertSameBytes(
        await echoVia("127.0.0.2", held.remotePort, payload),
        payload,
        "an honest node relays to the owner",
      );
    } finally {
      await Promise.all([onIntruder.close(), onA.close()]);
    }
    // The intruder was never dialed, nor did it dial: no relay session with it on any node.
    for (const node of nodes) {
      assert.ok(!node.logs().some((e) => e.msg === "relay session up" && e.peer === "n4"));
      assert.ok(!node.logs().some((e) => e.msg === "cluster node up" && e.peer === "n4"));
    }
  });

  it("a client of a node killed with SIGKILL reconnects through the balancer and gets its port back", async () => {
    const owner = await startNode(nats, 6, token);
    const toxiproxy = await startToxiproxy();
    const balancer = await toxiproxy.proxy("balancer", Number(owner.tcpAddress.split(":")[1]));
    const client = await startClient({
      server: `tcp://127.0.0.1:${balancer.port}`,
      token,
      args: ["--expose", `0=127.0.0.1:${echo.port}`],
    });
    const { port } = await client.waitForTunnel();
    const from = client.logs().length;
    // The balancer sends new connections to node B once the owner is gone, as a health-checked
    // L4 balancer or a DNS name with several nodes would.
    await balancer.setUpstream(Number(nodes[1].tcpAddress.split(":")[1]));
    const killedAt = Date.now();
    await owner.kill();
    const back = await client.waitForTunnel(from, 30_000);
    const backMs = Date.now() - killedAt;
    console.log(
      `cluster-figure ${
        JSON.stringify({ figure: "node_death_to_tunnel_back_ms", value: backMs, ttlMs: TTL_MS })
      }`,
    );
    assert.equal(back.port, port, "the tunnel came back on the same public port");
    assert.equal(back.host, "127.0.0.2", "now held by node B");
    const payload = pattern(64 * 1024, 23);
    assertSameBytes(await echoVia("127.0.0.3", port, payload), payload, "through node C");
    await client.stop();
  });

  it("a client given several nodes fails over to the next when its node dies, and keeps its port", async () => {
    const owner = await startNode(nats, 7, token);
    const client = await startClient({
      server: `${owner.tcpUrl},${nodes[2].tcpUrl}`,
      token,
      args: ["--expose", `0=127.0.0.1:${echo.port}`],
    });
    const first = await client.waitForLog((e) => e.msg === "session ready");
    assert.equal(first.node, "n7");
    const { port } = await client.waitForTunnel();
    const from = client.logs().length;
    const killedAt = Date.now();
    await owner.kill();
    const again = await client.waitForLog((e) => e.msg === "session ready", 30_000, from);
    assert.equal(again.node, "n3", "the second URL's node");
    const back = await client.waitForTunnel(from, 30_000);
    console.log(
      `cluster-figure ${
        JSON.stringify({
          figure: "node_death_to_tunnel_back_ms_url_list",
          value: Date.now() - killedAt,
          ttlMs: TTL_MS,
        })
      }`,
    );
    assert.equal(back.port, port);
    const payload = pattern(16 * 1024, 37);
    assertSameBytes(await echoVia("127.0.0.1", port, payload), payload, "through node A");
    await client.stop();
  });

  it("SIGKILL of the owner node releases its port once its presence expires (about the TTL)", async () => {
    const owner = await startNode(nats, 5, token);
    const client = await startClient({
      server: owner.tcpUrl,
      token,
      args: ["--expose", `0=127.0.0.1:${echo.port}`, "--no-reconnect"],
    });
    const { port } = await client.waitForTunnel();
    const sdk = await sdkConnect(nodes[1].tcpUrl, { token, reconnect: false });
    try {
      await assert.rejects(
        sdk.expose({ local: `127.0.0.1:${echo.port}`, remotePort: port }),
        (e: Error & { code?: string }) => e.code === "port_in_use",
      );
      const killedAt = Date.now();
      await owner.kill();
      let tunnel: { remotePort: number } | undefined;
      await waitFor(async () => {
        tunnel = await sdk.expose({ local: `127.0.0.1:${echo.port}`, remotePort: port })
          .catch(() => undefined);
        return tunnel !== undefined;
      }, { timeoutMs: 20_000, intervalMs: 100, message: `port ${port} to be free again` });
      const freedMs = Date.now() - killedAt;
      console.log(
        `cluster-figure ${
          JSON.stringify({ figure: "node_death_to_port_free_ms", value: freedMs, ttlMs: TTL_MS })
        }`,
      );
      assert.equal(tunnel!.remotePort, port);
      const payload = pattern(1000, 5);
      assertSameBytes(await echoVia("127.0.0.2", port, payload), payload, "the new owner's port");
    } finally {
      await sdk.close();
    }
  });
});

describe("cluster: one port served from two nodes (routes)", () => {
  const token = newToken("laptop");
  after(cleanup);

  it("sessions of one client on two nodes serve one port; a node dies, visitors go on through the other", async () => {
    const nats = await startNats();
    const nodes = await threeNodes(nats, token);
    const serviceA = await named("A");
    const serviceB = await named("B");
    const onA = await sdkConnect(nodes[0].tcpUrl, { token, reconnect: false });
    const onB = await sdkConnect(nodes[1].tcpUrl, { token, reconnect: false });
    const visit = async (host: string, port: number) =>
      new TextDecoder().decode(
        await tcpRoundTrip(port, new Uint8Array(0), { host, halfClose: false, timeoutMs: 5_000 }),
      );
    try {
      const a = await onA.expose({ local: `127.0.0.1:${serviceA.port}`, shared: true });
      // The second session names the port, as HaClient does.
      const b = await onB.expose({
        local: `127.0.0.1:${serviceB.port}`,
        remotePort: a.remotePort,
        shared: true,
      });
      assert.equal(b.remotePort, a.remotePort, "one cluster-wide port");
      const port = a.remotePort;
      // Each owner node prefers its own route; node C balances over both.
      await waitFor(async () => (await visit("127.0.0.3", port)) !== "", "node C to relay");
      assert.equal(await visit("127.0.0.1", port), "A");
      assert.equal(await visit("127.0.0.2", port), "B");
      // Node C learns of both routes (B's may reach it a moment after A's); then it uses both.
      await waitFor(async () => {
        const atC = new Set<string>();
        for (let i = 0; i < 4; i++) atC.add(await visit("127.0.0.3", port));
        return atC.has("A") && atC.has("B");
      }, "node C to balance over both routes");

      const killedAt = Date.now();
      await nodes[0].kill();
      // A bounded loop of visitors through C from the moment of the kill.
      const { failures, wholeAt } = await failover(() => visit("127.0.0.3", port), "B");
      console.log(
        `cluster-figure ${
          JSON.stringify({
            figure: "route_failover",
            failedVisitors: failures,
            wholeAfterMs: wholeAt - killedAt,
          })
        }`,
      );
      assert.ok(wholeAt > 0, "visitors succeed again");
      assert.equal(await visit("127.0.0.2", port), "B");
    } finally {
      await onA.close().catch(() => {});
      await onB.close();
      serviceA.close();
      serviceB.close();
    }
  });

  it("a service offered by sessions of one client on two nodes: users on a third node reach both; a node dies, users go on through the other", async () => {
    const nats = await startNats();
    const nodes = await threeNodes(nats, token);
    const serviceA = await named("A");
    const serviceB = await named("B");
    const onA = await sdkConnect(nodes[0].tcpUrl, { token, reconnect: false });
    const onB = await sdkConnect(nodes[1].tcpUrl, { token, reconnect: false });
    const onC = await sdkConnect(nodes[2].tcpUrl, { token, reconnect: false });
    try {
      await onA.offer("db", `127.0.0.1:${serviceA.port}`);
      await onB.offer("db", `127.0.0.1:${serviceB.port}`);
      const user = await onC.forward({ listen: "127.0.0.1:0", service: "db" });
      const port = Number(user.address.split(":").at(-1));
      const use = async () =>
        new TextDecoder().decode(
          await tcpRoundTrip(port, new Uint8Array(0), { halfClose: false, timeoutMs: 5_000 }),
        );
      // Node C learns of both offers; then it spreads users over both.
      await waitFor(async () => {
        const seen = new Set<string>();
        for (let i = 0; i < 4; i++) seen.add(await use().catch(() => ""));
        return seen.has("A") && seen.has("B");
      }, "node C to use both offers");
      const listed = (await admin(nodes[2], "/v1/tunnels")).body.services as {
        name: string;
        node: string;
        owner: string;
      }[];
      assert.deepEqual(
        listed.map((o) => `${o.name}@${o.node}/${o.owner}`).sort(),
        ["db@n1/client:laptop", "db@n2/client:laptop"],
      );

      const killedAt = Date.now();
      await nodes[0].kill();
      const { failures, wholeAt } = await failover(use, "B");
      console.log(
        `cluster-figure ${
          JSON.stringify({
            figure: "service_failover",
            failedUsers: failures,
            wholeAfterMs: wholeAt - killedAt,
          })
        }`,
      );
      assert.ok(wholeAt > 0, "users succeed again");
      await waitFor(async () => {
        const left = (await admin(nodes[2], "/v1/tunnels")).body.services as { node: string }[];
        return left.length === 1 && left[0].node === "n2";
      }, "the dead node's offer gone from the registry");
      user.close();
    } finally {
      await onA.close().catch(() => {});
      await onB.close();
      await onC.close();
      serviceA.close();
      serviceB.close();
    }
  });

  it("a client with --ha 2 keeps sessions on two nodes; one dies, its session moves to the third", async () => {
    const nats = await startNats();
    const nodes = await threeNodes(nats, token);
    const echo = await startEchoServer();
    const client = await startClient({
      server: nodes.map((n) => n.tcpUrl).join(","),
      token,
      args: ["--ha", "2", "--expose", `0=127.0.0.1:${echo.port}`, "--offer", `db=${echo.address}`],
    });
    const whole = await client.waitForLog((e) => e.msg === "whole: a session on each node");
    assert.equal(whole.nodes, "n1,n2");
    const offers = async () =>
      ((await admin(nodes[2], "/v1/tunnels")).body.services as { node: string }[])
        .map((o) => o.node).sort().join();
    // Every session offers the service too.
    await waitFor(async () => (await offers()) === "n1,n2", "an offer on each node");
    const { port } = await client.waitForTunnel();
    const payload = pattern(4096, 41);
    assertSameBytes(await echoVia("127.0.0.3", port, payload), payload, "through node C");
    const from = client.logs().length;
    const killedAt = Date.now();
    await nodes[0].kill();
    let failures = 0;
    for (let i = 0; i < 30; i++) {
      const back = await tcpRoundTrip(port, payload, { host: "127.0.0.3", timeoutMs: 5_000 })
        .catch(() => undefined);
      if (!back || back.length !== payload.length) failures++;
    }
    await client.waitForLog(
      (e) => /^running degraded: sessions on 1 of 2 nodes/.test(String(e.msg)),
      15_000,
      from,
    );
    const again = await client.waitForLog(
      (e) => e.msg === "whole: a session on each node",
      30_000,
      from,
    );
    console.log(
      `cluster-figure ${
        JSON.stringify({
          figure: "ha2_node_death",
          failedVisitors: failures,
          wholeAgainMs: Date.now() - killedAt,
        })
      }`,
    );
    assert.equal(again.nodes, "n2,n3");
    await waitFor(async () => (await offers()) === "n2,n3", "the offer moved with the session");
    assertSameBytes(await echoVia("127.0.0.2", port, payload), payload, "through node B");
    assertSameBytes(await echoVia("127.0.0.3", port, payload), payload, "through node C");
    await client.stop();
  });

  it("one DNS name for three nodes: an HA client's sessions land on two of them; one dies, its session moves to the third", async () => {
    const nats = await startNats();
    // The first node picks the port; the others take the same number on their own addresses.
    const nodes = [await startNode(nats, 1, token, { listenTcp: "127.0.0.1:0" })];
    const port = Number(nodes[0].tcpAddress.split(":")[1]);
    for (let i = 2; i <= 3; i++) {
      nodes.push(await startNode(nats, i, token, { listenTcp: `127.0.0.${i}:${port}` }));
    }
    const echo = await startEchoServer();
    // The name resolves to the three nodes' addresses, as a DNS name with three A records.
    const resolve = (host: string) =>
      Promise.resolve(host === "nodes.test" ? ["127.0.0.1", "127.0.0.2", "127.0.0.3"] : []);
    const ha = await connectHa([`tcp://nodes.test:${port}`], { token, sessions: 2, resolve });
    try {
      await waitFor(() => ha.nodes.length === 2, "sessions on two distinct nodes");
      const before = ha.nodes;
      const { remotePort } = await ha.expose({ local: `127.0.0.1:${echo.port}` });
      const payload = pattern(2048, 53);
      const spare = [1, 2, 3].find((i) => !before.includes(`n${i}`))!;
      assertSameBytes(await echoVia(`127.0.0.${spare}`, remotePort, payload), payload, "spare");
      const victim = Number(before[0].slice(1));
      await nodes[victim - 1].kill();
      await waitFor(
        () => ha.nodes.length === 2 && !ha.nodes.includes(`n${victim}`),
        { timeoutMs: 30_000, message: "the lost session to move to the third node" },
      );
      assert.ok(ha.nodes.includes(`n${spare}`));
      assertSameBytes(await echoVia(`127.0.0.${spare}`, remotePort, payload), payload, "after");
    } finally {
      await ha.close();
    }
  });

  it("--ha 2 against a single daemon runs degraded, with a warning, and serves", async () => {
    const nats = await startNats();
    const only = await startNode(nats, 1, token);
    const echo = await startEchoServer();
    const client = await startClient({
      server: only.tcpUrl,
      token,
      args: ["--ha", "2", "--expose", `0=127.0.0.1:${echo.port}`],
    });
    await client.waitForLog((e) =>
      /^running degraded: sessions on 1 of 2 nodes/.test(String(e.msg))
    );
    const { port } = await client.waitForTunnel();
    const payload = pattern(1000, 43);
    assertSameBytes(await echoVia("127.0.0.1", port, payload), payload, "degraded but serving");
    assert.equal(client.hasExited, false);
    // Operators see it: the client is listed as degraded, and its port has two routes on n1.
    await waitFor(async () => {
      const cluster = (await admin(only, "/v1/cluster")).body.cluster as {
        degraded: { client: string; wanted: number; nodes: string[] }[];
      };
      return cluster.degraded.some((d) =>
        d.client === "laptop" && d.wanted === 2 && d.nodes.join() === "n1"
      );
    }, "the client listed as degraded");
    const tunnels = (await admin(only, "/v1/tunnels")).body.tunnels as { id: string }[];
    const detail = (await admin(only, `/v1/tunnels/${tunnels[0].id}`)).body;
    const routes = detail.routes as { node: string; healthy: boolean }[];
    assert.equal(routes.length, 2, JSON.stringify(detail));
    assert.ok(routes.every((r) => r.node === "n1" && r.healthy));
    await client.stop();
  });

  it("both nodes of an --ha 2 client killed: visitors are refused at once; a node back, it serves again", async () => {
    const nats = await startNats();
    const n1 = await startNode(nats, 1, token);
    const n2 = await startNode(nats, 2, token);
    const n3 = await startNode(nats, 3, token);
    const echo = await startEchoServer();
    const client = await startClient({
      server: `${n1.tcpUrl},${n2.tcpUrl}`,
      token,
      args: ["--ha", "2", "--expose", `0=127.0.0.1:${echo.port}`],
    });
    await client.waitForLog((e) => e.msg === "whole: a session on each node");
    const { port } = await client.waitForTunnel();
    const payload = pattern(2048, 47);
    assertSameBytes(await echoVia("127.0.0.3", port, payload), payload, "before");
    const from = n3.logs().length;
    await n1.kill();
    await n2.kill();
    // No route is up: node 3 refuses visitors at once (they see the connection end), and says why.
    await waitFor(async () => {
      const outcome = await tcpRoundTrip(port, payload, { host: "127.0.0.3", timeoutMs: 3_000 })
        .then(() => "answered", () => "refused");
      return outcome === "refused";
    }, "visitors to be refused");
    await n3.waitForLog((e) => e.msg === "visitor refused: no route is up", 15_000, from);
    // A node comes back on its address (its relay listener on a new port, which it advertises):
    // the client reconnects there and the port serves again.
    await startNode(nats, 1, token, { listenTcp: n1.tcpAddress });
    assertSameBytes(await echoVia("127.0.0.3", port, payload), payload, "after n1 returned");
    assertSameBytes(await echoVia("127.0.0.1", port, payload), payload, "at n1");
    await client.stop();
  });

  it("a group's members on two nodes share a port; a member failing its health check gets no visitors, then comes back", async () => {
    const nats = await startNats();
    const groupKey = "cluster-group-key-0123456789abcdef";
    const options = {
      config: { groups: { web: { key: groupKey } } },
      client: { groups: ["web"] },
    };
    const nodes = [
      await startNode(nats, 1, token, options),
      await startNode(nats, 2, token, options),
      await startNode(nats, 3, token, options),
    ];
    let aUp = true;
    const serviceA = await startTcpServer((socket) => {
      socket.on("error", () => {});
      socket.once("data", (chunk: Uint8Array) => {
        if (!new TextDecoder().decode(chunk).startsWith("GET ")) return socket.end("A");
        const status = aUp ? "200 OK" : "503 Service Unavailable";
        socket.end(`HTTP/1.1 ${status}\r\ncontent-length: 0\r\nconnection: close\r\n\r\n`);
      });
    });
    const serviceB = await startTcpServer((socket) => {
      socket.on("error", () => {});
      socket.once("data", () => socket.end("B"));
    });
    const member = (node: DaemonProcess, service: TestServer, health: string[], remote = 0) =>
      startClient({
        server: node.tcpUrl,
        token,
        args: ["--expose", `${remote}=127.0.0.1:${service.port}`, "--group", "web", ...health],
        env: { TUNNELMUX_GROUP_KEY: groupKey },
      });
    const a = await member(nodes[0], serviceA, [
      "--health",
      "http:/health",
      "--health-interval-ms",
      "100",
    ]);
    const { port } = await a.waitForTunnel();
    // The second member names the group's port (port 0 would find it too: see the next test).
    const b = await member(nodes[1], serviceB, [], port);
    assert.equal((await b.waitForTunnel()).port, port, "the second member joins the group's port");
    const visitC = async () =>
      new TextDecoder().decode(
        await tcpRoundTrip(port, new TextEncoder().encode("v"), {
          host: "127.0.0.3",
          halfClose: false,
          timeoutMs: 5_000,
        }).catch(() => new Uint8Array(0)),
      );
    const both = async () => {
      const seen = new Set<string>();
      for (let i = 0; i < 6; i++) seen.add(await visitC());
      return seen.has("A") && seen.has("B");
    };
    await waitFor(both, "node C to balance over both members");
    aUp = false;
    await a.waitForLog((e) => e.msg === "local service unhealthy: route withdrawn");
    await waitFor(async () => {
      for (let i = 0; i < 6; i++) if (await visitC() !== "B") return false;
      return true;
    }, "every visitor to member B");
    aUp = true;
    await a.waitForLog((e) => e.msg === "local service healthy again");
    await waitFor(both, "member A back");
    serviceA.close();
    serviceB.close();
  });

  it("a group whose first pick cannot be bound takes the next port (its owner key does not stay on the failed one)", async () => {
    const nats = await startNats();
    // Two ports allowed, one of them taken on the node's tunnel address: whichever order the
    // daemon tries them in, the expose must land on the free one. Each group is a new owner, so
    // each attempt starts from a random pick. Both lie below Linux's ephemeral range (32768 and
    // up): there, an outgoing connection of the node itself (to NATS, say) could take the free
    // one between our check and its bind.
    let busy: { close(): void } | undefined;
    let free = 0;
    for (let i = 0; i < 50 && !busy; i++) {
      const port = 20000 + Math.floor(Math.random() * 12000);
      if (!(await canBind(port + 1))) continue;
      busy = await holdPort(port);
      free = port + 1;
    }
    assert.ok(busy, "a pair of free ports below the ephemeral range");
    const groupKey = "cluster-group-key-0123456789abcdef";
    const names = ["g0", "g1", "g2", "g3", "g4", "g5"];
    const node = await startNode(nats, 1, token, {
      config: { groups: Object.fromEntries(names.map((g) => [g, { key: groupKey }])) },
      client: { expose: { ports: [`${free - 1}-${free}`] }, groups: names },
    });
    const client = await sdkConnect(node.tcpUrl, { token, reconnect: false });
    try {
      for (const group of names) {
        const tunnel = await client.expose({ local: "127.0.0.1:1", group, groupKey });
        assert.equal(tunnel.remotePort, free, group);
        await tunnel.close();
      }
    } finally {
      await client.close();
      busy.close();
    }
  });

  it("a member whose group's port another program holds on its node is refused, naming that port", async () => {
    const nats = await startNats();
    const groupKey = "cluster-group-key-0123456789abcdef";
    // One port allowed, free on both nodes' tunnel addresses to begin with (below the ephemeral
    // range, as above).
    let port = 0;
    for (let i = 0; i < 50 && port === 0; i++) {
      const candidate = 20000 + Math.floor(Math.random() * 12000);
      if (await canBind(candidate, "127.0.0.1") && await canBind(candidate, "127.0.0.2")) {
        port = candidate;
      }
    }
    assert.ok(port > 0, "a port free on both addresses");
    const options = {
      config: { groups: { web: { key: groupKey } } },
      client: { expose: { ports: [port] }, groups: ["web"] },
    };
    const a = await startNode(nats, 1, token, options);
    const b = await startNode(nats, 2, token, options);
    const first = await sdkConnect(a.tcpUrl, { token, reconnect: false });
    const second = await sdkConnect(b.tcpUrl, { token, reconnect: false });
    const squatter = await holdPort(port, "127.0.0.2");
    try {
      assert.ok(squatter, "the port held on node b's address");
      const tunnel = await first.expose({ local: "127.0.0.1:1", group: "web", groupKey });
      assert.equal(tunnel.remotePort, port);
      await assert.rejects(
        second.expose({ local: "127.0.0.1:1", group: "web", groupKey }),
        (e: Error & { code?: string }) =>
          e.code === "port_in_use" &&
          e.message.includes(`port ${port} (held by group:web in the cluster) is in use`),
      );
    } finally {
      squatter?.close();
      await first.close();
      await second.close();
    }
  });

  it("group members starting at the same instant on two nodes, asking for any port, agree on one", async () => {
    const nats = await startNats();
    const groupKey = "cluster-group-key-0123456789abcdef";
    const names = ["g1", "g2", "g3"];
    const options = {
      config: { groups: Object.fromEntries(names.map((g) => [g, { key: groupKey }])) },
      client: { groups: names },
    };
    const a = await startNode(nats, 1, token, options);
    const b = await startNode(nats, 2, token, options);
    const echo = await startEchoServer();
    for (const group of names) {
      const member = (node: DaemonProcess) =>
        startClient({
          server: node.tcpUrl,
          token,
          args: ["--expose", `0=127.0.0.1:${echo.port}`, "--group", group],
          env: { TUNNELMUX_GROUP_KEY: groupKey },
        });
      const [first, second] = await Promise.all([member(a), member(b)]);
      const [p1, p2] = await Promise.all([first.waitForTunnel(), second.waitForTunnel()]);
      assert.equal(p2.port, p1.port, `group ${group}: one port`);
    }
  });
});

describe("cluster: NATS away and back, a paused node, a NATS cluster losing a server", () => {
  const token = newToken("laptop");
  let echo: TestServer;
  before(async () => {
    echo = await startEchoServer();
  });
  after(cleanup);

  it("tunnels carry data while NATS is down; a new port is refused naming the cause; registrations return", async () => {
    const nats = await startNats();
    const a = await startNode(nats, 1, token);
    const b = await startNode(nats, 2, token);
    const client = await startClient({
      server: a.tcpUrl,
      token,
      args: ["--expose", `0=127.0.0.1:${echo.port}`],
    });
    const { port } = await client.waitForTunnel();
    const payload = pattern(64 * 1024, 13);
    assertSameBytes(await echoVia("127.0.0.2", port, payload), payload, "before");
    const sdk = await sdkConnect(a.tcpUrl, { token, reconnect: false });
    try {
      await nats.stop();
      // Longer than the presence TTL: every entry would have expired, were NATS there to say so.
      await sleep(TTL_MS + 1_000);
      assertSameBytes(
        await tcpRoundTrip(port, payload, { host: "127.0.0.2" }),
        payload,
        "a relayed visitor while NATS is down",
      );
      assertSameBytes(
        await tcpRoundTrip(port, payload, { host: "127.0.0.1" }),
        payload,
        "a visitor at the owner while NATS is down",
      );
      await assert.rejects(
        sdk.expose({ local: `127.0.0.1:${echo.port}`, remotePort: 0 }),
        (e: Error & { code?: string }) => {
          assert.equal(e.code, "unavailable");
          assert.match(e.message, /registry \(NATS\) cannot be reached/);
          return true;
        },
      );
      await nats.start();
      // The registry converges: the tunnel's port is A's again everywhere, new claims work.
      await waitFor(async () => {
        const other = await sdkConnect(b.tcpUrl, { token, reconnect: false });
        try {
          return await other.expose({ local: `127.0.0.1:${echo.port}`, remotePort: port }).then(
            () => false,
            (e: Error & { code?: string }) => e.code === "port_in_use",
          );
        } finally {
          await other.close();
        }
      }, { timeoutMs: 20_000, intervalMs: 250, message: "A's claim to be back in the registry" });
      // A new claim on A works once A itself is connected again (each node reconnects on its own).
      let fresh: { remotePort: number } | undefined;
      await waitFor(async () => {
        fresh = await sdk.expose({ local: `127.0.0.1:${echo.port}`, remotePort: 0 })
          .catch(() => undefined);
        return fresh !== undefined;
      }, { timeoutMs: 20_000, intervalMs: 250, message: "a new claim on A after NATS returned" });
      assertSameBytes(
        await echoVia("127.0.0.2", fresh!.remotePort, payload),
        payload,
        "new tunnel",
      );
      assertSameBytes(await echoVia("127.0.0.2", port, payload), payload, "old tunnel, after");
    } finally {
      await sdk.close();
    }
  });

  it("a node paused past its TTL finds its port taken and stops serving it", async () => {
    const nats = await startNats();
    const a = await startNode(nats, 1, token);
    const b = await startNode(nats, 2, token);
    const client = await startClient({
      server: a.tcpUrl,
      token,
      args: ["--expose", `0=127.0.0.1:${echo.port}`],
    });
    const { port } = await client.waitForTunnel();
    const sdk = await sdkConnect(b.tcpUrl, { token, reconnect: false });
    try {
      a.signal("SIGSTOP");
      // Once A's presence expired its claim is stale, and B may take the port.
      await waitFor(
        () =>
          sdk.expose({ local: `127.0.0.1:${echo.port}`, remotePort: port }).then(
            () => true,
            () => false,
          ),
        { timeoutMs: 20_000, intervalMs: 200, message: "the port to be taken over" },
      );
      const from = a.logs().length;
      a.signal("SIGCONT");
      await a.waitForLog(
        (e) => e.msg === "cluster presence was lost; registering again",
        15_000,
        from,
      );
      await a.waitForLog(
        (e) =>
          e.msg === "port taken over by another node while this one was away; closing the tunnel",
        15_000,
        from,
      );
      // Exactly one owner: B's claim stands, and the client of A was told its tunnel closed.
      await client.waitForLog((e) => /tunnel.*(closed|down)/i.test(String(e.msg)), 15_000);
    } finally {
      await sdk.close();
      a.signal("SIGCONT");
    }
  });

  it("NATS credentials: the right token joins; a wrong one stops the daemon at start, naming NATS", async () => {
    const natsToken = "nats-token-for-the-cluster-tests-0123";
    const nats = await startNats({ token: natsToken });
    const start = (secret: string) =>
      startNode(nats, 1, token, { env: { TUNNELMUX_CLUSTER_TOKEN: secret } });
    const joined = await start(natsToken);
    await joined.stop();
    const refused = await start("a-wrong-nats-token-0123456789").then(
      () => "started",
      (error: Error) => error.message,
    );
    assert.match(
      refused,
      /cannot join the cluster: NATS at nats:\/\/127\.0\.0\.1:\d+: .*(auth|Authorization)/i,
    );
  });

  it('visitors: "owner" keeps a tunnel\'s port on its owner only', async () => {
    const nats = await startNats();
    const start = (index: number) =>
      startNode(nats, index, token, { cluster: { visitors: "owner" } });
    const a = await start(1);
    const b = await start(2);
    const sdk = await sdkConnect(b.tcpUrl, { token, reconnect: false });
    try {
      const client = await startClient({
        server: a.tcpUrl,
        token,
        args: ["--expose", `0=127.0.0.1:${echo.port}`],
      });
      const { port } = await client.waitForTunnel();
      const payload = pattern(1000, 31);
      assertSameBytes(await echoVia("127.0.0.1", port, payload), payload, "at the owner");
      // The port is still cluster-wide: B refuses it to its own clients, and binds nothing.
      await assert.rejects(
        sdk.expose({ local: `127.0.0.1:${echo.port}`, remotePort: port }),
        (e: Error & { code?: string }) => e.code === "port_in_use",
      );
      const atB = await tcpRoundTrip(port, payload, { host: "127.0.0.2", timeoutMs: 3_000 })
        .then(() => "answered", (error: Error) => error.message);
      assert.match(atB, /ECONNREFUSED/);
    } finally {
      await sdk.close();
    }
  });

  it("relay sessions run over TLS when cluster.tls is set", {
    skip: !hasOpenssl && "needs openssl",
  }, async () => {
    const nats = await startNats();
    const identity = makeTestIdentity("node", "IP:127.0.0.1");
    const dir = mkdtempSync(join(tmpdir(), "tunnelmux-cluster-tls-"));
    after(() => rmSync(dir, { recursive: true, force: true }));
    writeFileSync(join(dir, "cert.pem"), identity.cert);
    writeFileSync(join(dir, "key.pem"), identity.key);
    const tls = {
      cert: join(dir, "cert.pem"),
      key: join(dir, "key.pem"),
      ca: join(dir, "cert.pem"),
    };
    const start = (index: number) => startNode(nats, index, token, { cluster: { tls } });
    const a = await start(1);
    await start(2);
    const client = await startClient({
      server: a.tcpUrl,
      token,
      args: ["--expose", `0=127.0.0.1:${echo.port}`],
    });
    const { port } = await client.waitForTunnel();
    const payload = pattern(128 * 1024, 29);
    assertSameBytes(await echoVia("127.0.0.2", port, payload), payload, "relayed over TLS");
    // The relay listener speaks TLS with the configured certificate.
    const protocol = await new Promise<string>((resolve, reject) => {
      const socket = tlsConnect(
        { host: "127.0.0.1", port: Number(a.clusterAddress.split(":")[1]), ca: identity.cert },
        () => {
          resolve(socket.getProtocol() ?? "");
          socket.destroy();
        },
      );
      socket.on("error", reject);
    });
    assert.match(protocol, /^TLSv1\.[23]$/);
  });

  it("a three-server NATS cluster losing one server keeps the daemons' registry working", async () => {
    const servers = await startNatsCluster(3);
    const start = (index: number) =>
      startNode(servers, index, token, { cluster: { replicas: 3 }, timeoutMs: 60_000 });
    const a = await start(1);
    const b = await start(2);
    const sdk = await sdkConnect(a.tcpUrl, { token, reconnect: false });
    try {
      const first = await sdk.expose({ local: `127.0.0.1:${echo.port}`, remotePort: 0 });
      const payload = pattern(32 * 1024, 17);
      assertSameBytes(await echoVia("127.0.0.2", first.remotePort, payload), payload, "before");
      await servers[0].stop();
      const after = await echoVia("127.0.0.2", first.remotePort, payload).catch((error) => {
        throw new Error(`${error.message}\n--- node B ---\n${b.stderr().slice(-3000)}`);
      });
      assertSameBytes(after, payload, "after");
      // Claims need a JetStream quorum: two of three servers still make one.
      let second: { remotePort: number } | undefined;
      await waitFor(async () => {
        second = await sdk.expose({ local: `127.0.0.1:${echo.port}`, remotePort: 0 })
          .catch(() => undefined);
        return second !== undefined;
      }, { timeoutMs: 30_000, intervalMs: 500, message: "a claim with one NATS server down" });
      assertSameBytes(await echoVia("127.0.0.2", second!.remotePort, payload), payload, "new");
    } finally {
      await sdk.close();
    }
  });
});

describe("cluster: HTTP tunnels' names are the cluster's", () => {
  const token = newToken("laptop");
  after(cleanup);

  it("a name held through one node is served by every node, and no other client may hold it", async () => {
    const nats = await startNats();
    const options = {
      config: { listen: { http: "127.0.0.1:0" }, http: { domain: "tunnels.test" } },
    };
    const a = await startNode(nats, 1, token, options);
    const b = await startNode(nats, 2, token, options);
    const app = createHttpServer((req, res) =>
      res.end(`app saw ${req.url} via ${req.headers.host}`)
    );
    await new Promise<void>((resolve) => app.listen(0, "127.0.0.1", resolve));
    const local = `127.0.0.1:${(app.address() as { port: number }).port}`;
    const onA = await sdkConnect(a.tcpUrl, { token, reconnect: false });
    const onB = await sdkConnect(b.tcpUrl, { token, reconnect: false });
    try {
      const tunnel = await onA.expose({ local, http: "web" });
      // Node a holds it; node b reaches it over its relay session to a.
      assert.deepEqual(await httpGet(httpAddressOf(a), "web.tunnels.test"), {
        status: 200,
        body: "app saw /hi via web.tunnels.test",
      });
      await waitFor(
        async () => (await httpGet(httpAddressOf(b), "web.tunnels.test")).status === 200,
        {
          message: "node b serving web.tunnels.test",
        },
      );
      assert.equal(
        (await httpGet(httpAddressOf(b), "web.tunnels.test")).body,
        "app saw /hi via web.tunnels.test",
      );
      // A client of node b cannot take it.
      await assert.rejects(onB.expose({ local, http: "web" }), /held by another tunnel/);
      // Released: unknown on both nodes, and free for node b's client.
      await tunnel.close();
      await waitFor(
        async () => (await httpGet(httpAddressOf(b), "web.tunnels.test")).status === 404,
        {
          message: "node b forgetting web.tunnels.test",
        },
      );
      assert.equal((await httpGet(httpAddressOf(a), "web.tunnels.test")).status, 404);
      await onB.expose({ local, http: "web" });
      await waitFor(
        async () => (await httpGet(httpAddressOf(a), "web.tunnels.test")).status === 200,
        {
          message: "node a serving web.tunnels.test through b",
        },
      );

      // A name's policy.http travels with its claim: the other node's front applies it too.
      const passwordHash = await hashPassword("pw");
      await onA.expose({
        local,
        http: "guarded",
        policy: { http: { basicAuth: [{ user: "u", passwordHash }] } },
      });
      const guarded = "guarded.tunnels.test";
      await waitFor(async () => (await httpGet(httpAddressOf(b), guarded)).status === 401, {
        message: "node b refusing guarded.tunnels.test without credentials",
      });
      const auth = { authorization: `Basic ${btoa("u:pw")}` };
      assert.equal((await httpGet(httpAddressOf(b), guarded, auth)).status, 200);
      assert.equal(
        (await httpGet(httpAddressOf(b), guarded, { authorization: `Basic ${btoa("u:no")}` }))
          .status,
        401,
      );
    } finally {
      await Promise.all([onA.close(), onB.close()]);
      app.close();
    }
  });

  it("a relayed request's bodies meet the tunnel's bandwidth on the holding node, a rule put in force meanwhile too", async () => {
    const rate = 256 * 1024;
    const size = 1280 * 1024;
    // Past the bucket's one second of burst and the one read let through before a hold (up to
    // 512 KiB on Bun), the rest cannot arrive faster than the rate: a lower bound on the time.
    const least = (size - rate - 512 * 1024) / rate;
    const app = createHttpServer((req, res) => {
      if (req.method === "POST") {
        let got = 0;
        req.on("data", (d: Uint8Array) => got += d.length);
        req.on("end", () => res.end(String(got)));
      } else {
        const n = Number(new URL(req.url!, "http://x").searchParams.get("n") ?? 2);
        res.setHeader("content-length", n);
        res.end(pattern(n, 5));
      }
    });
    await new Promise<void>((resolve) => app.listen(0, "127.0.0.1", resolve));
    const local = `127.0.0.1:${(app.address() as { port: number }).port}`;
    const nats = await startNats();
    const web = { config: { listen: { http: "127.0.0.1:0" }, http: { domain: "tunnels.test" } } };
    const a = await startNode(nats, 1, token, web);
    const b = await startNode(nats, 2, token, web);
    const onA = await sdkConnect(a.tcpUrl, { token, reconnect: false });
    const atB = httpAddressOf(b);
    const agent = new Agent({ keepAlive: true, maxSockets: 1 });
    /** One request to node b on `agent`: its status, body size, seconds, and whether kept. */
    const timed = (method: string, path: string, body?: Uint8Array) =>
      withTimeout(
        new Promise<{ status: number; bytes: number; seconds: number; reused: boolean }>(
          (resolve, reject) => {
            const started = performance.now();
            const req = httpRequest({
              host: "127.0.0.1",
              port: Number(atB.split(":").pop()),
              method,
              path,
              agent,
              headers: { host: "held.tunnels.test", "content-length": body?.length ?? 0 },
            }, (res) => {
              let bytes = 0;
              res.on("data", (d: Uint8Array) => bytes += d.length);
              res.on("end", () =>
                resolve({
                  status: res.statusCode!,
                  bytes,
                  seconds: (performance.now() - started) / 1000,
                  reused: req.reusedSocket,
                }));
            });
            req.on("error", reject).end(body);
          },
        ),
        60_000,
        `${method} ${path} through node b`,
      );
    try {
      const tunnel = await onA.expose({
        local,
        http: "held",
        policy: { bandwidth: { in: rate } },
      });
      await waitFor(async () => (await httpGet(atB, "held.tunnels.test")).status === 200, {
        message: "node b serving held.tunnels.test",
      });
      // A request body relayed by node b is held on node a, which every byte passes.
      const up = await timed("POST", "/up", pattern(size, 3));
      assert.equal(up.status, 200);
      assert.ok(up.seconds >= least, `${size} bytes up in ${up.seconds} s, at least ${least} s`);
      // A kept connection through node b: its relay stream stays open across requests.
      const first = await timed("GET", "/bytes?n=2");
      assert.equal(first.status, 200);
      await tunnel.setPolicy({ bandwidth: { in: rate, out: rate } });
      const down = await timed("GET", `/bytes?n=${size}`);
      assert.ok(down.reused, "the same kept connection, and relay stream");
      assert.equal(down.bytes, size);
      assert.ok(
        down.seconds >= least,
        `${size} bytes down in ${down.seconds} s, at least ${least} s: the new rule holds it`,
      );
    } finally {
      agent.destroy();
      await onA.close();
      app.close();
    }
  });

  it("an identity provider an operator drops: no node fetches from it for the tunnel, each refusing node answers 403", async () => {
    // The JWKS server, which records what it is asked for (a fetch by either node shows).
    const pair = await generateKeyPair("ES256");
    const jwk = { ...(await exportJWK(pair.publicKey)), kid: "k1", alg: "ES256", use: "sig" };
    const asked: string[] = [];
    const jwks = createHttpServer((req, res) => {
      asked.push(req.url!);
      res.setHeader("content-type", "application/json");
      res.end(JSON.stringify({ keys: [jwk] }));
    });
    await new Promise<void>((resolve) => jwks.listen(0, "127.0.0.1", resolve));
    const provider = `http://127.0.0.1:${(jwks.address() as { port: number }).port}/`;
    const app = createHttpServer((req, res) => res.end(`app ${req.url}`));
    await new Promise<void>((resolve) => app.listen(0, "127.0.0.1", resolve));
    const local = `127.0.0.1:${(app.address() as { port: number }).port}`;
    const nats = await startNats();
    const web = { listen: { http: "127.0.0.1:0" }, http: { domain: "tunnels.test" } };
    const withList = (list: string[]) => ({ config: { ...web, identityProviders: list } });
    const a = await startNode(nats, 1, token, withList([provider]));
    // Node b keeps the provider listed: what it applies is the holding node's record.
    const b = await startNode(nats, 2, token, withList([provider]));
    const onA = await sdkConnect(a.tcpUrl, { token, reconnect: false });
    const [atA, atB] = [httpAddressOf(a), httpAddressOf(b)];
    const host = "idp.tunnels.test";
    const bearer = {
      authorization: `Bearer ${await new SignJWT({ sub: "ann" }).setProtectedHeader({
        alg: "ES256",
        kid: "k1",
      }).setIssuer("https://idp.test").setAudience("api").setExpirationTime("5m").sign(
        pair.privateKey,
      )}`,
    };
    const reload = async (list: string[], node = a) => {
      const from = node.logs().length;
      const index = node === a ? 1 : 2;
      node.writeConfig(nodeConfig(nats, index, token, withList(list)));
      node.signal("SIGHUP");
      await node.waitForLog((e) => e.msg === "configuration reloaded", 15_000, from);
    };
    try {
      await onA.expose({
        local,
        http: "idp",
        policy: {
          http: {
            jwt: { jwksUrl: `${provider}jwks`, issuer: "https://idp.test", audience: "api" },
          },
        },
      });
      // Without a token nothing is fetched: node b knows the route and asks for one.
      await waitFor(async () => (await httpGet(atB, host)).status === 401, {
        message: "node b asking for a token",
      });
      const from = a.logs().length;
      await reload(["https://idp.example.com/"]);
      assert.ok(
        a.logs().slice(from).some((e) =>
          e.msg === "a tunnel's rules are no longer allowed: it refuses every visitor" &&
          /jwksUrl: .* is not in the daemon's identityProviders/.test(String(e.reason))
        ),
        "the holding node says why",
      );
      await waitFor(async () => (await httpGet(atB, host)).status === 403, {
        message: "node b refusing the name once the record changed",
      });
      for (const at of [atA, atB]) {
        const refused = await httpGet(at, host, bearer);
        assert.equal(refused.status, 403);
        assert.match(refused.body, /Forbidden/);
      }
      assert.deepEqual(asked, [], "neither node fetched from the dropped provider");

      // Listed again: the client's rules are back everywhere, and the keys fetched.
      await reload([provider]);
      await waitFor(async () => (await httpGet(atB, host)).status === 401, {
        message: "node b asking for a token again",
      });
      assert.deepEqual(await httpGet(atB, host, bearer), { status: 200, body: "app /hi" });
      assert.deepEqual(await httpGet(atA, host, bearer), { status: 200, body: "app /hi" });
      assert.ok(asked.length >= 1 && asked.every((path) => path === "/jwks"));

      // Node b's own operator drops it, node a's keeps it: b relays nothing that would make it
      // fetch from there (it refuses, 403), while a serves its own visitors.
      await reload(["https://idp.example.com/"], b);
      const askedBefore = asked.length;
      for (const headers of [{}, bearer]) {
        const refused = await httpGet(atB, host, headers);
        assert.equal(refused.status, 403);
      }
      assert.equal(asked.length, askedBefore);
      assert.deepEqual(await httpGet(atA, host, bearer), { status: 200, body: "app /hi" });
    } finally {
      await onA.close();
      app.close();
      jwks.close();
    }
  });

  it("a name's rules hold on the node a visitor enters by, and change there in place; its paths too", async () => {
    const nats = await startNats();
    // Two clients: laptop, and another that may hold no path of laptop's names.
    const otherToken = newToken("other");
    const laptop = {
      name: "laptop",
      token,
      expose: { ports: ["20000-32767", 0] },
      services: { offer: ["*"], use: ["*"] },
    };
    const other = { name: "other", token: otherToken, expose: { ports: ["20000-32767", 0] } };
    const web = { listen: { http: "127.0.0.1:0" }, http: { domain: "tunnels.test" } };
    const options = { config: { ...web, clients: [laptop, other] } };
    const a = await startNode(nats, 1, token, options);
    const b = await startNode(nats, 2, token, options);
    /** An app answering with its name and the path it was asked for. */
    const apps = await Promise.all(["root", "api", "other"].map(async (name) => {
      const server = createHttpServer((req, res) => res.end(`${name} ${req.url}`));
      await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
      return { server, local: `127.0.0.1:${(server.address() as { port: number }).port}` };
    }));
    const onA = await sdkConnect(a.tcpUrl, { token, reconnect: false });
    const [first, second] = [await hashPassword("first pw"), await hashPassword("second pw")];
    const basic = (user: string, password: string) => ({
      authorization: `Basic ${btoa(`${user}:${password}`)}`,
    });
    const [atA, atB] = [httpAddressOf(a), httpAddressOf(b)];
    try {
      const host = "rules.tunnels.test";
      const tunnel = await onA.expose({
        local: apps[0].local,
        http: "rules",
        policy: {
          deny: ["127.0.0.5/32"],
          http: { basicAuth: [{ user: "ann", passwordHash: first }] },
        },
      });
      await waitFor(async () => (await httpGet(atB, host)).status === 401, {
        message: "node b refusing rules.tunnels.test without credentials",
      });
      assert.deepEqual(await httpGet(atB, host, basic("ann", "first pw")), {
        status: 200,
        body: "root /hi",
      });
      // A visitor the address rules refuse: the same 403 page on either node, not a 502.
      const deniedAtA = await httpGet(atA, host, basic("ann", "first pw"), { from: "127.0.0.5" });
      const deniedAtB = await httpGet(atB, host, basic("ann", "first pw"), { from: "127.0.0.5" });
      assert.equal(deniedAtA.status, 403);
      assert.deepEqual(deniedAtB, deniedAtA);

      // The client changes its rules: node b's route meets them, the tunnel the same.
      await tunnel.setPolicy({ http: { basicAuth: [{ user: "ben", passwordHash: second }] } });
      await waitFor(
        async () => (await httpGet(atB, host, basic("ben", "second pw"))).status === 200,
        {
          message: "node b taking the new user",
        },
      );
      assert.equal((await httpGet(atB, host, basic("ann", "first pw"))).status, 401);
      assert.equal((await httpGet(atA, host, basic("ann", "first pw"))).status, 401);
      assert.equal(
        (await httpGet(atB, host, basic("ben", "second pw"), { from: "127.0.0.5" })).status,
        200,
        "the address rule dropped, on the relaying node too",
      );
      const listed = await admin(b, "/v1/tunnels?scope=cluster");
      assert.match(
        JSON.stringify(listed.body),
        /"user":"ben"/,
        "the admin API shows the new rules",
      );
      assert.doesNotMatch(JSON.stringify(listed.body), /"user":"ann"/);

      // The operator's reload on the holding node: its rules narrow the tunnel's, and node b's
      // route meets them too.
      const from = a.logs().length;
      a.writeConfig(nodeConfig(nats, 1, token, {
        config: { ...web, clients: [{ ...laptop, visitors: { deny: ["127.0.0.6/32"] } }, other] },
      }));
      a.signal("SIGHUP");
      await a.waitForLog((e) => e.msg === "configuration reloaded", 15_000, from);
      const ben = basic("ben", "second pw");
      await waitFor(
        async () => (await httpGet(atB, host, ben, { from: "127.0.0.6" })).status === 403,
        {
          message: "node b refusing what the operator's reload denies",
        },
      );
      assert.equal((await httpGet(atA, host, ben, { from: "127.0.0.6" })).status, 403);
      assert.equal((await httpGet(atB, host, ben, { from: "127.0.0.7" })).status, 200);

      // Several local services under one name by path, reached through either node.
      await onA.expose({ local: apps[0].local, http: "parts" });
      await onA.expose({
        local: apps[1].local,
        http: "parts",
        policy: { http: { pathPrefix: "/api" } },
      });
      await onA.expose({
        local: apps[2].local,
        http: "parts",
        policy: { http: { pathPrefix: "/api/other" } },
      });
      const parts = "parts.tunnels.test";
      await waitFor(
        async () =>
          (await httpGet(atB, parts, {}, { path: "/api/other/x" })).body === "other /api/other/x",
        { message: "node b routing parts.tunnels.test/api/other" },
      );
      for (const at of [atA, atB]) {
        assert.equal((await httpGet(at, parts, {}, { path: "/api/7" })).body, "api /api/7");
        assert.equal((await httpGet(at, parts, {}, { path: "/apix" })).body, "root /apix");
        assert.equal(
          (await httpGet(at, parts, {}, { path: "/api/other" })).body,
          "other /api/other",
        );
      }
      // Another client, through the other node, may hold no path of the name, nor the name.
      const intruder = await sdkConnect(b.tcpUrl, { token: otherToken, reconnect: false });
      try {
        for (const policy of [{ http: { pathPrefix: "/mine" } }, {}]) {
          const refused = await intruder.expose({ local: apps[2].local, http: "parts", policy })
            .then(() => "exposed", (error: { code?: string }) => error.code);
          assert.equal(refused, "conflict", JSON.stringify(policy));
        }
      } finally {
        await intruder.close();
      }
      assert.equal((await httpGet(atB, parts, {}, { path: "/mine" })).body, "root /mine");
    } finally {
      await onA.close();
      for (const app of apps) app.server.close();
    }
  });
});

describe("cluster: records a NATS user writes without the cluster key", () => {
  const token = newToken("laptop");
  after(cleanup);

  /** The record a stored value carries (after a signed envelope's first line, if any). */
  function recordIn(value: string): Record<string, unknown> {
    return JSON.parse(value.startsWith("tmkv1 ") ? value.slice(value.indexOf("\n") + 1) : value);
  }

  /** `node`'s refused-record counters from its metrics, by bucket kind. */
  async function refusedOf(node: DaemonProcess): Promise<Record<string, number>> {
    const base = /admin API on (http:\/\/\S+)/.exec(node.stdout())![1];
    const text = await (await fetch(new URL("/metrics", base), {
      headers: { authorization: `Bearer ${ADMIN}` },
    })).text();
    const counts: Record<string, number> = {};
    for (const kind of ["nodes", "ports", "services", "hosts", "tokens"]) {
      const line = new RegExp(
        `^tunnelmux_cluster_registry_operations_total\\{op="unverified_${kind}"\\} (\\d+)$`,
        "m",
      ).exec(text);
      counts[kind] = Number(line?.[1] ?? 0);
    }
    return counts;
  }

  it("a forged node, port, token, host name and service are each refused and counted; the honest nodes serve as if they were not there", async () => {
    const nats = await startNats();
    const echo = await startEchoServer();
    const options = {
      config: { listen: { http: "127.0.0.1:0" }, http: { domain: "tunnels.test" } },
    };
    const n1 = await startNode(nats, 1, token, options);
    const n2 = await startNode(nats, 2, token, options);
    const bare = (kind: string) => bareBucket(nats.url, `tunnelmux-${kind}`);
    const [nodesBucket, portsBucket, servicesBucket, hostsBucket, tokensBucket] = await Promise
      .all(["nodes", "ports", "services", "hosts", "tokens"].map(bare));
    // Forged records name a live node's run, as a genuine record of it would.
    const run = String(recordIn((await nodesBucket.get("n2"))!.value).run);
    const route = { node: "n2", run, session: "s-forged", tunnel: "t-forged", client: "intruder" };
    const held = { owner: "client:intruder", shared: false, client: "intruder", routes: [route] };
    // A port clients may ask for, free on both nodes' tunnel addresses (below the ephemeral range).
    let port = 0;
    for (let i = 0; i < 50 && port === 0; i++) {
      const candidate = 20000 + Math.floor(Math.random() * 12000);
      if (await canBind(candidate, "127.0.0.1") && await canBind(candidate, "127.0.0.2")) {
        port = candidate;
      }
    }
    assert.ok(port > 0, "a port free on both addresses");
    const forgedToken = newToken("forged");
    await nodesBucket.put(
      "ghost",
      JSON.stringify({
        node: "ghost",
        run: "r1",
        advertise: "127.0.0.1:1",
        version: "0.0.0",
        startedAt: Date.now(),
        at: Date.now(),
        sessions: 0,
        tunnels: 0,
      }),
    );
    await portsBucket.put(
      `port-${port}`,
      JSON.stringify({ bindHost: "127.0.0.1", port, ...held }),
    );
    await hostsBucket.put(
      "host-forged.tunnels.test",
      JSON.stringify({ host: "forged.tunnels.test", passthrough: false, ...held }),
    );
    await servicesBucket.put("svc-forged-svc", JSON.stringify({ name: "forged-svc", ...held }));
    await tokensBucket.put(
      "name-forged-bot",
      JSON.stringify({
        id: "tok_0123456789abcdef",
        name: "forged-bot",
        hash: hashToken(forgedToken),
        scopes: { expose: { ports: ["20000-32767", 0] } },
        createdAt: Date.now(),
        expiresAt: null,
      }),
    );
    const keys = [
      ["nodes", "ghost"],
      ["ports", `port-${port}`],
      ["hosts", "host-forged.tunnels.test"],
      ["services", "svc-forged-svc"],
      ["tokens", "name-forged-bot"],
    ];
    for (const node of [n1, n2]) {
      for (const [kind, key] of keys) {
        await node.waitForLog((e) =>
          e.msg === REFUSED && e.bucket === `tunnelmux-${kind}` && e.key === key
        );
      }
    }

    // No node "ghost": neither logged up nor listed, and /v1/cluster waits for nobody.
    for (const node of [n1, n2]) {
      assert.ok(!node.logs().some((e) => e.msg === "cluster node up" && e.peer === "ghost"));
      const cluster = (await admin(node, "/v1/cluster")).body.cluster as {
        nodes: { node: string }[];
        missing: string[];
      };
      assert.deepEqual(cluster.nodes.map((n) => n.node), ["n1", "n2"]);
      assert.deepEqual(cluster.missing, []);
    }

    // The forged token opens no session.
    for (const node of [n1, n2]) {
      await assert.rejects(
        sdkConnect(node.tcpUrl, { token: forgedToken, reconnect: false }),
        (e: Error & { code?: string }) => e.code === "unauthorized",
      );
    }

    const onA = await sdkConnect(n1.tcpUrl, { token, reconnect: false });
    const onB = await sdkConnect(n2.tcpUrl, { token, reconnect: false });
    const app = createHttpServer((req, res) => res.end(`app saw ${req.headers.host}`));
    await new Promise<void>((resolve) => app.listen(0, "127.0.0.1", resolve));
    const local = `127.0.0.1:${(app.address() as { port: number }).port}`;
    try {
      // The forged port claim keeps no one from the port; both nodes serve the genuine one.
      const tunnel = await onA.expose({ local: echo.address, remotePort: port });
      assert.equal(tunnel.remotePort, port);
      const payload = pattern(1000, 5);
      assertSameBytes(await echoVia("127.0.0.1", port, payload), payload, "at the owner");
      assertSameBytes(await echoVia("127.0.0.2", port, payload), payload, "relayed by n2");

      // The forged host name is not routed to (404, not a relay to n2), and can be held.
      assert.equal((await httpGet(httpAddressOf(n1), "forged.tunnels.test")).status, 404);
      await onA.expose({ local, http: "forged" });
      await waitFor(
        async () => (await httpGet(httpAddressOf(n2), "forged.tunnels.test")).status === 200,
        { message: "n2 serving forged.tunnels.test, held through n1" },
      );

      // The forged service holds the name for no one: offered on n1, used from n2.
      await onA.offer("forged-svc", echo.address);
      const user = await startClient({
        server: n2.tcpUrl,
        token,
        args: ["--use", "127.0.0.1:0=forged-svc"],
      });
      const entry = await user.waitForLog((e) => e.msg === "using service");
      const servicePort = Number(String(entry.listen).split(":").pop());
      assertSameBytes(
        await echoVia("127.0.0.1", servicePort, payload),
        payload,
        "the genuine offer through n2",
      );
      await user.stop();
    } finally {
      await Promise.all([onA.close(), onB.close()]);
      app.close();
    }

    const counts = { n1: await refusedOf(n1), n2: await refusedOf(n2) };
    console.log(
      `cluster-figure ${JSON.stringify({ figure: "forged_records_refused", value: counts })}`,
    );
    for (const node of Object.values(counts)) {
      for (const kind of ["nodes", "ports", "services", "hosts", "tokens"]) {
        assert.ok(node[kind] >= 1, `${kind}: ${JSON.stringify(counts)}`);
      }
    }
  });
});

describe("cluster: rotating the cluster key", () => {
  const token = newToken("laptop");
  after(cleanup);

  /** `node`'s `/v1/cluster`: node names, those that did not answer, peers connected. */
  async function clusterOf(node: DaemonProcess) {
    const cluster = (await admin(node, "/v1/cluster")).body.cluster as {
      nodes: { node: string }[];
      missing: string[];
      peers: { node: string; connected: boolean }[];
    };
    return {
      nodes: cluster.nodes.map((n) => n.node),
      missing: cluster.missing,
      connected: cluster.peers.filter((p) => p.connected).map((p) => p.node),
    };
  }

  it("a node with [new, old] and one with [old] work as one; after the roll, a node with only the old key is refused and its records ignored", async () => {
    const nats = await startNats();
    const echo = await startEchoServer();
    const OLD = KEY;
    const NEW = "cluster-key-after-the-rotation-0123456789";
    const n1 = await startNode(nats, 1, token, {
      key: NEW,
      env: { TUNNELMUX_CLUSTER_PREVIOUS_KEYS: OLD },
    });
    const n2 = await startNode(nats, 2, token, { key: OLD });
    // Each sees the other, answers its signed queries, and they hold a relay session.
    for (const [node, peer] of [[n1, "n2"], [n2, "n1"]] as const) {
      await waitFor(async () => {
        const seen = await clusterOf(node);
        return seen.nodes.length === 2 && seen.missing.length === 0 &&
          seen.connected.includes(peer);
      }, `${peer} in the cluster as node ${node === n1 ? "n1" : "n2"} sees it`);
    }
    const onA = await sdkConnect(n1.tcpUrl, { token, reconnect: false });
    const onB = await sdkConnect(n2.tcpUrl, { token, reconnect: false });
    try {
      // Relayed both ways: a tunnel held on either node is reached through the other.
      const payload = pattern(1000, 13);
      const onOldNode = await onB.expose({ local: echo.address });
      assertSameBytes(await echoVia("127.0.0.1", onOldNode.remotePort, payload), payload, "via n1");
      const onNewNode = await onA.expose({ local: echo.address });
      assertSameBytes(await echoVia("127.0.0.2", onNewNode.remotePort, payload), payload, "via n2");
    } finally {
      await Promise.all([onA.close(), onB.close()]);
    }
    // A token minted on either node works on the other.
    for (const [on, other, name] of [[n1, n2, "from-n1"], [n2, n1, "from-n2"]] as const) {
      const minted = await admin(on, "/v1/tokens", {
        method: "POST",
        body: { name: `rotating-${name}`, expose: { ports: ["20000-32767", 0] } },
      });
      assert.equal(minted.status, 201, JSON.stringify(minted.body));
      await waitFor(
        () =>
          sdkConnect(other.tcpUrl, { token: String(minted.body.token), reconnect: false })
            .then((client) => client.close().then(() => true), () => false),
        `the token minted ${name} to work on the other node`,
      );
    }

    // The roll: n1 comes back with the new key alone (as n3), and n2 was never given it.
    await n1.kill();
    const n3 = await startNode(nats, 3, token, { key: NEW });
    await n3.waitForLog((e) =>
      e.msg === REFUSED && e.bucket === "tunnelmux-nodes" && e.key === "n2" &&
      e.reason === "another key"
    );
    await waitFor(async () => (await clusterOf(n3)).nodes.join() === "n3", "n3 alone, n1 expired");
    assert.deepEqual((await clusterOf(n2)).nodes, ["n2"]);
    // A port n2's client holds keeps no client of n3 from it.
    const onOld = await sdkConnect(n2.tcpUrl, { token, reconnect: false });
    const onNew = await sdkConnect(n3.tcpUrl, { token, reconnect: false });
    try {
      const held = await onOld.expose({ local: echo.address });
      await n3.waitForLog((e) => e.msg === REFUSED && e.key === `port-${held.remotePort}`);
      const taken = await onNew.expose({ local: echo.address, remotePort: held.remotePort });
      assert.equal(taken.remotePort, held.remotePort);
    } finally {
      await Promise.all([onOld.close(), onNew.close()]);
    }
    // A token minted on n2 does not authenticate on n3.
    const old = await admin(n2, "/v1/tokens", {
      method: "POST",
      body: { name: "old-key-bot", expose: { ports: ["20000-32767", 0] } },
    });
    assert.equal(old.status, 201, JSON.stringify(old.body));
    await n3.waitForLog((e) => e.msg === REFUSED && e.key === "name-old-key-bot");
    await assert.rejects(
      sdkConnect(n3.tcpUrl, { token: String(old.body.token), reconnect: false }),
      (e: Error & { code?: string }) => e.code === "unauthorized",
    );
    for (const [node, peer] of [[n3, "n2"], [n2, "n3"]] as const) {
      assert.ok(!node.logs().some((e) => e.msg === "cluster node up" && e.peer === peer));
      assert.ok(!node.logs().some((e) => e.msg === "relay session up" && e.peer === peer));
    }
  });
});
