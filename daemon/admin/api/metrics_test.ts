// GET /metrics: first over small fakes (app.request on the sub-app: the daemon's counters, the
// cluster's families, session totals that outlive their sessions), then against a daemon in this
// process with real SDK clients: the exposition parses strictly, every family is there, and
// counters move while a tunnel connection is still open and do not go down when its session
// closes.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { Daemon } from "../../daemon.ts";
import { validateConfig } from "../../config/mod.ts";
import { Logger } from "../../../util/log.ts";
import { connect } from "../../../client/client.ts";
import { connectTcp, listenTcp } from "../../../transport/mod.ts";
import type { Transport, TransportListener } from "../../../protocol/transport.ts";
import { pattern, roundTrip } from "../../../tools/echo_check.ts";
import { metricsApi, sessionTotals } from "./metrics.ts";
import { waitFor } from "../../../testing/wait.ts";
import { Counters } from "../../counters.ts";
import { EventFeed } from "../../events.ts";
import { HttpStats } from "../../http/http_stats.ts";
import { fakeSession, fakeTunnel, memoryRegistry } from "../../registry/_fake_handles.ts";
import { fakeCluster, served } from "./_fake_deps.ts";
import type { MetricsApiDeps } from "./deps.ts";
import { newUdpCounters } from "../../../tunnel/udp/udp_flow.ts";
import { relayBuffers, releaseBytes } from "../../../util/bytes/buffer_pool.ts";

const TOKEN = "metrics-test-token-0123456789abcdef";

/** One parsed sample. */
interface ParsedSample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

/** A parsed exposition: families by name with type, help and samples. */
type Exposition = Map<string, { type: string; help: string; samples: ParsedSample[] }>;

const NAME = "[a-zA-Z_:][a-zA-Z0-9_:]*";
const LABEL = '([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\\\\\n]|\\\\[\\\\"n])*)"';
const SAMPLE = new RegExp(`^(${NAME})(?:\\{(${LABEL}(?:,${LABEL})*)?\\})? (\\S+)$`);

/**
 * A strict parser for what the daemon writes: every family has HELP then TYPE before its samples,
 * every sample belongs to the family just declared, label values use only the three escapes.
 */
function parseExposition(text: string): Exposition {
  assert.ok(text.endsWith("\n"), "ends with a line feed");
  const families: Exposition = new Map();
  let current: string | undefined;
  let help: string | undefined;
  for (const [i, line] of text.slice(0, -1).split("\n").entries()) {
    const where = `line ${i + 1}: ${JSON.stringify(line)}`;
    let m = /^# HELP (\S+) (.*)$/.exec(line);
    if (m) {
      assert.match(m[1], new RegExp(`^${NAME}$`), where);
      assert.ok(!/\\[^\\n]/.test(m[2].replace(/\\\\/g, "")), `bad escape in HELP, ${where}`);
      assert.ok(!families.has(m[1]), `family repeated, ${where}`);
      [current, help] = [undefined, m[1]];
      families.set(m[1], { type: "", help: m[2], samples: [] });
      continue;
    }
    m = /^# TYPE (\S+) (counter|gauge|summary|histogram|untyped)$/.exec(line);
    if (m) {
      assert.equal(m[1], help, `TYPE right after its HELP, ${where}`);
      families.get(m[1])!.type = m[2];
      current = m[1];
      help = undefined;
      continue;
    }
    assert.ok(!line.startsWith("#"), `unexpected comment, ${where}`);
    m = SAMPLE.exec(line);
    assert.ok(m, `not a sample, ${where}`);
    assert.equal(m[1], current, `sample outside its family, ${where}`);
    const labels: Record<string, string> = {};
    for (const l of (m[2] ?? "").matchAll(new RegExp(LABEL, "g"))) {
      assert.ok(!(l[1] in labels), `label repeated, ${where}`);
      labels[l[1]] = l[2].replace(/\\(.)/g, (_, c) => c === "n" ? "\n" : c);
    }
    const raw = m[m.length - 1];
    assert.match(raw, /^(NaN|[+-]Inf|-?\d+(\.\d+)?(e[+-]?\d+)?)$/, where);
    const value = raw === "NaN"
      ? NaN
      : raw.endsWith("Inf")
      ? (raw[0] === "-" ? -1 : 1) * Infinity
      : Number(raw);
    families.get(current!)!.samples.push({ name: m[1], labels, value });
  }
  return families;
}

/** The value of the one sample of `name` whose labels include `labels`. */
function value(exposition: Exposition, name: string, labels: Record<string, string> = {}): number {
  const family = exposition.get(name);
  assert.ok(family, `family ${name} is missing`);
  const found = family.samples.filter((s) =>
    Object.entries(labels).every(([k, v]) => s.labels[k] === v)
  );
  assert.equal(found.length, 1, `one ${name} sample with ${JSON.stringify(labels)}`);
  return found[0].value;
}

const FAMILIES: Record<string, string> = {
  tunnelmux_daemon_state: "gauge",
  tunnelmux_start_time_seconds: "gauge",
  tunnelmux_uptime_seconds: "gauge",
  tunnelmux_sessions: "gauge",
  tunnelmux_streams_open: "gauge",
  tunnelmux_session_bytes_total: "counter",
  tunnelmux_session_frames_total: "counter",
  tunnelmux_session_streams_total: "counter",
  tunnelmux_stream_resets_total: "counter",
  tunnelmux_protocol_errors_total: "counter",
  tunnelmux_session_rtt_seconds: "gauge",
  tunnelmux_tunnels: "gauge",
  tunnelmux_tunnel_bytes_total: "counter",
  tunnelmux_tunnel_connections_total: "counter",
  tunnelmux_tunnel_connections_active: "gauge",
  tunnelmux_tunnel_errors_total: "counter",
  tunnelmux_auth_failures_total: "counter",
  tunnelmux_forward_refusals_total: "counter",
  tunnelmux_forward_dial_errors_total: "counter",
  tunnelmux_daemon_events_total: "counter",
  tunnelmux_services: "gauge",
  tunnelmux_service_connections_total: "counter",
  tunnelmux_service_connections_active: "gauge",
  tunnelmux_service_healthy: "gauge",
  tunnelmux_process_memory_bytes: "gauge",
  tunnelmux_relay_buffers: "gauge",
  tunnelmux_relay_buffer_strays_total: "counter",
  tunnelmux_relay_buffers_freed_total: "counter",
  tunnelmux_udp_flows_open: "gauge",
  tunnelmux_udp_flows_total: "counter",
  tunnelmux_udp_datagrams_total: "counter",
  tunnelmux_udp_bytes_total: "counter",
  tunnelmux_udp_drops_total: "counter",
};

/** An echo server on 127.0.0.1. */
function echoServer(): Promise<TransportListener> {
  return listenTcp({ hostname: "127.0.0.1", port: 0 }, (t) => {
    t.start({
      data: (chunk) => void (t.write(chunk) || t.pause()),
      drain: () => t.resume(),
      end: () => t.end(),
      close: () => {},
    });
  });
}

/** A visitor that stays connected; `echoed(n)` resolves once n bytes came back. */
async function visitor(port: number) {
  const t: Transport = await connectTcp({ hostname: "127.0.0.1", port });
  let got = 0;
  const waiters: { n: number; resolve: () => void }[] = [];
  t.start({
    data: (chunk) => {
      got += chunk.length;
      for (const w of waiters.filter((w) => got >= w.n)) w.resolve();
    },
    drain: () => {},
    end: () => {},
    close: () => {},
  });
  return {
    transport: t,
    echoed: (n: number) =>
      bounded(
        new Promise<void>((resolve) => got >= n ? resolve() : waiters.push({ n, resolve })),
        "echo",
      ),
  };
}

/** Rejects if `promise` takes longer than 10 s: a hang fails the test instead of stalling it. */
function bounded<T>(promise: Promise<T>, what: string): Promise<T> {
  let timer: ReturnType<typeof setTimeout>;
  const limit = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: no result within 10 s`)), 10_000);
  });
  return Promise.race([promise, limit]).finally(() => clearTimeout(timer));
}

describe("GET /metrics (over fakes)", () => {
  /** A daemon of fakes, and its metrics endpoint. */
  function metricsOver(cluster = fakeCluster()) {
    const daemon = {
      state: "draining" as const,
      startedAt: Date.UTC(2020, 0, 1),
      registry: memoryRegistry(),
      events: new EventFeed(),
      counters: new Counters(),
      httpStats: new HttpStats(),
      cluster,
    } satisfies MetricsApiDeps;
    const app = served(metricsApi(daemon));
    const scrape = async () => {
      const response = await app.request("/metrics");
      assert.equal(response.status, 200);
      assert.match(response.headers.get("content-type") ?? "", /^text\/plain; version=0\.0\.4/);
      return parseExposition(await response.text());
    };
    return { daemon, scrape };
  }

  it("reports the lifecycle state, sessions, tunnels and the daemon's counters", async () => {
    const { daemon, scrape } = metricsOver();
    daemon.registry.addSession(fakeSession("s1", { rtt: 250, stats: { bytesIn: 700 } }));
    daemon.registry.addTunnel(fakeTunnel("t-1", { stats: { aToB: 5, connections: 2 } }), "s1");
    daemon.counters.count("auth_failure");
    daemon.counters.count("forward_denied");
    daemon.counters.count("forward_dial_refused");
    const m = await scrape();
    assert.equal(value(m, "tunnelmux_daemon_state", { state: "draining" }), 1);
    assert.equal(value(m, "tunnelmux_daemon_state", { state: "running" }), 0);
    assert.equal(value(m, "tunnelmux_start_time_seconds"), Date.UTC(2020, 0, 1) / 1000);
    assert.equal(value(m, "tunnelmux_sessions", { transport: "tcp", state: "ready" }), 1);
    assert.equal(value(m, "tunnelmux_session_bytes_total", { direction: "in" }), 700);
    assert.equal(value(m, "tunnelmux_session_rtt_seconds", { session: "s1" }), 0.25);
    assert.equal(value(m, "tunnelmux_tunnels"), 1);
    const id = { tunnel: "t-1", client: "alice" };
    assert.equal(value(m, "tunnelmux_tunnel_bytes_total", { ...id, direction: "to_client" }), 5);
    assert.equal(value(m, "tunnelmux_tunnel_connections_total", id), 2);
    assert.equal(value(m, "tunnelmux_auth_failures_total"), 1);
    assert.equal(value(m, "tunnelmux_forward_refusals_total", { reason: "denied" }), 1);
    assert.equal(value(m, "tunnelmux_forward_dial_errors_total", { reason: "refused" }), 1);
  });

  it("reports UDP tunnels (closed ones' totals and live ones) and UDP forwards by kind", async () => {
    const { daemon } = metricsOver();
    const counters = (flowsOpen: number, datagramsIn: number, queueFull: number) => {
      const c = newUdpCounters();
      Object.assign(c, { flowsOpen, flows: flowsOpen + 1, datagramsIn, bytesIn: 10 * datagramsIn });
      c.drops.queue_full = queueFull;
      return c;
    };
    const udp = { closedTunnels: counters(0, 5, 1), forwards: counters(2, 7, 0) };
    daemon.registry.addTunnel(
      { ...fakeTunnel("t-9"), protocol: "udp", udp: counters(3, 4, 2) },
      "s1",
    );
    const app = served(metricsApi({ ...daemon, udp }));
    const m = parseExposition(await (await app.request("/metrics")).text());
    const tunnel = { kind: "tunnel" };
    const forward = { kind: "forward" };
    assert.equal(value(m, "tunnelmux_udp_flows_open", tunnel), 3);
    assert.equal(value(m, "tunnelmux_udp_flows_open", forward), 2);
    assert.equal(value(m, "tunnelmux_udp_flows_total", tunnel), 1 + 4);
    assert.equal(value(m, "tunnelmux_udp_datagrams_total", { ...tunnel, direction: "in" }), 9);
    assert.equal(value(m, "tunnelmux_udp_bytes_total", { ...forward, direction: "in" }), 70);
    assert.equal(value(m, "tunnelmux_udp_drops_total", { ...tunnel, reason: "queue_full" }), 3);
    assert.equal(value(m, "tunnelmux_udp_drops_total", { ...forward, reason: "refused" }), 0);
  });

  it("reports UDP relays to other nodes' tunnels (closed ones' totals and live ones) as kind relay", async () => {
    const counters = (flowsOpen: number, datagramsOut: number, refused: number) => {
      const c = newUdpCounters();
      Object.assign(c, {
        flowsOpen,
        flows: flowsOpen + 2,
        datagramsOut,
        bytesOut: 3 * datagramsOut,
      });
      c.drops.refused = refused;
      return c;
    };
    const cluster = fakeCluster({
      view: {
        relays: [
          { port: 9000, node: "n2", tunnel: "t-1", bytesToOwner: 10, bytesFromOwner: 1 },
          {
            port: 9001,
            protocol: "udp",
            udp: counters(2, 6, 1),
            node: "n2",
            tunnel: "t-2",
            bytesToOwner: 0,
            bytesFromOwner: 18,
          },
          {
            port: 9001,
            protocol: "udp",
            udp: counters(1, 4, 0),
            node: "n3",
            tunnel: "t-3",
            bytesToOwner: 0,
            bytesFromOwner: 12,
          },
        ],
      },
    });
    const { daemon } = metricsOver(cluster);
    const udp = {
      closedTunnels: newUdpCounters(),
      forwards: newUdpCounters(),
      closedRelays: counters(0, 5, 2),
    };
    const app = served(metricsApi({ ...daemon, udp }));
    const m = parseExposition(await (await app.request("/metrics")).text());
    const relay = { kind: "relay" };
    assert.equal(value(m, "tunnelmux_udp_flows_open", relay), 3);
    assert.equal(value(m, "tunnelmux_udp_flows_total", relay), 2 + 4 + 3);
    assert.equal(value(m, "tunnelmux_udp_datagrams_total", { ...relay, direction: "out" }), 15);
    assert.equal(value(m, "tunnelmux_udp_bytes_total", { ...relay, direction: "out" }), 45);
    assert.equal(value(m, "tunnelmux_udp_drops_total", { ...relay, reason: "refused" }), 3);
    // A UDP tunnel's kind is apart: nothing of the relays' there.
    assert.equal(value(m, "tunnelmux_udp_flows_open", { kind: "tunnel" }), 0);
  });

  it("keeps a closed session's counters in the totals", async () => {
    const { daemon, scrape } = metricsOver();
    const session = fakeSession("s1", { stats: { bytesIn: 300, bytesOut: 40 } });
    daemon.registry.addSession(session);
    daemon.events.publish("session_opened", { session: "s1" });
    assert.equal(sessionTotals(daemon).trackedCount, 1, "followed from its session_opened");
    daemon.registry.removeSession("s1");
    session.close();
    await session.closed;
    await waitFor(() => sessionTotals(daemon).trackedCount === 0, "its counters to be folded");
    const m = await scrape();
    assert.equal(value(m, "tunnelmux_session_bytes_total", { direction: "in" }), 300);
    assert.equal(value(m, "tunnelmux_session_bytes_total", { direction: "out" }), 40);
    assert.equal(value(m, "tunnelmux_sessions", { transport: "tcp", state: "ready" }), 0);
  });

  it("reports the cluster: NATS, nodes, peers, relayed bytes by peer, registry operations", async () => {
    const node = { run: "r", advertise: "", version: "", startedAt: 0, at: 0, sessions: 0 };
    const cluster = fakeCluster({
      view: {
        nodes: [{ node: "n1", tunnels: 0, ...node }, { node: "n2", tunnels: 1, ...node }],
        peers: [{ node: "n2", connected: true, streamsOut: 3, streamsIn: 4 }],
        relays: [
          { port: 9000, node: "n2", tunnel: "t-1", bytesToOwner: 10, bytesFromOwner: 1 },
          { port: 9001, node: "n2", tunnel: "t-2", bytesToOwner: 5, bytesFromOwner: 2 },
        ],
      },
    });
    const { daemon, scrape } = metricsOver(cluster);
    daemon.counters.count("registry_port_claimed");
    const m = await scrape();
    assert.equal(value(m, "tunnelmux_cluster_nats_connected"), 1);
    assert.equal(value(m, "tunnelmux_cluster_nodes"), 2);
    assert.equal(value(m, "tunnelmux_cluster_peer_connected", { peer: "n2" }), 1);
    assert.equal(
      value(m, "tunnelmux_cluster_relay_streams_total", { peer: "n2", direction: "in" }),
      4,
    );
    const relayed = { peer: "n2", direction: "to_owner" };
    assert.equal(value(m, "tunnelmux_cluster_relay_bytes_total", relayed), 15);
    assert.equal(
      value(m, "tunnelmux_cluster_registry_operations_total", { op: "port_claimed" }),
      1,
    );
    // Registry operations are the cluster's family, not "other daemon events".
    const others = m.get("tunnelmux_daemon_events_total")!.samples;
    assert.ok(others.every((s) => !s.labels.event.startsWith("registry_")));
  });
});

describe("GET /metrics (daemon in process)", () => {
  let echo: TransportListener;
  let daemon: Daemon;
  let app: ReturnType<typeof metricsApi>;
  const scrape = async (): Promise<Exposition> => {
    const response = await app.request("/metrics");
    assert.equal(response.status, 200);
    assert.equal(response.headers.get("content-type"), "text/plain; version=0.0.4; charset=utf-8");
    return parseExposition(await response.text());
  };

  before(async () => {
    echo = await echoServer();
    const result = validateConfig({
      listen: { tcp: "127.0.0.1:0", websocket: null, admin: null },
      clients: [{
        name: "alice",
        token: TOKEN,
        expose: { ports: [0, "20000-32767"] },
        forward: [`127.0.0.1:${echo.port}`],
        services: { use: ["echo"] },
      }],
    });
    assert.deepEqual(result.errors, []);
    const log = new Logger({ level: "error", format: "json", sink: () => {} });
    daemon = new Daemon(result.config!, { log });
    app = metricsApi(daemon);
    await daemon.start();
  });
  after(() => {
    daemon.stop();
    echo.close();
  });

  it("writes every family, with its HELP and TYPE, in a strictly valid exposition", async () => {
    const m = await scrape();
    for (const [name, type] of Object.entries(FAMILIES)) {
      assert.equal(m.get(name)?.type, type, `${name} is a ${type}`);
      assert.ok(m.get(name)!.help.length > 0, `${name} has help`);
    }
    for (const name of m.keys()) assert.ok(name.startsWith("tunnelmux_"), name);
    assert.equal(value(m, "tunnelmux_daemon_state", { state: "running" }), 1);
    assert.equal(value(m, "tunnelmux_daemon_state", { state: "draining" }), 0);
    assert.equal(value(m, "tunnelmux_sessions", { transport: "tcp", state: "ready" }), 0);
    assert.ok(value(m, "tunnelmux_process_memory_bytes", { kind: "rss" }) > 0);
    assert.equal(value(m, "tunnelmux_relay_buffer_strays_total"), 0);
    assert.ok(value(m, "tunnelmux_uptime_seconds") >= 0);
  });

  it("counts the relay buffers a full pool freed", async () => {
    const before = value(await scrape(), "tunnelmux_relay_buffers_freed_total", { pool: "relay" });
    // More out at once than the pool keeps idle: given back together, three are freed.
    const out = Array.from({ length: relayBuffers.maxFree + 3 }, () => relayBuffers.acquire());
    for (const bytes of out) releaseBytes(bytes);
    const after = value(await scrape(), "tunnelmux_relay_buffers_freed_total", { pool: "relay" });
    assert.equal(after - before, 3);
  });

  it("moves session and tunnel counters while a visitor is still connected", async () => {
    const client = await connect(`tcp://${daemon.addresses.tcp}`, {
      token: TOKEN,
      reconnect: false,
    });
    let open: Awaited<ReturnType<typeof visitor>> | undefined;
    try {
      const tunnel = await client.expose({ local: `127.0.0.1:${echo.port}` });
      const before = await scrape();
      assert.equal(value(before, "tunnelmux_sessions", { transport: "tcp", state: "ready" }), 1);
      assert.equal(value(before, "tunnelmux_tunnels"), 1);
      const id = { tunnel: tunnel.id, client: "alice" };
      assert.equal(value(before, "tunnelmux_tunnel_connections_total", id), 0);
      assert.equal(
        value(before, "tunnelmux_tunnel_bytes_total", { ...id, direction: "to_client" }),
        0,
      );

      open = await visitor(tunnel.remotePort);
      open.transport.write(pattern(5000, 1));
      await open.echoed(5000);
      const during = await scrape();
      assert.equal(value(during, "tunnelmux_tunnel_connections_total", id), 1);
      assert.equal(value(during, "tunnelmux_tunnel_connections_active", id), 1);
      assert.ok(
        value(during, "tunnelmux_tunnel_bytes_total", { ...id, direction: "to_client" }) >= 5000,
      );
      assert.ok(
        value(during, "tunnelmux_tunnel_bytes_total", { ...id, direction: "to_visitor" }) >= 5000,
      );
      for (const direction of ["in", "out"]) {
        const b = value(before, "tunnelmux_session_bytes_total", { direction });
        assert.ok(
          value(during, "tunnelmux_session_bytes_total", { direction }) >= b + 5000,
          direction,
        );
      }
      assert.ok(
        value(during, "tunnelmux_session_frames_total", { direction: "out", type: "data" }) >
          value(before, "tunnelmux_session_frames_total", { direction: "out", type: "data" }),
      );
      assert.ok(value(during, "tunnelmux_session_streams_total", { outcome: "opened" }) >= 1);
      assert.ok(value(during, "tunnelmux_streams_open") >= 2, "control stream and the visitor's");
    } finally {
      open?.transport.close();
      await client.close();
    }
  });

  it("keeps closed sessions' counters: session totals never go down", async () => {
    const client = await connect(`tcp://${daemon.addresses.tcp}`, {
      token: TOKEN,
      reconnect: false,
    });
    let live: Exposition;
    try {
      assert.deepEqual(await roundTrip(client.echo(), pattern(20_000, 2)), pattern(20_000, 2));
      live = await scrape();
      assert.equal(value(live, "tunnelmux_sessions", { transport: "tcp", state: "ready" }), 1);
    } finally {
      await client.close();
    }
    await waitFor(() => daemon.registry.sessionCount === 0, "the session to close");
    await waitFor(() => sessionTotals(daemon).trackedCount === 0, "its counters to be folded");
    const closed = await scrape();
    assert.equal(value(closed, "tunnelmux_sessions", { transport: "tcp", state: "ready" }), 0);
    assert.equal(value(closed, "tunnelmux_tunnels"), 0);
    for (const direction of ["in", "out"]) {
      const was = value(live, "tunnelmux_session_bytes_total", { direction });
      assert.ok(was >= 20_000);
      assert.ok(value(closed, "tunnelmux_session_bytes_total", { direction }) >= was, direction);
    }
    for (const type of ["data", "window_update", "ping", "go_away"]) {
      for (const direction of ["in", "out"]) {
        const labels = { direction, type };
        assert.ok(
          value(closed, "tunnelmux_session_frames_total", labels) >=
            value(live, "tunnelmux_session_frames_total", labels),
          `${direction} ${type}`,
        );
      }
    }
    // The client's graceful close said GoAway(normal); it stays counted after the session is gone.
    assert.ok(
      value(closed, "tunnelmux_goaway_total", { direction: "received", code: "normal" }) >= 1,
    );
  });

  it("counts auth failures and forward refusals from the daemon's counters", async () => {
    const before = await scrape();
    const failure = await connect(`tcp://${daemon.addresses.tcp}`, {
      token: "wrong-token-0123456789abcdefghij",
      reconnect: false,
    }).catch((e) => e);
    assert.equal(failure.code, "unauthorized");
    const client = await connect(`tcp://${daemon.addresses.tcp}`, {
      token: TOKEN,
      reconnect: false,
    });
    try {
      await roundTrip(client.open("127.0.0.1:1"), pattern(1, 3)).catch(() => undefined);
      await waitFor(
        () => Object.keys(daemon.counters.snapshot()).some((k) => k.startsWith("forward_")),
        "a refusal",
      );
    } finally {
      await client.close();
    }
    const m = await scrape();
    assert.equal(
      value(m, "tunnelmux_auth_failures_total"),
      value(before, "tunnelmux_auth_failures_total") + 1,
    );
    const refusals = m.get("tunnelmux_forward_refusals_total")!.samples;
    assert.equal(refusals.reduce((n, s) => n + s.value, 0), 1);
    assert.ok(refusals[0].labels.reason.length > 0);
    assert.ok(value(m, "tunnelmux_stream_resets_total", { direction: "sent" }) >= 1);
    assert.equal(value(m, "tunnelmux_daemon_events_total", { event: "handshake_timeout" }), 0);
  });

  it("escapes label values it takes from outside (client names, reasons)", async () => {
    // Counted twice; counters only go up, and this is the file's last case.
    daemon.counters.count('forward_we"ird\\reason\nx');
    daemon.counters.count('forward_we"ird\\reason\nx');
    {
      const m = await scrape();
      assert.equal(
        value(m, "tunnelmux_forward_refusals_total", { reason: 'we"ird\\reason\nx' }),
        2,
      );
    }
  });
});
