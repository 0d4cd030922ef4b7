/**
 * `GET /metrics`: the daemon's counters in the Prometheus text format, read live at scrape time
 * (byte and frame counters move while connections are open, not only when they close).
 *
 * Session counters live on each yamux session and vanish with it, yet a Prometheus counter must
 * never go down. So each daemon gets one {@linkcode SessionTotals} that remembers every session it
 * has seen and, when the session closes, adds its final counters to a running total of closed
 * sessions. A scrape reports that total plus the live sessions.
 *
 * Label cardinality stays bounded: labels are transports, directions, frame types, reasons, and
 * ids of sessions and tunnels that exist now (bounded by the configured limits). No per-stream
 * labels.
 *
 * @module
 */

import { POLICY_REFUSALS } from "../../../tunnel/policy/visitor_gate.ts";
import { Hono } from "hono";
import process from "node:process";
import type { SessionHandle, TransportKind } from "../../registry/registry.ts";
import type { DaemonState, MetricsApiDeps } from "./deps.ts";
import type { FrameCounts } from "../../../protocol/stats.ts";
import { PROMETHEUS_CONTENT_TYPE, PrometheusWriter, type Sample } from "./prometheus.ts";
import { bulkBuffers, relayBuffers } from "../../../util/bytes/buffer_pool.ts";
import {
  addUdpCounters,
  newUdpCounters,
  UDP_DROPS,
  type UdpCounters,
} from "../../../tunnel/udp/udp_flow.ts";

/** The session counters that are summed across sessions (everything monotonic). */
export interface SessionCounterTotals {
  /** Transport bytes received. */
  bytesIn: number;
  /** Transport bytes sent. */
  bytesOut: number;
  /** Frames received, by type. */
  framesIn: FrameCounts;
  /** Frames sent, by type. */
  framesOut: FrameCounts;
  /** Streams the daemon opened (reverse tunnel visitors, services). */
  streamsOpened: number;
  /** Streams clients opened that were accepted. */
  streamsAccepted: number;
  /** Streams clients opened that were refused. */
  streamsRefused: number;
  /** RST frames sent. */
  resetsSent: number;
  /** RST frames received. */
  resetsReceived: number;
  /** Protocol errors by reason. */
  errors: Record<string, number>;
  /** GoAway frames sent, by code name. */
  goAwaySent: Record<string, number>;
  /** GoAway frames received, by code name. */
  goAwayReceived: Record<string, number>;
}

/** A zeroed total. */
export function zeroTotals(): SessionCounterTotals {
  return {
    bytesIn: 0,
    bytesOut: 0,
    framesIn: { data: 0, windowUpdate: 0, ping: 0, goAway: 0 },
    framesOut: { data: 0, windowUpdate: 0, ping: 0, goAway: 0 },
    streamsOpened: 0,
    streamsAccepted: 0,
    streamsRefused: 0,
    resetsSent: 0,
    resetsReceived: 0,
    errors: {},
    goAwaySent: {},
    goAwayReceived: {},
  };
}

/** Adds `from` (a session's stats or another total) into `into`. */
export function addTotals(into: SessionCounterTotals, from: SessionCounterTotals): void {
  into.bytesIn += from.bytesIn;
  into.bytesOut += from.bytesOut;
  for (const key of FRAME_TYPES) {
    into.framesIn[key] += from.framesIn[key];
    into.framesOut[key] += from.framesOut[key];
  }
  into.streamsOpened += from.streamsOpened;
  into.streamsAccepted += from.streamsAccepted;
  into.streamsRefused += from.streamsRefused;
  into.resetsSent += from.resetsSent;
  into.resetsReceived += from.resetsReceived;
  addCounts(into.errors, from.errors);
  addCounts(into.goAwaySent, from.goAwaySent);
  addCounts(into.goAwayReceived, from.goAwayReceived);
}

function addCounts(into: Record<string, number>, from: Record<string, number>): void {
  for (const [key, count] of Object.entries(from)) into[key] = (into[key] ?? 0) + count;
}

const FRAME_TYPES = ["data", "windowUpdate", "ping", "goAway"] as const;
const FRAME_LABEL: Record<typeof FRAME_TYPES[number], string> = {
  data: "data",
  windowUpdate: "window_update",
  ping: "ping",
  goAway: "go_away",
};
const TRANSPORTS: readonly TransportKind[] = ["tcp", "tls", "ws", "wss"];
const STATES: readonly DaemonState[] = ["starting", "running", "draining", "stopped"];
/** Daemon counters reported even at zero, so that rate() works from the first scrape. */
const KNOWN_EVENTS = ["handshake_timeout", "session_limit", "stream_limit", "idle_timeout"];

/**
 * Running totals of a daemon's sessions. Tracking starts when the session is first seen: at a
 * `session_opened` event or at a scrape, whichever comes first. Its counters are folded into
 * {@linkcode closed} once it closes (when the daemon has already dropped it from `sessions`).
 * Only sessions that never authenticated and opened and closed between two scrapes are missed:
 * the daemon publishes no event for them.
 */
export class SessionTotals {
  /** Counters of sessions that have closed. */
  readonly closed: SessionCounterTotals = zeroTotals();
  readonly #daemon: Pick<MetricsApiDeps, "registry">;
  readonly #tracked = new Set<SessionHandle>();
  /** Ids folded into `closed`, in case a scrape still finds them in `daemon.sessions`. */
  readonly #folded = new Set<string>();

  /** Starts following `daemon`'s sessions. Use {@linkcode sessionTotals} to get the shared one. */
  constructor(daemon: Pick<MetricsApiDeps, "registry" | "events">) {
    this.#daemon = daemon;
    daemon.events.subscribe((event) => {
      if (event.type !== "session_opened" && event.type !== "session_closed") return;
      const session = daemon.registry.session(String(event.fields.session));
      if (session) this.track(session);
    });
  }

  /** Counters summed over closed sessions and those open now. */
  snapshot(): SessionCounterTotals {
    const total = zeroTotals();
    addTotals(total, this.closed);
    for (const session of this.live()) addTotals(total, session.stats);
    return total;
  }

  /** The daemon's sessions not yet folded into `closed` (tracking any new ones on the way). */
  *live(): Generator<SessionHandle> {
    const present = new Set<string>();
    for (const session of this.#daemon.registry.sessions()) {
      present.add(session.id);
      if (this.#folded.has(session.id)) continue;
      this.track(session);
      yield session;
    }
    for (const id of this.#folded) if (!present.has(id)) this.#folded.delete(id);
  }

  /** Follows `session` until it closes. Idempotent. */
  track(session: SessionHandle): void {
    if (this.#tracked.has(session) || this.#folded.has(session.id)) return;
    this.#tracked.add(session);
    // SessionHandle.closed settles after the session's teardown, and after the daemon's own
    // handler that removes it from `sessions`: its counters are final by then, give or take the
    // last GoAway frame.
    session.closed.then(() => {
      this.#tracked.delete(session);
      if (this.#daemon.registry.session(session.id) === session) this.#folded.add(session.id);
      addTotals(this.closed, session.stats);
    });
  }

  /** Sessions being followed now (for tests: it returns to zero once they close). */
  get trackedCount(): number {
    return this.#tracked.size;
  }
}

const totalsByDaemon = new WeakMap<object, SessionTotals>();

/** The one {@linkcode SessionTotals} of `daemon`, created on first use. */
export function sessionTotals(daemon: Pick<MetricsApiDeps, "registry" | "events">): SessionTotals {
  let totals = totalsByDaemon.get(daemon);
  if (!totals) totalsByDaemon.set(daemon, totals = new SessionTotals(daemon));
  return totals;
}

/**
 * Renders every metric family of `daemon` as a text exposition. `now` (ms since the epoch) is for
 * uptime.
 */
export function renderMetrics(daemon: MetricsApiDeps, now: number = Date.now()): string {
  const totals = sessionTotals(daemon);
  const live = [...totals.live()];
  const sum = totals.snapshot();
  const w = new PrometheusWriter();

  w.family(
    "tunnelmux_daemon_state",
    "gauge",
    "1 for the daemon's lifecycle state, 0 for the others.",
    STATES.map((state) => ({ labels: { state }, value: daemon.state === state ? 1 : 0 })),
  );
  w.single(
    "tunnelmux_start_time_seconds",
    "gauge",
    "When the daemon started, in seconds since the Unix epoch.",
    daemon.startedAt / 1000,
  );
  w.single(
    "tunnelmux_uptime_seconds",
    "gauge",
    "Seconds since the daemon started.",
    Math.max(0, now - daemon.startedAt) / 1000,
  );

  const sessionsBy = new Map<string, number>();
  for (const t of TRANSPORTS) {
    for (const s of ["handshake", "ready"]) sessionsBy.set(`${t} ${s}`, 0);
  }
  let streams = 0;
  for (const session of live) {
    if (session.state === "closed") continue;
    const key = `${session.transportKind} ${session.state}`;
    sessionsBy.set(key, (sessionsBy.get(key) ?? 0) + 1);
    streams += session.streamCount;
  }
  w.family(
    "tunnelmux_sessions",
    "gauge",
    "Client sessions connected now, by transport and state (handshake or ready).",
    [...sessionsBy].map(([key, value]) => {
      const [transport, state] = key.split(" ");
      return { labels: { transport, state }, value };
    }),
  );
  w.single(
    "tunnelmux_streams_open",
    "gauge",
    "Yamux streams open now across all sessions, control streams included.",
    streams,
  );

  w.family(
    "tunnelmux_session_bytes_total",
    "counter",
    "Transport bytes of client sessions (frame headers included), open and closed sessions.",
    [
      { labels: { direction: "in" }, value: sum.bytesIn },
      { labels: { direction: "out" }, value: sum.bytesOut },
    ],
  );
  w.family(
    "tunnelmux_session_frames_total",
    "counter",
    "Yamux frames of client sessions, by direction and frame type.",
    FRAME_TYPES.flatMap((key) => [
      { labels: { direction: "in", type: FRAME_LABEL[key] }, value: sum.framesIn[key] },
      { labels: { direction: "out", type: FRAME_LABEL[key] }, value: sum.framesOut[key] },
    ]),
  );
  w.family(
    "tunnelmux_session_streams_total",
    "counter",
    "Streams: opened by the daemon, accepted from clients, refused (backlog or limit).",
    [
      { labels: { outcome: "opened" }, value: sum.streamsOpened },
      { labels: { outcome: "accepted" }, value: sum.streamsAccepted },
      { labels: { outcome: "refused" }, value: sum.streamsRefused },
    ],
  );
  w.family(
    "tunnelmux_stream_resets_total",
    "counter",
    "RST frames, by direction.",
    [
      { labels: { direction: "sent" }, value: sum.resetsSent },
      { labels: { direction: "received" }, value: sum.resetsReceived },
    ],
  );
  w.family(
    "tunnelmux_protocol_errors_total",
    "counter",
    "Yamux protocol errors of client sessions, by reason.",
    Object.entries(sum.errors).sort().map(([reason, value]) => ({ labels: { reason }, value })),
  );
  w.family(
    "tunnelmux_goaway_total",
    "counter",
    "GoAway frames of client sessions, by direction and code.",
    (["sent", "received"] as const).flatMap((direction) =>
      Object.entries(direction === "sent" ? sum.goAwaySent : sum.goAwayReceived).sort()
        .map(([code, value]) => ({ labels: { direction, code }, value }))
    ),
  );
  w.family(
    "tunnelmux_session_rtt_seconds",
    "gauge",
    "Smoothed round-trip time of each ready session, from pings (absent until measured).",
    live.filter((s) => s.state === "ready" && s.rtt > 0).map((s) => ({
      labels: { session: s.id, client: s.client ?? "" },
      value: s.rtt / 1000,
    })),
  );

  writeTunnels(w, daemon);
  writeUdp(w, daemon);
  writeHttp(w, daemon);
  writeDaemonCounters(w, daemon);
  writeServices(w, daemon);

  writeCluster(w, daemon);

  const memory = process.memoryUsage();
  w.family("tunnelmux_process_memory_bytes", "gauge", "Memory of the daemon process.", [
    { labels: { kind: "rss" }, value: memory.rss },
    { labels: { kind: "heap_total" }, value: memory.heapTotal },
    { labels: { kind: "heap_used" }, value: memory.heapUsed },
    { labels: { kind: "external" }, value: memory.external },
  ]);
  const pools = { relay: relayBuffers, bulk: bulkBuffers };
  w.family(
    "tunnelmux_relay_buffers",
    "gauge",
    "Pooled relay buffers (relay: 65 KiB, bulk: 260 KiB): created in all, and idle in the pool now.",
    Object.entries(pools).flatMap(([pool, p]): Sample[] => [
      { labels: { pool, kind: "created" }, value: p.created },
      { labels: { pool, kind: "idle" }, value: p.free },
    ]),
  );
  w.family(
    "tunnelmux_relay_buffers_freed_total",
    "counter",
    "Pooled relay buffers given back while their pool was full, freed at once (a burst's excess).",
    Object.entries(pools).map(([pool, p]): Sample => ({ labels: { pool }, value: p.dropped })),
  );
  w.single(
    "tunnelmux_relay_buffer_strays_total",
    "counter",
    "Releases of a pooled relay buffer after its last claim (a bug; should stay 0).",
    relayBuffers.strays + bulkBuffers.strays,
  );
  return w.toString();
}

function writeTunnels(w: PrometheusWriter, daemon: MetricsApiDeps): void {
  const tunnels = daemon.registry.tunnels();
  const id = (t: typeof tunnels[number]) => ({ tunnel: t.id, client: t.client });
  w.single("tunnelmux_tunnels", "gauge", "Reverse tunnels listening now.", tunnels.length);
  w.family(
    "tunnelmux_tunnel_bytes_total",
    "counter",
    "Bytes through each reverse tunnel now listening: to_client is visitor to client.",
    tunnels.flatMap((t): Sample[] => [
      { labels: { ...id(t), direction: "to_client" }, value: t.stats.aToB },
      { labels: { ...id(t), direction: "to_visitor" }, value: t.stats.bToA },
    ]),
  );
  w.family(
    "tunnelmux_tunnel_connections_total",
    "counter",
    "Visitors accepted by each reverse tunnel.",
    tunnels.map((t) => ({ labels: id(t), value: t.stats.connections })),
  );
  w.family(
    "tunnelmux_tunnel_connections_active",
    "gauge",
    "Visitors connected to each reverse tunnel now.",
    tunnels.map((t) => ({ labels: id(t), value: t.stats.active })),
  );
  w.family(
    "tunnelmux_tunnel_healthy",
    "gauge",
    "1 while a tunnel's route takes visitors; 0 while its client reports the service unhealthy.",
    tunnels.map((t) => ({ labels: id(t), value: t.healthy ? 1 : 0 })),
  );
  w.family(
    "tunnelmux_tunnel_errors_total",
    "counter",
    "Visitors of each reverse tunnel that ended in an error.",
    tunnels.map((t) => ({ labels: id(t), value: t.stats.errors })),
  );
}

/**
 * The UDP families (docs/design/udp.md), by kind: `tunnel` is UDP tunnels (those closed, and the
 * ones listening now), `forward` the UDP forwards, `relay` this node's relays to UDP tunnels held
 * on other nodes of a cluster (those closed, and the live ones). `in` is datagrams the daemon's
 * UDP sockets received, `out` those they sent.
 */
function writeUdp(w: PrometheusWriter, daemon: MetricsApiDeps): void {
  const tunnels = newUdpCounters();
  if (daemon.udp) addUdpCounters(tunnels, daemon.udp.closedTunnels);
  for (const t of daemon.registry.tunnels()) if (t.udp) addUdpCounters(tunnels, t.udp);
  const kinds: [string, UdpCounters][] = [["tunnel", tunnels]];
  if (daemon.udp) kinds.push(["forward", daemon.udp.forwards]);
  if (daemon.udp?.closedRelays || daemon.cluster) {
    const relays = newUdpCounters();
    if (daemon.udp?.closedRelays) addUdpCounters(relays, daemon.udp.closedRelays);
    for (const r of daemon.cluster?.view().relays ?? []) if (r.udp) addUdpCounters(relays, r.udp);
    kinds.push(["relay", relays]);
  }
  w.family(
    "tunnelmux_udp_flows_open",
    "gauge",
    "UDP flows (one per visitor address) open now, by kind (tunnel, forward or relay).",
    kinds.map(([kind, c]) => ({ labels: { kind }, value: c.flowsOpen })),
  );
  w.family(
    "tunnelmux_udp_flows_total",
    "counter",
    "UDP flows opened, by kind.",
    kinds.map(([kind, c]) => ({ labels: { kind }, value: c.flows })),
  );
  w.family(
    "tunnelmux_udp_datagrams_total",
    "counter",
    "UDP datagrams carried by kind: in were received on the daemon's UDP sockets, out sent.",
    kinds.flatMap(([kind, c]): Sample[] => [
      { labels: { kind, direction: "in" }, value: c.datagramsIn },
      { labels: { kind, direction: "out" }, value: c.datagramsOut },
    ]),
  );
  w.family(
    "tunnelmux_udp_bytes_total",
    "counter",
    "Payload bytes of those datagrams, by kind and direction.",
    kinds.flatMap(([kind, c]): Sample[] => [
      { labels: { kind, direction: "in" }, value: c.bytesIn },
      { labels: { kind, direction: "out" }, value: c.bytesOut },
    ]),
  );
  w.family(
    "tunnelmux_udp_drops_total",
    "counter",
    "UDP datagrams dropped, by kind and reason (queue_full, too_large, flow_limit, send_failed, " +
      "refused, rate_limited).",
    kinds.flatMap(([kind, c]) =>
      UDP_DROPS.map((reason) => ({ labels: { kind, reason }, value: c.drops[reason] }))
    ),
  );
}

function writeHttp(w: PrometheusWriter, daemon: MetricsApiDeps): void {
  const hosts = [...daemon.httpStats.entries()];
  w.family(
    "tunnelmux_http_requests_total",
    "counter",
    "Requests on the HTTP port by host and the status visitors got ((unknown): no tunnel held it).",
    hosts.flatMap(([host, s]) =>
      [...s.byStatus].map(([code, value]) => ({ labels: { host, code: String(code) }, value }))
    ),
  );
  w.family(
    "tunnelmux_http_bytes_total",
    "counter",
    "Bytes through the HTTP port by host: to_client is requests, to_visitor responses.",
    hosts.flatMap(([host, s]): Sample[] => [
      { labels: { host, direction: "to_client" }, value: s.bytesIn },
      { labels: { host, direction: "to_visitor" }, value: s.bytesOut },
    ]),
  );
  w.family(
    "tunnelmux_http_request_seconds_total",
    "counter",
    "Time from each request's head to its response's end, summed by host (divide by the requests).",
    hosts.map(([host, s]) => ({ labels: { host }, value: s.seconds })),
  );
}

function writeServices(w: PrometheusWriter, daemon: MetricsApiDeps): void {
  const offers = daemon.registry.services();
  const id = (o: typeof offers[number]) => ({ service: o.name, client: o.client, node: o.node });
  w.single("tunnelmux_services", "gauge", "Named service offers known now.", offers.length);
  w.family(
    "tunnelmux_service_connections_total",
    "counter",
    "Users this node sent to each offer of a named service.",
    offers.map((o) => ({ labels: id(o), value: o.stats.connections })),
  );
  w.family(
    "tunnelmux_service_connections_active",
    "gauge",
    "Users of each offer connected through this node now.",
    offers.map((o) => ({ labels: id(o), value: o.stats.active })),
  );
  w.family(
    "tunnelmux_service_healthy",
    "gauge",
    "1 while an offer takes users; 0 while its client reports the service unhealthy.",
    offers.map((o) => ({ labels: id(o), value: o.healthy ? 1 : 0 })),
  );
}

/** The cluster's families (only in a cluster): NATS, nodes, relays by peer, registry operations. */
function writeCluster(w: PrometheusWriter, daemon: MetricsApiDeps): void {
  const cluster = daemon.cluster;
  if (!cluster) return;
  const view = cluster.view();
  w.single(
    "tunnelmux_cluster_nats_connected",
    "gauge",
    "1 while the NATS connection is up, else 0.",
    view.nats.state === "connected" ? 1 : 0,
  );
  w.single("tunnelmux_cluster_nodes", "gauge", "Live nodes, this one included.", view.nodes.length);
  w.family(
    "tunnelmux_cluster_peer_connected",
    "gauge",
    "1 while the relay session with a peer node is up.",
    view.peers.map((p) => ({ labels: { peer: p.node }, value: p.connected ? 1 : 0 })),
  );
  w.family(
    "tunnelmux_cluster_relay_streams_total",
    "counter",
    "Relay streams by peer node: out are opened by this node, in by the peer.",
    view.peers.flatMap((p): Sample[] => [
      { labels: { peer: p.node, direction: "out" }, value: p.streamsOut },
      { labels: { peer: p.node, direction: "in" }, value: p.streamsIn },
    ]),
  );
  const bytes = new Map<string, { to: number; from: number }>();
  for (const relay of view.relays) {
    const entry = bytes.get(relay.node) ?? { to: 0, from: 0 };
    entry.to += relay.bytesToOwner;
    entry.from += relay.bytesFromOwner;
    bytes.set(relay.node, entry);
  }
  w.family(
    "tunnelmux_cluster_relay_bytes_total",
    "counter",
    "Bytes of visitors this node relays to tunnels held on a peer, by peer and direction.",
    [...bytes].flatMap(([peer, b]): Sample[] => [
      { labels: { peer, direction: "to_owner" }, value: b.to },
      { labels: { peer, direction: "from_owner" }, value: b.from },
    ]),
  );
  w.family(
    "tunnelmux_cluster_registry_operations_total",
    "counter",
    "Cluster registry operations by outcome (port claimed, taken, unavailable; failures).",
    Object.entries(daemon.counters.snapshot()).filter(([name]) => name.startsWith("registry_"))
      .sort().map(([name, value]) => ({ labels: { op: name.slice(9) }, value })),
  );
}

/** Splits `daemon.counters` into auth failures, forward refusals, dial errors and the rest. */
function writeDaemonCounters(w: PrometheusWriter, daemon: MetricsApiDeps): void {
  const refusals: Sample[] = [];
  const dialErrors: Sample[] = [];
  const policy = new Map(POLICY_REFUSALS.map((reason) => [reason.slice("policy_".length), 0]));
  const others = new Map(KNOWN_EVENTS.map((event) => [event, 0]));
  for (const [name, value] of Object.entries(daemon.counters.snapshot()).sort()) {
    if (name === "auth_failure" || name.startsWith("registry_")) continue;
    if (name.startsWith("policy_")) policy.set(name.slice("policy_".length), value);
    else if (name.startsWith("forward_dial_")) {
      dialErrors.push({ labels: { reason: name.slice("forward_dial_".length) }, value });
    } else if (name.startsWith("forward_")) {
      refusals.push({ labels: { reason: name.slice("forward_".length) }, value });
    } else others.set(name, value);
  }
  w.single(
    "tunnelmux_auth_failures_total",
    "counter",
    "Failed authentications (hello with a wrong or missing token, WebSocket bearer refused).",
    daemon.counters.get("auth_failure"),
  );
  w.family(
    "tunnelmux_forward_refusals_total",
    "counter",
    "Forward streams refused by policy or address checks, by reason.",
    refusals,
  );
  w.family(
    "tunnelmux_visitor_policy_refusals_total",
    "counter",
    "Visitors (and HTTP requests) a tunnel's visitor policy refused, by reason.",
    [...policy].map(([reason, value]) => ({ labels: { reason }, value })),
  );
  w.family(
    "tunnelmux_forward_dial_errors_total",
    "counter",
    "Forward streams whose target could not be dialled, by reason.",
    dialErrors,
  );
  w.family(
    "tunnelmux_daemon_events_total",
    "counter",
    "Other daemon events: handshake timeouts, session and stream limits, idle timeouts.",
    [...others].map(([event, value]) => ({ labels: { event }, value })),
  );
}

/**
 * The `GET /metrics` endpoint, as a sub-app for the admin API to mount (it applies auth).
 * Creating it starts tracking session totals, so create it when the daemon starts.
 */
export function metricsApi(daemon: MetricsApiDeps): Hono {
  sessionTotals(daemon);
  const app = new Hono();
  app.get("/metrics", (c) => {
    return c.body(renderMetrics(daemon), 200, {
      "content-type": PROMETHEUS_CONTENT_TYPE,
      "cache-control": "no-store",
    });
  });
  return app;
}
