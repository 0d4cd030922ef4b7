/**
 * The daemon: its listeners, every client session, the reverse tunnels and named services they
 * hold, and its lifecycle (starting → running → draining → stopped).
 *
 * @module
 */

import { AddressRules } from "../tunnel/policy/visitor_policy.ts";
import { renarrow } from "./session/expose.ts";
import { isAllowedProvider } from "./policy/identity_providers.ts";
import type { HttpPolicy } from "../tunnel/policy/http_policy.ts";
import { HandshakeAdmission } from "./session/admission.ts";
import { Lifecycle } from "../util/lifecycle.ts";
import type { Transport, TransportListener } from "../protocol/transport.ts";
import { readHostTextFile } from "../util/host/host.ts";
import { listenTcp, listenTls } from "../transport/tcp.ts";
import { HttpStats } from "./http/http_stats.ts";
import { WebFronts } from "./http/web_fronts.ts";
import { VisitorAccounts } from "./tunnels/visitor_limit.ts";
import { CertificateStore } from "./tls/certificates.ts";
import {
  ClientSession,
  type DaemonContext,
  type DaemonUdp,
  type TransportKind,
} from "./session/client_session.ts";
import { newUdpCounters } from "../tunnel/udp/udp_flow.ts";
import type { Config } from "./config/mod.ts";
import type { Logger } from "../util/log.ts";
import type { LookupFn } from "./policy/resolve.ts";
import { Counters } from "./counters.ts";
import { EventFeed } from "./events.ts";
import { LocalRegistry } from "./registry/local_registry.ts";
import type { Registry } from "./registry/registry.ts";
import { TokenVerifier } from "./tokens/verifier.ts";
import { TokenStore } from "./tokens/store.ts";
import type { Cluster } from "./cluster/cluster.ts";
import { TunnelPorts } from "./tunnels/tunnel_ports.ts";
import { formatHostPort, type HostPort } from "../util/net/address.ts";
import { bindNamed } from "../util/net/bind_named.ts";

/** Daemon lifecycle states. */
export type DaemonState = "starting" | "running" | "draining" | "stopped";

/** What moves the daemon between states. */
export type DaemonEvent = "started" | "drain" | "stop";

/** The daemon lifecycle. Stopping is possible from anywhere; draining only while running. */
export const DAEMON_TRANSITIONS = {
  starting: { started: "running", stop: "stopped" },
  running: { drain: "draining", stop: "stopped" },
  draining: { stop: "stopped" },
  stopped: {},
} as const satisfies Record<DaemonState, Partial<Record<DaemonEvent, DaemonState>>>;

/** Bound listener addresses, as `host:port`. */
export interface DaemonAddresses {
  /** The yamux-over-TCP listener. */
  tcp?: string;
  /** The WebSocket listener (with its path). */
  websocket?: string;
  /** The shared port of HTTP tunnels. */
  http?: string;
  /** The shared port of HTTPS and TLS tunnels. */
  https?: string;
  /** In a cluster: the relay listener, where other nodes' relay sessions arrive. */
  cluster?: string;
  /** In a cluster: where other nodes dial that listener (its port 0 resolved to the bound one). */
  advertise?: string;
}

/**
 * What the daemon prints once it is listening: one line per bound listener, each with the URL or
 * address visitors and clients use (`secure`: tunnels over TLS, WSS), and in a cluster the relay
 * listener with the address other nodes dial.
 */
export function listenerLines(addresses: DaemonAddresses, secure: boolean): string[] {
  const { tcp, websocket, http, https, cluster, advertise } = addresses;
  const lines: string[] = [];
  if (tcp) lines.push(`tunnels over ${secure ? "TLS" : "TCP"} on ${tcp}`);
  if (websocket) lines.push(`tunnels over WebSocket on ${secure ? "wss" : "ws"}://${websocket}`);
  if (http) lines.push(`HTTP tunnels on http://${http}`);
  if (https) lines.push(`HTTPS and TLS tunnels on https://${https}`);
  if (cluster) lines.push(`cluster relays on ${cluster}, advertised as ${advertise}`);
  return lines;
}

/** A listener's bound address as `host:port` (IPv6 in brackets). */
function addressOf(listener: TransportListener): string {
  return formatHostPort(listener.hostname, listener.port);
}

/** A running tunnelmux daemon. */
export class Daemon {
  /** Event counters (auth failures, refusals by reason, ...), for metrics. */
  readonly counters = new Counters();
  /** What the HTTP front saw, by host (metrics). */
  readonly httpStats = new HttpStats();
  /** The certificates the HTTPS port terminates with. */
  readonly certificates = new CertificateStore();
  /** What happens, as it happens (sessions, tunnels, resets, auth failures, drain). */
  readonly events = new EventFeed();
  /** When the daemon started (ms since the epoch). */
  readonly startedAt = Date.now();
  /** UDP counters: closed UDP tunnels' totals (live ones keep their own) and every UDP forward's. */
  readonly udp: DaemonUdp = {
    closedTunnels: newUdpCounters(),
    forwards: newUdpCounters(),
    closedRelays: newUdpCounters(),
  };
  /** Resolves once the daemon has stopped. */
  readonly stopped: Promise<void>;

  /** The node-local registry; in a cluster, the part the cluster registry builds on. */
  readonly #local: LocalRegistry;
  /** The public ports of reverse tunnels on this node, with their routes. */
  readonly #ports: TunnelPorts;
  /** This node's part in a cluster, once joined (only when `cluster` is configured). */
  #cluster: Cluster | undefined;
  #config: Config;
  /** `#config` with the minted tokens' clients added: what sessions authorize against. */
  #effective: Config;
  readonly #log: Logger;
  readonly #verifier: TokenVerifier;
  /** Connections still in their handshake, oldest first (see admission.ts). */
  readonly #pending = new HandshakeAdmission(() => ({
    pending: this.#config.limits.pendingHandshakes,
    pendingPerSource: this.#config.limits.pendingHandshakesPerSource,
  }));
  readonly #lifecycle = new Lifecycle<DaemonState, DaemonEvent>(DAEMON_TRANSITIONS, "starting");
  readonly #listeners: TransportListener[] = [];
  #tcpListener: TransportListener | undefined;
  #httpListener: TransportListener | undefined;
  #httpsListener: TransportListener | undefined;
  /** The shared HTTP and HTTPS ports of HTTP(S) tunnels. */
  readonly #web: WebFronts;
  /** Each client's visitors on this node, across its tunnels (`limits.visitors`). */
  readonly #visitors: VisitorAccounts;
  readonly #refusals = new Map<string, { at: number; suppressed: number }>();
  #trusted: { list: readonly string[]; rules: AddressRules | undefined } | undefined;
  readonly #context: DaemonContext;
  #addresses: DaemonAddresses = {};
  #resolveStopped!: () => void;

  /** Creates a daemon for `config`; nothing listens until {@linkcode start}. */
  constructor(config: Config, options: { log: Logger; lookup?: LookupFn }) {
    this.#config = config;
    this.#effective = config;
    this.#log = options.log;
    // The data directory is fixed for the daemon's life: a reload that moves it needs a restart.
    const tokens = new TokenStore({
      dataDir: config.dataDir,
      log: options.log,
      onChange: () => this.#apply(this.#config),
    });
    this.#local = new LocalRegistry({ tokens, node: config.cluster?.node });
    this.#ports = new TunnelPorts(options.log, () => ({
      trusted: this.#trustedProxies(),
      timeoutMs: this.#config.limits.handshakeTimeoutMs,
    }));
    this.#verifier = new TokenVerifier(
      config.clients.map((c) => ({ name: c.name, hash: c.tokenHash })),
    );
    this.stopped = new Promise((resolve) => this.#resolveStopped = resolve);
    this.#visitors = new VisitorAccounts(() => this.#effective.limits.visitorsPerClient);
    this.#visitors.setCaps(config.clients);
    this.#web = new WebFronts({
      config: () => this.#effective,
      route: (host, path) => this.#context.registry.hostRoute(host, path),
      certificates: this.certificates,
      httpStats: this.httpStats,
      count: (event) => this.counters.count(event),
      publish: (type, fields) => this.events.publish(type, fields),
      // In a cluster, certificates, challenges and the account are the cluster's.
      acmeStorage: () => this.#cluster?.acmeStorage(),
      log: this.#log,
    });
    this.#context = {
      config: () => this.#effective,
      verifier: this.#verifier,
      registry: this.#local, // the cluster registry once start() joined a cluster
      ports: this.#ports,
      httpPort: () => this.#httpListener?.port,
      httpsPort: () => this.#httpsListener?.port,
      terminates: (host) => this.#web.terminates(host),
      wantCertificate: (host) => this.#web.wantCertificate(host),
      draining: () => this.#lifecycle.state !== "running",
      log: this.#log,
      count: (event) => this.counters.count(event),
      publish: (type, fields) => this.events.publish(type, fields),
      lookup: options.lookup,
      admit: () => this.#readySessions() < this.#config.limits.sessions,
      settled: (session) => this.#pending.settle(session),
      udp: this.udp,
      visitorLimit: (client) => ({
        perTunnel: () => this.#effective.limits.visitorsPerTunnel,
        client: this.#visitors.of(client),
        refused: (reason, detail) => {
          this.counters.count(reason);
          if (detail) this.#refusalEvent(client, reason, detail.tunnel, detail.visitor);
        },
      }),
    };
  }

  /** `trustedProxies` of the configuration in force, compiled once per configuration. */
  #trustedProxies(): AddressRules | undefined {
    const list = this.#config.trustedProxies;
    if (this.#trusted?.list !== list) {
      this.#trusted = {
        list,
        rules: list.length > 0 ? new AddressRules({ allow: list }) : undefined,
      };
    }
    return this.#trusted.rules;
  }

  /**
   * Whether this node may fetch `url` for a JWT or OIDC rule another node's record names: within
   * its own `identityProviders`, or named by one of its own operator's rules (trusted, as at
   * expose), so a provider this node's operator dropped is fetched for no node's tunnel.
   */
  #mayFetch(url: string): boolean {
    if (isAllowedProvider(url, this.#config.identityProviders)) return true;
    const named = (http: HttpPolicy | undefined) =>
      http?.jwt?.jwksUrl === url || http?.oidc?.issuer === url;
    return named(this.#config.visitors.http) ||
      this.#effective.clients.some((client) => named(client.visitors.http));
  }

  /**
   * A visitor a tunnel's policy refused, on the event feed: at most one event per tunnel and
   * reason a second (a flood of refusals must not flood the feed), with how many it stands for.
   */
  #refusalEvent(client: string, reason: string, tunnel: string, visitor: string): void {
    const key = `${tunnel} ${reason}`;
    const now = Date.now();
    const last = this.#refusals.get(key);
    if (last && now - last.at < 1000) return void last.suppressed++;
    // Bounded: the table of a second's refusals is dropped whole when it grows past its cap.
    if (this.#refusals.size >= 1024) this.#refusals.clear();
    this.#refusals.set(key, { at: now, suppressed: 0 });
    this.events.publish("visitor_refused", {
      client,
      tunnel,
      reason,
      visitor,
      suppressed: last?.suppressed,
    });
  }

  /**
   * Its state: sessions, tunnels and their ports, service offers, minted tokens (whose clients
   * count as configured ones). The only place they change; read it, or act through it. In a
   * cluster (once {@linkcode start} joined it) ports and offers are shared with the other nodes.
   */
  get registry(): Registry {
    return this.#cluster?.registry ?? this.#local;
  }

  /** This node's part in a cluster; undefined for a single node (or before it joined). */
  get cluster(): Cluster | undefined {
    return this.#cluster;
  }

  /** The lifecycle state. */
  get state(): DaemonState {
    return this.#lifecycle.state;
  }

  /** The configuration in force. */
  get config(): Config {
    return this.#config;
  }

  /** Where the listeners are bound. */
  get addresses(): DaemonAddresses {
    return this.#addresses;
  }

  /** Binds the configured listeners. Rejects (and closes what was bound) if one cannot bind. */
  async start(): Promise<void> {
    const { listen } = this.#config;
    try {
      if (this.#config.cluster) {
        // Loaded only here: a single-node daemon never loads the cluster code nor NATS.
        const { joinCluster } = await import("./cluster/cluster.ts");
        this.#cluster = await joinCluster(this.#config.cluster, {
          local: this.#local,
          log: this.#log,
          count: (event) => this.counters.count(event),
          handshakeTimeoutMs: this.#config.limits.handshakeTimeoutMs,
          streamWindow: this.#config.limits.streamWindow,
          dataDir: this.#config.dataDir,
          onTokensChange: () => this.#apply(this.#config),
          events: this.events,
          ports: this.#ports,
          udpLimits: () => ({
            idleMs: this.#config.limits.udpFlowIdleMs,
            maxFlows: this.#config.limits.udpFlowsPerTunnel,
          }),
          udpTotals: this.udp.closedRelays,
          mayFetch: (url) => this.#mayFetch(url),
        });
        this.#context.registry = this.#cluster.registry;
        this.#addresses.cluster = this.#cluster.relayAddress;
        this.#addresses.advertise = this.#cluster.advertise;
      }
      // Before listening: a minted token works from the first hello.
      await this.registry.tokens.load();
      // PEM contents are read once at start; replacing certificates needs a restart.
      const tls = this.#config.tls
        ? {
          cert: await readHostTextFile(this.#config.tls.cert),
          key: await readHostTextFile(this.#config.tls.key),
        }
        : undefined;
      if (listen.tcp) {
        const tcp = listen.tcp;
        this.#tcpListener = await this.#listen(
          `tunnels over ${tls ? "TLS" : "TCP"}`,
          tcp,
          "--listen-tcp",
          () =>
            tls
              ? listenTls({ ...tcp, ...tls }, (t) => this.#accept(t, "tls"))
              : listenTcp(tcp, (t) => this.#accept(t, "tcp")),
        );
        this.#addresses.tcp = addressOf(this.#tcpListener);
      }
      if (listen.websocket) {
        const websocket = listen.websocket;
        // Loaded only when a WebSocket listener is asked for (it is on by default): a daemon
        // without one starts without that code.
        const { listenWebSocket } = await import("../transport/ws/mod.ts");
        const listener = await this.#listen(
          "tunnels over WebSocket",
          websocket,
          "--listen-ws",
          () =>
            listenWebSocket({
              ...websocket,
              path: listen.websocketPath,
              maxMessageSize: this.#config.limits.maxWebSocketMessage,
              requestTimeoutMs: this.#config.limits.handshakeTimeoutMs,
              tls,
              authorize: (request) => this.#authorizeUpgrade(request),
            }, (t, request) => this.#accept(t, tls ? "wss" : "ws", this.#bearerClient(request))),
        );
        this.#addresses.websocket = addressOf(listener) + listen.websocketPath;
      }
      if (listen.http && !listen.https && this.#cluster && this.#config.http.acme) {
        // No certificate to serve here, but the CA may check any node's HTTP port for a
        // challenge another node's order made.
        await this.#web.loadCertificates();
      }
      if (listen.http) {
        const http = listen.http;
        this.#httpListener = await this.#listen(
          "HTTP tunnels",
          http,
          "--listen-http",
          () => this.#web.listenHttp(http),
        );
        this.#addresses.http = addressOf(this.#httpListener);
      }
      if (listen.https) {
        const https = listen.https;
        await this.#web.loadCertificates();
        this.#httpsListener = await this.#listen(
          "HTTPS tunnels",
          https,
          "--listen-https",
          () => this.#web.listenHttps(https),
        );
        this.#addresses.https = addressOf(this.#httpsListener);
      }
    } catch (error) {
      this.stop();
      throw error;
    }
    this.#lifecycle.fire("started");
    this.#log.info("daemon running", { ...this.#addresses });
  }

  /** Binds one of the daemon's listeners, named in its error (`bindNamed`); `stop()` closes it. */
  async #listen(
    what: string,
    address: HostPort,
    flag: string,
    bind: () => Promise<TransportListener>,
  ): Promise<TransportListener> {
    const where = formatHostPort(address.hostname, address.port);
    const listener = await bindNamed(what, where, flag, bind);
    this.#listeners.push(listener);
    return listener;
  }

  /**
   * Graceful shutdown: stop accepting, send GoAway to every session, wait up to `graceMs` for
   * their streams to finish, then close what is left. Resolves when stopped.
   */
  async drain(graceMs: number = this.#config.shutdownGraceMs): Promise<void> {
    if (!this.#lifecycle.fire("drain")) return this.stopped;
    const sessions = this.registry.sessions();
    this.#log.info("draining", { sessions: sessions.length, graceMs });
    this.events.publish("drain", { sessions: sessions.length, graceMs });
    // New connections are refused from here on: the TCP listener closes, WebSocket upgrades get
    // 503. The WebSocket listener stays bound until stop(), so a client is told why (503) rather
    // than finding the port closed.
    this.#tcpListener?.close();
    // Tunnels stop taking visitors; visitors already connected finish within the grace period.
    this.#ports.stopAccepting();
    for (const tunnel of this.registry.tunnels()) tunnel.stopAccepting();
    for (const session of sessions) session.drain();
    const all = Promise.all(sessions.map((s) => s.closed));
    let timer: ReturnType<typeof setTimeout> | undefined;
    const graceOver = new Promise<void>((resolve) => timer = setTimeout(resolve, graceMs));
    await Promise.race([all, graceOver]);
    clearTimeout(timer);
    this.stop();
  }

  /** Stops at once: listeners and every session closed. Idempotent. */
  stop(): void {
    if (!this.#lifecycle.fire("stop")) return;
    this.registry.tokens.close();
    this.#web.stop();
    // `stopped` waits for the listeners' ports to be free again, so a daemon started next in
    // this process (a test, an embedding) can bind them.
    const released = Promise.all(this.#listeners.map((listener) => listener.close()));
    for (const session of this.registry.sessions()) session.close();
    // Leaving the cluster removes this node's presence, so the others release its ports at once
    // rather than after the TTL; bounded, as NATS may be away.
    const left = this.#cluster
      ? Promise.race([this.#cluster.stop(), new Promise((resolve) => setTimeout(resolve, 2_000))])
      : Promise.resolve();
    Promise.all([left, released]).catch(() => {}).finally(() => {
      this.#log.info("daemon stopped");
      this.#resolveStopped();
    });
  }

  /**
   * Applies a new configuration (SIGHUP): tokens, permissions and limits take effect for new
   * requests at once, and sessions of clients that were removed or whose token changed are closed.
   * Listener addresses are not rebound; a change there needs a restart.
   */
  reload(config: Config): void {
    this.#apply(config);
    this.#log.info("configuration reloaded", { clients: config.clients.length });
  }

  /**
   * Puts `config` plus the minted tokens' clients in force (a reload, or a mint, revocation or
   * expiry): the verifier first, which throws before anything changed if the list is bad, then
   * closes the sessions whose client is gone or whose credential changed.
   */
  #apply(config: Config): void {
    const effective = {
      ...config,
      clients: [...config.clients, ...this.registry.tokens.clients(config)],
    };
    this.#verifier.replace(effective.clients.map((c) => ({ name: c.name, hash: c.tokenHash })));
    this.#visitors.setCaps(effective.clients);
    // Visitor rules change in place: each tunnel keeps its visitors and meets the new rules next.
    const rules = new Map(effective.clients.map((c) => [c.name, c.visitors]));
    for (const tunnel of this.#local.tunnels()) {
      const operator = rules.get(tunnel.client);
      if (!operator) continue;
      const { policy, withheld } = renarrow(
        operator,
        tunnel.requestedPolicy,
        config.identityProviders,
      );
      // Said once, when the operator's change withholds the client's rules (or for a new reason).
      if (withheld !== undefined && withheld !== tunnel.withheld) {
        const fields = { client: tunnel.client, tunnel: tunnel.id, reason: withheld };
        this.#log.warn("a tunnel's rules are no longer allowed: it refuses every visitor", fields);
        this.events.publish("policy_withheld", fields);
      }
      void tunnel.setPolicy(policy, withheld);
    }
    const previous = new Map(this.#effective.clients.map((c) => [c.name, c.tokenHash]));
    const configured = new Set(this.#config.clients.map((c) => c.name));
    this.#config = config;
    this.#effective = effective;
    const current = new Map(effective.clients.map((c) => [c.name, c.tokenHash]));
    for (const session of this.registry.sessions()) {
      const name = session.client;
      if (name === undefined) continue;
      if (current.get(name) !== previous.get(name)) {
        this.#log.info("closing a session whose credential was revoked", {
          session: session.id,
          client: name,
        });
        session.revoked(
          current.has(name)
            ? `the token of client "${name}" was changed in the daemon's configuration`
            : configured.has(name)
            ? `client "${name}" was removed from the daemon's configuration`
            : `the token of client "${name}" was revoked or has expired`,
        );
      }
    }
  }

  #accept(transport: Transport, kind: TransportKind, preauthenticated?: string): void {
    if (this.#lifecycle.state !== "running") return transport.close();
    const session = new ClientSession(transport, this.#context, kind, preauthenticated);
    this.registry.addSession(session);
    session.closed.then(() => {
      this.#pending.settle(session);
      this.registry.removeSession(session.id);
    });
    // Connections still in their handshake are bounded (a flood of silent connections), fairly:
    // the newcomer stays and the oldest pending one goes, first of its own source.
    const evicted = this.#pending.add(session);
    if (evicted > 0) {
      for (let i = 0; i < evicted; i++) this.#context.count("handshake_evicted");
      this.#log.debug("pending handshakes full: closed the oldest", {
        remote: transport.remoteAddress,
        evicted,
      });
    }
  }

  #readySessions(): number {
    let ready = 0;
    for (const session of this.registry.sessions()) if (session.state === "ready") ready++;
    return ready;
  }

  /** A WebSocket upgrade may carry the token as a bearer token; a wrong one is refused at once. */
  #authorizeUpgrade(request: Request): Response | undefined {
    if (this.#lifecycle.state !== "running") {
      return Response.json(
        { error: { code: "shutting_down", message: "the daemon is draining" } },
        { status: 503 },
      );
    }
    const header = request.headers.get("authorization");
    if (header === null) return undefined; // the token may still come in the hello
    if (this.#bearerClient(request) !== undefined) return undefined;
    this.#context.count("auth_failure");
    this.#log.warn("WebSocket upgrade with a wrong token refused");
    return Response.json(
      { error: { code: "unauthorized", message: "unknown token" } },
      { status: 401 },
    );
  }

  #bearerClient(request: Request): string | undefined {
    const match = /^Bearer\s+(\S+)$/i.exec(request.headers.get("authorization") ?? "");
    return match ? this.#verifier.verify(match[1]) : undefined;
  }
}
