// UDP reverse tunnels end to end: a real daemon, the SDK and the `tunnelmux client` program as
// clients, real UDP sockets as visitors (from distinct loopback addresses, 127.0.0.2, .3, …, for
// the visitor policy) and as local services, and `dig` asking a small DNS responder through
// `--expose-udp`. What the daemon counts is read through its admin API and /metrics.
import { startDnsResponder, startUdpEcho } from "../testing/udp_servers.ts";
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { type Client, connect } from "../client/mod.ts";
import type { Daemon } from "../daemon/daemon.ts";
import { createAdminApp } from "../daemon/admin/app.ts";
import { renderMetrics } from "../daemon/admin/api/metrics.ts";
import { hashToken } from "../daemon/config/token_hash.ts";
import { openUdp, type UdpSocket } from "../transport/udp.ts";
import { MAX_UDP_DATAGRAM } from "../tunnel/udp/udp_framing.ts";
import { runCommand } from "../testing/command.ts";
import { cleanup, startClient } from "../testing/process.ts";
import { waitFor } from "../testing/wait.ts";
import { pattern } from "../util/bytes/bytes.ts";
import { Logger } from "../util/log.ts";
import { portOf, startDaemonInProcess } from "./_in_process_daemon.ts";

const TOKEN = "udp-tunnels-alice-0123456789abcdef";
const ADMIN = "udp-tunnels-admin-0123456789abcdef";

/** A visitor's socket on `hostname` and the datagrams it received. */
async function visitor(hostname = "127.0.0.1"): Promise<{ socket: UdpSocket; got: Uint8Array[] }> {
  const got: Uint8Array[] = [];
  const socket = await openUdp({ hostname, onMessage: (bytes) => void got.push(bytes) });
  return { socket, got };
}

/** A socket bound to UDP `port` once it is free (a closed socket lets go of it within a turn or so). */
function bindable(port: number): Promise<UdpSocket> {
  return waitFor(
    () => openUdp({ port, onMessage: () => {} }).catch(() => undefined),
    `UDP port ${port} to be free`,
  );
}

/** The admin API of `daemon`, asked in process. */
function adminOf(daemon: Daemon) {
  const app = createAdminApp(daemon, {
    hostname: "127.0.0.1",
    port: 7081,
    log: new Logger({ level: "error", format: "json", sink: () => {} }),
    tokenHash: () => hashToken(ADMIN),
  });
  return async (path: string) => {
    const response = await app.request(path, {
      headers: { host: "127.0.0.1:7081", authorization: `Bearer ${ADMIN}` },
    });
    assert.equal(response.status, 200, path);
    return await response.json();
  };
}

/** One sample of `/metrics`, by its name and labels as written (`{kind="tunnel",…}`). */
function sample(text: string, series: string): number {
  const line = text.split("\n").find((l) => l.startsWith(`${series} `));
  assert.ok(line, `${series} in /metrics`);
  return Number(line.slice(series.length + 1));
}

const digMissing = await runCommand("dig", ["-v"], { timeoutMs: 10_000 })
  .then((r) => r.code !== 0, () => true);

describe("UDP reverse tunnels", () => {
  let daemon: Daemon;
  let client: Client;
  let echo: UdpSocket;
  let dns: UdpSocket;
  const config = {
    listen: { tcp: "127.0.0.1:0", websocket: null, admin: null },
    clients: [{
      name: "alice",
      token: TOKEN,
      expose: { ports: [0, "20000-32767"], bindHosts: ["127.0.0.1", "::1"] },
      forward: ["127.0.0.1:1-65535"],
    }],
  };

  before(async () => {
    echo = await startUdpEcho();
    dns = await startDnsResponder();
    daemon = await startDaemonInProcess(config);
    client = await connect(`tcp://127.0.0.1:${portOf(daemon.addresses.tcp)}`, {
      token: TOKEN,
      reconnect: false,
    });
  });
  after(async () => {
    await cleanup();
    await client?.close();
    await daemon?.stop();
    echo?.close();
    dns?.close();
  });

  const held = (id: string) => daemon.registry.tunnels().find((t) => t.id === id);

  it("dig resolves through `tunnelmux client --expose-udp`; the admin API and /metrics count it", {
    skip: digMissing && "dig is not installed (Debian: apt-get install dnsutils)",
  }, async () => {
    const program = await startClient({
      server: `tcp://127.0.0.1:${portOf(daemon.addresses.tcp)}`,
      token: TOKEN,
      args: ["--expose-udp", `0=127.0.0.1:${dns.local.port}`],
    });
    const { port, entry } = await program.waitForTunnel();
    assert.equal(entry.protocol, "udp");
    const result = await runCommand("dig", [
      "@127.0.0.1",
      "-p",
      String(port),
      "+tries=1",
      "+time=5",
      "+short",
      "tunnel.test",
      "A",
    ], { timeoutMs: 20_000 });
    assert.equal(result.code, 0, result.stderr);
    assert.equal(result.stdout.trim(), "192.0.2.7");

    const ask = adminOf(daemon);
    const { tunnels } = await ask("/v1/tunnels") as {
      tunnels: { id: string; bind: string; protocol: string; udp: Record<string, unknown> }[];
    };
    const listed = tunnels.find((t) => t.bind === `127.0.0.1:${port}`);
    assert.ok(listed, JSON.stringify(tunnels));
    assert.equal(listed.protocol, "udp");
    const udp = listed.udp as { datagramsFromVisitors: number; datagramsToVisitors: number };
    assert.equal(udp.datagramsFromVisitors, 1);
    assert.equal(udp.datagramsToVisitors, 1);
    const metrics = renderMetrics(daemon);
    assert.ok(sample(metrics, 'tunnelmux_udp_datagrams_total{kind="tunnel",direction="in"}') >= 1);
    assert.ok(sample(metrics, 'tunnelmux_udp_flows_total{kind="tunnel"}') >= 1);

    // The client's session ends: its tunnel goes, and with it the UDP port.
    await program.kill();
    await waitFor(() => !held(listed.id), "the tunnel to go with its session");
    (await bindable(port)).close();
    assert.ok(
      sample(
        renderMetrics(daemon),
        'tunnelmux_udp_datagrams_total{kind="tunnel",direction="in"}',
      ) >=
        1,
      "a closed tunnel's datagrams stay counted",
    );
  });

  it("keeps datagram boundaries: 0, 1, 1200 and the largest bytes come back whole", async () => {
    const events: { type: string; fields: Record<string, unknown> }[] = [];
    const unsubscribe = daemon.events.subscribe((e) => void events.push(e));
    const tunnel = await client.expose({ protocol: "udp", local: `127.0.0.1:${echo.local.port}` });
    assert.equal(tunnel.protocol, "udp");
    const v = await visitor();
    try {
      const sizes = [0, 1, 1200, MAX_UDP_DATAGRAM];
      const sent = sizes.map((size, i) => pattern(size, i));
      for (const bytes of sent) {
        assert.ok(v.socket.send(bytes, "127.0.0.1", tunnel.remotePort));
        // One at a time: loopback keeps them, and the order of replies is then known.
        await waitFor(
          () => v.got.length === sent.indexOf(bytes) + 1,
          `the ${bytes.length}-byte reply`,
        );
      }
      assert.deepEqual(v.got.map((b) => b.length), sizes);
      for (let i = 0; i < sizes.length; i++) assert.deepEqual(v.got[i], sent[i]);
      const counters = held(tunnel.id)!.udp!;
      assert.equal(counters.datagramsIn, 4);
      assert.equal(counters.datagramsOut, 4);
      assert.equal(counters.bytesIn, 1 + 1200 + MAX_UDP_DATAGRAM);
      assert.equal(tunnel.udp!.flows, 1);
    } finally {
      v.socket.close();
      await tunnel.close();
      unsubscribe();
    }
    // The feed tells it up as UDP, and down with its datagrams.
    const mine = events.filter((e) => e.fields.tunnel === tunnel.id);
    assert.deepEqual(mine.map((e) => e.type), ["tunnel_up", "tunnel_down"]);
    assert.equal(mine[0].fields.protocol, "udp");
    assert.equal(mine[1].fields.datagramsFromVisitors, 4);
    assert.equal(mine[1].fields.datagramsToVisitors, 4);
    assert.equal(mine[1].fields.datagramsDropped, 0);
  });

  it("drops a datagram larger than the largest, counted too_large, and the flow goes on", async () => {
    // Over IPv6 a datagram may be larger than IPv4's largest: the daemon does not carry it.
    const echo6 = await startUdpEcho("::1").catch(() => undefined);
    if (!echo6) return; // no IPv6 loopback here
    const tunnel = await client.expose({
      protocol: "udp",
      bindHost: "::1",
      local: `[::1]:${echo6.local.port}`,
    });
    const v = await visitor("::1");
    try {
      assert.ok(v.socket.send(pattern(MAX_UDP_DATAGRAM + 1, 1), "::1", tunnel.remotePort));
      await waitFor(() => held(tunnel.id)!.udp!.drops.too_large === 1, "the drop to be counted");
      assert.ok(v.socket.send(pattern(5, 2), "::1", tunnel.remotePort));
      await waitFor(() => v.got.length === 1, "the next datagram's reply");
      assert.deepEqual(v.got[0], pattern(5, 2), "only the small one came back");
      assert.equal(held(tunnel.id)!.udp!.datagramsIn, 1);
    } finally {
      v.socket.close();
      echo6.close();
      await tunnel.close();
    }
  });

  it("gives each of many visitor addresses a flow of its own, replies to each its own", async () => {
    const tunnel = await client.expose({ protocol: "udp", local: `127.0.0.1:${echo.local.port}` });
    const visitors = await Promise.all(Array.from({ length: 24 }, () => visitor()));
    try {
      visitors.forEach((v, i) =>
        v.socket.send(pattern(100 + i, i), "127.0.0.1", tunnel.remotePort)
      );
      await waitFor(() => visitors.every((v) => v.got.length === 1), "every visitor's reply");
      visitors.forEach((v, i) => assert.deepEqual(v.got[0], pattern(100 + i, i)));
      const counters = held(tunnel.id)!.udp!;
      assert.equal(counters.flows, 24);
      assert.equal(counters.flowsOpen, 24);
      assert.equal(tunnel.udp!.flows, 24, "one socket each on the client's side");
      assert.equal(held(tunnel.id)!.stats.active, 24, "flows are the tunnel's visitors");
      // Closing the tunnel ends every flow: the daemon's, and the client's sockets.
      await tunnel.close();
      assert.equal(held(tunnel.id), undefined);
      await waitFor(() => counters.flowsOpen === 0, "the daemon's flows to end");
      await waitFor(() => tunnel.udp!.flowsOpen === 0, "the client's flow sockets to close");
    } finally {
      for (const v of visitors) v.socket.close();
      await tunnel.close();
    }
  });

  it("applies the visitor policy to new flows: address rules and flows per visitor", async () => {
    const tunnel = await client.expose({
      protocol: "udp",
      local: `127.0.0.1:${echo.local.port}`,
      policy: { deny: ["127.0.0.3/32"], connectionsPerVisitor: 1 },
    });
    const allowed = await visitor("127.0.0.2");
    const second = await visitor("127.0.0.2");
    const denied = await visitor("127.0.0.3");
    const before = daemon.counters.get("policy_address");
    const beforeConnections = daemon.counters.get("policy_visitor_connections");
    try {
      allowed.socket.send(pattern(10, 1), "127.0.0.1", tunnel.remotePort);
      await waitFor(() => allowed.got.length === 1, "the allowed visitor's reply");
      denied.socket.send(pattern(10, 2), "127.0.0.1", tunnel.remotePort);
      // A second address:port of the same visitor while its first flow is open: one flow each.
      second.socket.send(pattern(10, 3), "127.0.0.1", tunnel.remotePort);
      const counters = held(tunnel.id)!.udp!;
      await waitFor(() => counters.drops.refused === 2, "both refusals to be counted");
      assert.equal(daemon.counters.get("policy_address") - before, 1);
      assert.equal(daemon.counters.get("policy_visitor_connections") - beforeConnections, 1);
      assert.equal(counters.flows, 1);
      // The allowed flow still answers; the refused ones got nothing.
      allowed.socket.send(pattern(11, 4), "127.0.0.1", tunnel.remotePort);
      await waitFor(() => allowed.got.length === 2, "the allowed visitor's second reply");
      assert.equal(denied.got.length + second.got.length, 0);
      assert.match(
        renderMetrics(daemon),
        /tunnelmux_udp_drops_total\{kind="tunnel",reason="refused"\} [2-9]/,
      );
    } finally {
      for (const v of [allowed, second, denied]) v.socket.close();
      await tunnel.close();
    }
  });

  it("holds a TCP and a UDP tunnel on one port number, and frees the UDP port on close", async () => {
    const tcp = await client.expose({ local: "127.0.0.1:9" });
    const udp = await client.expose({
      protocol: "udp",
      remotePort: tcp.remotePort,
      local: `127.0.0.1:${echo.local.port}`,
    });
    try {
      assert.equal(udp.remotePort, tcp.remotePort);
      await assert.rejects(
        client.expose({ protocol: "udp", remotePort: tcp.remotePort, local: "127.0.0.1:9" }),
        (error: Error & { code?: string }) => error.code === "port_in_use",
      );
    } finally {
      await udp.close();
      await tcp.close();
    }
    (await bindable(udp.remotePort)).close();
  });

  it("counts a UDP forward's flows and datagrams under kind forward in /metrics", async () => {
    const forward = await client.forwardUdp({
      listen: "127.0.0.1:0",
      target: `127.0.0.1:${echo.local.port}`,
    });
    const v = await visitor();
    const series = (s: string) => sample(renderMetrics(daemon), s);
    const before = series('tunnelmux_udp_datagrams_total{kind="forward",direction="out"}');
    try {
      const port = Number(forward.address.split(":").pop());
      v.socket.send(pattern(300, 1), "127.0.0.1", port);
      await waitFor(() => v.got.length === 1, "the echo through the forward");
      assert.deepEqual(v.got[0], pattern(300, 1));
      // The daemon's socket sent it to the target (out) and took the reply (in).
      assert.equal(
        series('tunnelmux_udp_datagrams_total{kind="forward",direction="out"}'),
        before + 1,
      );
      assert.ok(series('tunnelmux_udp_bytes_total{kind="forward",direction="in"}') >= 300);
      assert.equal(series('tunnelmux_udp_flows_open{kind="forward"}'), 1);
      // The session's own counts, in the admin API.
      const session = daemon.registry.sessions().find((s) => s.client === "alice")!;
      const detail = await adminOf(daemon)(`/v1/sessions/${session.id}`) as {
        udpForwards: { flowsOpen: number; datagramsToTargets: number; bytesFromTargets: number };
      };
      assert.equal(detail.udpForwards.flowsOpen, 1);
      assert.equal(detail.udpForwards.datagramsToTargets, 1);
      assert.equal(detail.udpForwards.bytesFromTargets, 300);
    } finally {
      v.socket.close();
      forward.close();
    }
  });

  it("refuses what a UDP tunnel cannot be, with a clear error", async () => {
    await assert.rejects(
      client.expose({ protocol: "udp", http: "web", local: "127.0.0.1:9" }),
      /a UDP tunnel takes no http/,
    );
    await assert.rejects(
      // A port outside the client's allowed ones: the same rule as for TCP.
      client.expose({ protocol: "udp", remotePort: 19999, local: "127.0.0.1:9" }),
      (error: Error & { code?: string }) => error.code === "not_allowed",
    );
  });
});

describe("UDP tunnel flows over time", () => {
  let daemon: Daemon;
  let echo: UdpSocket;

  before(async () => {
    echo = await startUdpEcho();
    daemon = await startDaemonInProcess({
      listen: { tcp: "127.0.0.1:0", websocket: null, admin: null },
      // Short enough for a test to see a flow end; long enough that flows a test opens one after
      // the other are all open at once.
      limits: { udpFlowIdleMs: 1000, udpFlowsPerTunnel: 2 },
      clients: [{ name: "alice", token: TOKEN, expose: { ports: [0, "20000-32767"] } }],
    });
  });
  after(async () => {
    await daemon?.stop();
    echo?.close();
  });

  it("ends a flow after the idle time; the visitor's next datagram opens a new one", async () => {
    const client = await connect(`tcp://127.0.0.1:${portOf(daemon.addresses.tcp)}`, {
      token: TOKEN,
      reconnect: false,
    });
    const tunnel = await client.expose({ protocol: "udp", local: `127.0.0.1:${echo.local.port}` });
    const v = await visitor();
    try {
      v.socket.send(pattern(8, 1), "127.0.0.1", tunnel.remotePort);
      await waitFor(() => v.got.length === 1, "the first reply");
      const counters = daemon.registry.tunnels().find((t) => t.id === tunnel.id)!.udp!;
      assert.equal(counters.flowsOpen, 1);
      await waitFor(() => counters.flowsOpen === 0, "the idle flow to end");
      await waitFor(() => tunnel.udp!.flowsOpen === 0, "the client's flow socket to close");
      v.socket.send(pattern(8, 2), "127.0.0.1", tunnel.remotePort);
      await waitFor(() => v.got.length === 2, "the reply on a new flow");
      assert.deepEqual(v.got[1], pattern(8, 2));
      assert.equal(counters.flows, 2);
    } finally {
      v.socket.close();
      await client.close();
    }
  });

  it("keeps at most limits.udpFlowsPerTunnel flows; one more visitor's datagrams are dropped", async () => {
    const client = await connect(`tcp://127.0.0.1:${portOf(daemon.addresses.tcp)}`, {
      token: TOKEN,
      reconnect: false,
    });
    const tunnel = await client.expose({ protocol: "udp", local: `127.0.0.1:${echo.local.port}` });
    const visitors = await Promise.all([visitor(), visitor(), visitor()]);
    try {
      const counters = daemon.registry.tunnels().find((t) => t.id === tunnel.id)!.udp!;
      for (const v of visitors.slice(0, 2)) {
        v.socket.send(pattern(8, 1), "127.0.0.1", tunnel.remotePort);
        await waitFor(() => v.got.length === 1, "an echo");
      }
      visitors[2].socket.send(pattern(8, 2), "127.0.0.1", tunnel.remotePort);
      await waitFor(() => counters.drops.flow_limit === 1, "the third visitor's drop");
      assert.equal(visitors[2].got.length, 0);
      assert.equal(counters.flows, 2);
      // Once the others' flows end (idle), it gets one.
      await waitFor(() => counters.flowsOpen === 0, "the idle flows to end");
      visitors[2].socket.send(pattern(8, 3), "127.0.0.1", tunnel.remotePort);
      await waitFor(() => visitors[2].got.length === 1, "the third visitor's echo");
    } finally {
      for (const v of visitors) v.socket.close();
      await client.close();
    }
  });

  it("exposes a UDP tunnel again on its port after a reconnect", async () => {
    const client = await connect(`tcp://127.0.0.1:${portOf(daemon.addresses.tcp)}`, {
      token: TOKEN,
      reconnect: { initialMs: 50, maxMs: 200 },
    });
    const tunnel = await client.expose({ protocol: "udp", local: `127.0.0.1:${echo.local.port}` });
    const port = tunnel.remotePort;
    const firstId = tunnel.id;
    const v = await visitor();
    try {
      daemon.registry.tunnelOwner(firstId)!.close();
      await waitFor(() => tunnel.id !== firstId && tunnel.id !== "", "the tunnel to come back");
      assert.equal(tunnel.remotePort, port);
      v.socket.send(pattern(8, 3), "127.0.0.1", port);
      await waitFor(() => v.got.length === 1, "a reply through the restored tunnel");
    } finally {
      v.socket.close();
      await client.close();
    }
  });
});
