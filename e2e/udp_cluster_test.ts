// UDP tunnels in a cluster: two daemon processes joined through a real nats-server, a client
// through the SDK on node 1, real UDP sockets as visitors (from distinct loopback addresses, for
// the visitor policy) and as the local service. Nodes share this machine, so each binds tunnel
// ports on its own loopback address (cluster.tunnelHost 127.0.0.N) with the same port numbers.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { type Client, connect } from "../client/mod.ts";
import { openUdp, type UdpSocket } from "../transport/udp.ts";
import {
  cleanup,
  daemonConfig,
  type DaemonProcess,
  newToken,
  startClient,
  startDaemon,
  waitFor,
} from "../testing/mod.ts";
import { type NatsServer, startNats } from "../testing/nats.ts";

const KEY = "cluster-key-for-the-udp-e2e-tests-012345";
const ADMIN = "admin-token-for-the-udp-cluster-tests-01";
const GROUP_KEY = "group-key-for-the-udp-cluster-tests-01";

/**
 * Node `index` of the cluster on `nats`: clients `laptop` and `desk` (both may join group `dns`),
 * ports on 127.0.0.`index`.
 */
async function startNode(
  nats: NatsServer,
  index: number,
  tokens: { laptop: string; desk: string },
  more: Record<string, unknown> = {},
): Promise<DaemonProcess> {
  return await startDaemon({
    config: daemonConfig([
      {
        name: "laptop",
        token: tokens.laptop,
        expose: { ports: ["20000-32767", 0] },
        groups: ["dns"],
      },
      { name: "desk", token: tokens.desk, expose: { ports: ["20000-32767", 0] }, groups: ["dns"] },
    ], {
      groups: { dns: { key: GROUP_KEY, balance: "round_robin" } },
      ...more,
      cluster: {
        servers: [nats.url],
        node: `n${index}`,
        // Port 0: the node binds a free port and advertises the one it got.
        listen: "127.0.0.1:0",
        tunnelHost: `127.0.0.${index}`,
        presenceTtlMs: 2_000,
      },
    }),
    env: { TUNNELMUX_CLUSTER_KEY: KEY, TUNNELMUX_ADMIN_TOKEN: ADMIN },
    args: ["--listen-admin", "127.0.0.1:0"],
  });
}

/** Asks node `daemon`'s admin API for `path`. */
async function adminGet(daemon: DaemonProcess, path: string): Promise<Response> {
  const base = await waitFor(() => /admin API on (http:\/\/\S+)/.exec(daemon.stdout())?.[1], {
    timeoutMs: 15_000,
    message: "the admin API's address on stdout",
  });
  return await fetch(new URL(path, base), { headers: { authorization: `Bearer ${ADMIN}` } });
}

/** Node `daemon`'s relays, as its admin API lists them. */
async function relaysOf(daemon: DaemonProcess): Promise<Record<string, unknown>[]> {
  const body = await (await adminGet(daemon, "/v1/cluster")).json();
  return body.cluster.relays;
}

/** One sample of node `daemon`'s `/metrics`, by its name and labels as written. */
async function metricOf(daemon: DaemonProcess, series: string): Promise<number> {
  const text = await (await adminGet(daemon, "/metrics")).text();
  const line = text.split("\n").find((l) => l.startsWith(`${series} `));
  assert.ok(line, `${series} in /metrics`);
  return Number(line.slice(series.length + 1));
}

/** A UDP echo service: each datagram goes back as it came. */
async function echoServer(): Promise<UdpSocket> {
  const server: UdpSocket = await openUdp({
    onMessage: (bytes, remote) => void server.send(bytes, remote.hostname, remote.port),
  });
  return server;
}

/** A UDP port of 20000-32767 free on 127.0.0.1 and 127.0.0.2 now; a bounded number of tries. */
async function freeOnBoth(): Promise<number> {
  for (let i = 0; i < 50; i++) {
    const port = 20000 + Math.floor(Math.random() * 12768);
    const probes = await Promise.all(
      ["127.0.0.1", "127.0.0.2"].map((hostname) =>
        openUdp({ hostname, port, onMessage: () => {} }).catch(() => undefined)
      ),
    );
    for (const probe of probes) probe?.close();
    if (probes.every((p) => p !== undefined)) {
      // A closed socket lets go of its port within a turn or so.
      await new Promise((resolve) => setTimeout(resolve, 50));
      return port;
    }
  }
  throw new Error("no UDP port of 20000-32767 free on both addresses");
}

/** A UDP service that answers each datagram with its `name`. */
async function namedServer(name: string): Promise<UdpSocket> {
  const answer = new TextEncoder().encode(name);
  const server: UdpSocket = await openUdp({
    onMessage: (_bytes, remote) => void server.send(answer, remote.hostname, remote.port),
  });
  return server;
}

/** A visitor's socket on `hostname` and the datagrams it received. */
async function visitor(hostname: string): Promise<{ socket: UdpSocket; got: Uint8Array[] }> {
  const got: Uint8Array[] = [];
  const socket = await openUdp({ hostname, onMessage: (bytes) => void got.push(bytes) });
  return { socket, got };
}

describe("cluster: UDP tunnels relayed between nodes", () => {
  const tokens = { laptop: newToken("laptop"), desk: newToken("desk") };
  let nats: NatsServer;
  let echo: UdpSocket;
  const nodes: DaemonProcess[] = [];
  let laptop: Client;
  let desk: Client;

  before(async () => {
    nats = await startNats();
    echo = await echoServer();
    // Node 2 keeps 2 flows per relayed port (as per tunnel): its limits, not node 1's.
    nodes.push(await startNode(nats, 1, tokens));
    nodes.push(await startNode(nats, 2, tokens, { limits: { udpFlowsPerTunnel: 2 } }));
    laptop = await connect(nodes[0].tcpUrl, { token: tokens.laptop, reconnect: false });
    desk = await connect(nodes[1].tcpUrl, { token: tokens.desk, reconnect: false });
  });
  after(async () => {
    await laptop?.close();
    await desk?.close();
    echo?.close();
    await cleanup();
  });

  it("a visitor at the node not holding the tunnel gets its replies, datagram by datagram", async () => {
    const tunnel = await laptop.expose({
      protocol: "udp",
      local: `127.0.0.1:${echo.local.port}`,
      policy: { deny: ["127.0.0.5/32"] },
    });
    const port = tunnel.remotePort;
    const v = await visitor("127.0.0.6");
    try {
      // Node 2 relays once it has seen the claim: ask until the first answer comes (bounded).
      await waitFor(() => {
        v.socket.send(new TextEncoder().encode("hello"), "127.0.0.2", port);
        return v.got.length > 0;
      }, { timeoutMs: 20_000, intervalMs: 200, message: "a reply through node 2" });
      // Late echoes of the other hellos may still come: those are told apart by their size.
      const ours = () => v.got.filter((d) => d.length !== 5);
      const sizes = [1, 1200, 0, 300, 1400];
      for (const [i, size] of sizes.entries()) {
        v.socket.send(new Uint8Array(size).fill(i + 1), "127.0.0.2", port);
      }
      await waitFor(() => ours().length >= sizes.length, {
        timeoutMs: 15_000,
        message: "every datagram echoed",
      });
      assert.deepEqual(ours().map((d) => d.length), sizes, "boundaries kept, in order");
      for (const [i, d] of ours().entries()) assert.ok(d.every((b) => b === i + 1));
      const relay = (await relaysOf(nodes[1])).find((r) => r.port === port);
      assert.equal(relay?.protocol, "udp");
      assert.equal(relay?.node, "n1");
      assert.equal((relay?.udp as { flows: number }).flows, 1, "one flow relayed");

      // A denied visitor's datagrams are dropped on node 2 and counted there.
      const denied = await visitor("127.0.0.5");
      try {
        await waitFor(async () => {
          denied.socket.send(new TextEncoder().encode("let me in"), "127.0.0.2", port);
          const r = (await relaysOf(nodes[1])).find((r) => r.port === port);
          return (r?.udp as { drops: { refused: number } }).drops.refused > 0;
        }, { timeoutMs: 15_000, intervalMs: 200, message: "a refused drop counted on node 2" });
        const r = (await relaysOf(nodes[1])).find((r) => r.port === port);
        assert.equal((r?.udp as { flows: number }).flows, 1, "no flow opened for it");
        assert.equal(denied.got.length, 0);
      } finally {
        denied.socket.close();
      }

      // A second flow fits node 2's limit; a third visitor's datagram is dropped and counted.
      const second = await visitor("127.0.0.8");
      const third = await visitor("127.0.0.9");
      try {
        v.got.length = 0;
        await waitFor(() => {
          second.socket.send(new Uint8Array([8]), "127.0.0.2", port);
          return second.got.length > 0;
        }, { timeoutMs: 15_000, intervalMs: 200, message: "a second flow's echo" });
        await waitFor(async () => {
          third.socket.send(new Uint8Array([9]), "127.0.0.2", port);
          const r = (await relaysOf(nodes[1])).find((r) => r.port === port);
          return (r?.udp as { drops: { flow_limit: number } }).drops.flow_limit > 0;
        }, { timeoutMs: 15_000, intervalMs: 200, message: "a flow_limit drop counted on node 2" });
        const r = (await relaysOf(nodes[1])).find((r) => r.port === port);
        assert.equal((r?.udp as { flowsOpen: number }).flowsOpen, 2);
      } finally {
        second.socket.close();
        third.socket.close();
      }
    } finally {
      v.socket.close();
    }

    // The tunnel closes: its port is freed cluster-wide, so another client may take it.
    await tunnel.close();
    await waitFor(
      () =>
        desk.expose({ protocol: "udp", remotePort: port, local: "127.0.0.1:9" }).then(
          (t) => t.close().then(() => true),
          () => false,
        ),
      { timeoutMs: 20_000, intervalMs: 200, message: "the UDP port freed for another client" },
    );
  });

  it("rules changed in place reach the relaying node: a visitor it refused gets through", async () => {
    const tunnel = await laptop.expose({
      protocol: "udp",
      local: `127.0.0.1:${echo.local.port}`,
      policy: { deny: ["127.0.0.5/32"] },
    });
    const port = tunnel.remotePort;
    const hello = new TextEncoder().encode("hello");
    const allowed = await visitor("127.0.0.6");
    const denied = await visitor("127.0.0.5");
    try {
      await waitFor(() => {
        allowed.socket.send(hello, "127.0.0.2", port);
        return allowed.got.length > 0;
      }, { timeoutMs: 20_000, intervalMs: 200, message: "a reply through node 2" });
      await waitFor(async () => {
        denied.socket.send(hello, "127.0.0.2", port);
        const r = (await relaysOf(nodes[1])).find((r) => r.port === port);
        return (r?.udp as { drops: { refused: number } }).drops.refused > 0;
      }, { timeoutMs: 15_000, intervalMs: 200, message: "node 2 refusing 127.0.0.5" });
      assert.equal(denied.got.length, 0);

      await tunnel.setPolicy({});
      await waitFor(() => {
        denied.socket.send(hello, "127.0.0.2", port);
        return denied.got.length > 0;
      }, { timeoutMs: 15_000, intervalMs: 200, message: "node 2 letting 127.0.0.5 in" });
    } finally {
      allowed.socket.close();
      denied.socket.close();
      await tunnel.close();
    }
  });

  it("TCP and UDP on one port number are held by different clients; UDP conflicts per protocol", async () => {
    const udp = await laptop.expose({ protocol: "udp", local: `127.0.0.1:${echo.local.port}` });
    const port = udp.remotePort;
    const tcp = await desk.expose({ remotePort: port, local: "127.0.0.1:9" });
    assert.equal(tcp.remotePort, port, "TCP of the same number, another client, another node");
    await assert.rejects(
      desk.expose({ protocol: "udp", remotePort: port, local: "127.0.0.1:9" }),
      (e: Error & { code?: string }) => e.code === "port_in_use",
      "the UDP port is another client's",
    );
    await tcp.close();
    await udp.close();
  });
});

/** Sends `text` from `v` to `host:port` until it comes back (bounded), as the first of a flow. */
async function echoedVia(
  v: { socket: UdpSocket; got: Uint8Array[] },
  host: string,
  port: number,
  text: string,
): Promise<void> {
  const bytes = new TextEncoder().encode(text);
  const back = () => v.got.some((d) => new TextDecoder().decode(d) === text);
  await waitFor(() => {
    if (back()) return true;
    v.socket.send(bytes, host, port);
    return false;
  }, { timeoutMs: 30_000, intervalMs: 200, message: `"${text}" echoed through ${host}:${port}` });
}

describe("cluster: a UDP port of an --ha 2 client", () => {
  const tokens = { laptop: newToken("laptop"), desk: newToken("desk") };
  after(cleanup);

  it("keeps its UDP port through the loss of a node, served through the others", async () => {
    const nats = await startNats();
    const echo = await echoServer();
    const nodes: DaemonProcess[] = [];
    for (let i = 1; i <= 3; i++) nodes.push(await startNode(nats, i, tokens));
    const v = await visitor("127.0.0.7");
    try {
      const client = await startClient({
        server: nodes.map((n) => n.tcpUrl).join(","),
        token: tokens.laptop,
        args: ["--ha", "2", "--expose-udp", `0=127.0.0.1:${echo.local.port}`],
      });
      const whole = await client.waitForLog((e) => e.msg === "whole: a session on each node");
      assert.equal(whole.nodes, "n1,n2");
      const { port } = await client.waitForTunnel();
      await echoedVia(v, "127.0.0.3", port, "before, through node 3");
      await echoedVia(v, "127.0.0.2", port, "before, at node 2");
      const from = client.logs().length;
      await nodes[0].kill();
      const again = await client.waitForLog(
        (e) => e.msg === "whole: a session on each node",
        30_000,
        from,
      );
      assert.equal(again.nodes, "n2,n3");
      await echoedVia(v, "127.0.0.2", port, "after, at node 2");
      await echoedVia(v, "127.0.0.3", port, "after, at node 3");
      await client.stop();
    } finally {
      v.socket.close();
      echo.close();
    }
  });
});

describe("cluster: a group's UDP port", () => {
  const tokens = { laptop: newToken("laptop"), desk: newToken("desk") };
  after(cleanup);

  it("a node without a member gives each new flow to a member in turn, and moves a gone member's", async () => {
    const nats = await startNats();
    const services = [await namedServer("A"), await namedServer("B")];
    const nodes: DaemonProcess[] = [];
    for (let i = 1; i <= 2; i++) nodes.push(await startNode(nats, i, tokens));
    // Both members on node 1; node 2 has none and relays each flow to one of them.
    const laptop = await connect(nodes[0].tcpUrl, { token: tokens.laptop, reconnect: false });
    const desk = await connect(nodes[0].tcpUrl, { token: tokens.desk, reconnect: false });
    const visitors = await Promise.all([0, 1, 2, 3].map(() => visitor("127.0.0.8")));
    const text = (d: Uint8Array) => new TextDecoder().decode(d);
    /** Sends from visitor `i` to node 2 and waits for the answer: the member that served it. */
    const ask = async (i: number) => {
      const before = visitors[i].got.length;
      visitors[i].socket.send(new Uint8Array([i]), "127.0.0.2", port);
      return text(await waitFor(() => visitors[i].got[before], `an answer to visitor ${i}`));
    };
    let port = 0;
    try {
      const group = { protocol: "udp" as const, group: "dns", groupKey: GROUP_KEY };
      const a = await laptop.expose({ ...group, remotePort: 0, local: "127.0.0.1:9" }).then(
        () => assert.fail("a group's UDP port is named"),
        (error: Error & { code?: string }) => error,
      );
      assert.equal((a as { code?: string }).code, "not_allowed");
      port = await freeOnBoth();
      const first = await laptop.expose({
        ...group,
        remotePort: port,
        local: `127.0.0.1:${services[0].local.port}`,
      });
      await desk.expose({
        ...group,
        remotePort: port,
        local: `127.0.0.1:${services[1].local.port}`,
      });
      const relays = async () =>
        (await relaysOf(nodes[1])).filter((r) => r.port === port && r.bound === true);
      await waitFor(async () => (await relays()).length === 2, {
        timeoutMs: 20_000,
        intervalMs: 200,
        message: "node 2 to relay to both members",
      });
      const served: string[] = [];
      for (let i = 0; i < visitors.length; i++) served.push(await ask(i));
      assert.deepEqual([...served].sort(), ["A", "A", "B", "B"], "in turn");
      for (let round = 0; round < 3; round++) {
        for (let i = 0; i < visitors.length; i++) assert.equal(await ask(i), served[i]);
      }
      // The laptop's member goes: node 2's relay to it ends its flows; the next datagram of each
      // of its visitors opens a flow to the member left.
      await first.close();
      await waitFor(async () => (await relays()).length === 1, {
        timeoutMs: 20_000,
        intervalMs: 200,
        message: "node 2 to drop the relay to the laptop's member",
      });
      for (let i = 0; i < visitors.length; i++) assert.equal(await ask(i), "B");
      // Node 2 counts what it relayed, closed relays included, as UDP kind relay.
      const relayed = await metricOf(nodes[1], 'tunnelmux_udp_flows_total{kind="relay"}');
      assert.equal(relayed, 4 + 2);
      const datagrams = await metricOf(
        nodes[1],
        'tunnelmux_udp_datagrams_total{kind="relay",direction="in"}',
      );
      assert.equal(datagrams, 4 * 5);
    } finally {
      for (const v of visitors) v.socket.close();
      await laptop.close();
      await desk.close();
      for (const s of services) s.close();
    }
  });
});
