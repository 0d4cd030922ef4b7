/**
 * A daemon's membership of a cluster: the NATS connection and buckets, its presence, its relay
 * sessions with the other nodes, the cluster registry, and the relay listeners that let visitors
 * of a tunnel held on another node arrive here (`docs/cluster.md`).
 *
 * Loaded by the daemon only when `cluster` is configured (a dynamic import), and it loads the NATS
 * client the same way: a single-node daemon runs none of this.
 *
 * @module
 */

import { randomBytes } from "node:crypto";
import { readFile } from "node:fs/promises";
import type { ClusterConfig } from "../config/mod.ts";
import { connectService } from "../session/services.ts";
import type { LocalRegistry } from "../registry/local_registry.ts";
import type { PortClaim } from "../registry/registry.ts";
import type { TunnelPorts } from "../tunnels/tunnel_ports.ts";
import type { Stream } from "../../protocol/stream.ts";
import { ResetReason } from "../../tunnel/stream/reset_reasons.ts";
import type { StreamHeader } from "../../tunnel/stream/stream_header.ts";
import type { Logger } from "../../util/log.ts";
import { TokenStore } from "../tokens/store.ts";
import { type DaemonEventType, EventFeed } from "../events.ts";
import { ClusterRegistry } from "./cluster_registry.ts";
import { openSigned, seal } from "./signed.ts";
import { type KvTokenBackend, kvTokenBackend } from "./kv_tokens.ts";
import { connectNats, type NatsLink, type NatsState } from "./nats.ts";
import { advertisedAddress, PeerLinks, type PeerView } from "./peers.ts";
import { type NodeInfo, Presence } from "./presence.ts";
import { RelayRoute } from "./relay_route.ts";
import { UdpRelayRoute } from "./udp_relay_route.ts";
import { RereadTimer } from "./reread.ts";
import { addUdpCounters, type UdpCounters } from "../../tunnel/udp/udp_flow.ts";
import { VERSION } from "../../util/host/version.ts";
import type { AcmeStorage } from "../tls/acme_storage.ts";
import type { KvAcmeStorage } from "./kv_acme.ts";

/**
 * After NATS comes back, for this many TTLs nodes missing from presence are given time to write
 * their entries again before what they hold is released or taken over.
 */
const SETTLE_TTLS = 3;

/** Heartbeats between two checks of this node's own records. */
const REASSERT_EVERY_BEATS = 15;

/**
 * Heartbeats between two checks that the watches still follow their buckets: one request per
 * bucket, and a stalled watch (a NATS server lost under it) is found within two checks, two TTLs.
 */
const CHECK_WATCHES_EVERY_BEATS = 3;

/** What a node knows of the cluster, for the admin API. */
export interface ClusterView {
  /** This node's name. */
  node: string;
  /** The NATS connection: state and server. */
  nats: { state: NatsState; server: string | undefined };
  /** Every live node (this one included), as their presence entries say. */
  nodes: NodeInfo[];
  /** Relay sessions with the other nodes. */
  peers: PeerView[];
  /**
   * Relay listeners this node keeps for tunnels held elsewhere, with their bytes (visitor → owner
   * and back) and visitors.
   */
  relays: {
    port: number;
    /** `udp` for a UDP port's relay (its visitors are flows, `connections` counts them). */
    protocol?: "udp";
    /** A UDP relay's flows, datagrams and drops on this node. */
    udp?: UdpCounters;
    node: string;
    tunnel: string;
    bound: boolean;
    connections: number;
    bytesToOwner: number;
    bytesFromOwner: number;
  }[];
}

/** What the cluster needs from its daemon. */
export interface ClusterDeps {
  /** The node-local registry the cluster registry builds on (named after the node). */
  local: LocalRegistry;
  /** Logger. */
  log: Logger;
  /** Counts an event for metrics. */
  count: (event: string) => void;
  /** Handshake deadline, ms (relay handshakes and stream headers). */
  handshakeTimeoutMs: number;
  /** The largest receive window of a relayed stream (`limits.streamWindow`). */
  streamWindow?: number;
  /** The data directory (the token store's, though a cluster keeps tokens in NATS). */
  dataDir: string;
  /** Called when the minted tokens change, here or on another node. */
  onTokensChange: () => void;
  /** The daemon's events, published to the cluster. */
  events: EventFeed;
  /** The node's public port listeners: relays to tunnels held elsewhere are routes on them. */
  ports: TunnelPorts;
  /** The flow idle time and flow limit of a UDP relay opened now (default: the tables'). */
  udpLimits?: () => { idleMs: number; maxFlows: number };
  /** The daemon's totals of closed UDP relays: each relay's counts are added as it closes. */
  udpTotals?: UdpCounters;
  /**
   * A uniform random number in [0, 1), for the delay before the buckets are read again after
   * NATS came back (default `Math.random`; tests choose theirs).
   */
  random?: () => number;
  /** Whether this node may fetch `url` for another node's tunnel's JWT or OIDC rule. */
  mayFetch?: (url: string) => boolean;
}

/** The answers of {@linkcode Cluster.ask}: one per node that answered, and who did not. */
export interface ClusterAnswers {
  /** Each answer with the node that gave it, by node name. */
  // deno-lint-ignore no-explicit-any
  answers: { node: string; data: any }[];
  /** Live nodes that did not answer before the deadline. */
  missing: string[];
}

/** A port claimed on another node, and the route this node keeps to it once the port is bound. */
interface Relay {
  claim: PortClaim;
  route: RelayRoute | undefined;
  /** A UDP claim's route: on the port's UDP socket here, not on the TCP listeners. */
  udp?: UdpRelayRoute;
  closed: boolean;
}

/** How long a relayed visitor waits for a tunnel claimed here but not registered yet. */
const RELAY_TUNNEL_WAIT_MS = 2_000;

/** This node's part in a cluster. Create with {@linkcode joinCluster}. */
export class Cluster {
  /** The registry the daemon uses: node-local objects plus the shared records. */
  readonly registry: ClusterRegistry;
  /** Every node's daemon events (this node's included), each with a `node` field. */
  readonly events = new EventFeed();
  readonly #config: ClusterConfig;
  /** The cluster keys: `cluster.key`, then `cluster.previousKeys`. */
  readonly #keys: readonly string[];
  readonly #link: NatsLink;
  readonly #presence: Presence;
  readonly #peers: PeerLinks;
  readonly #log: Logger;
  /** Routes to tunnels held on other nodes, by `port/node/tunnel` (a UDP port's: `udp/` first). */
  readonly #relays = new Map<string, Relay>();
  #ports!: TunnelPorts;
  #udpLimits: ClusterDeps["udpLimits"];
  #udpTotals: UdpCounters | undefined;
  /** The minted tokens' feed (the `tokens` bucket's watch). */
  #tokens: KvTokenBackend | undefined;
  /** Relays whose claim went, still carrying visitors that arrived before. */
  readonly #draining = new Set<Relay>();
  readonly #timers = new Set<ReturnType<typeof setTimeout>>();
  /** ACME's state in the cluster's buckets, once asked for. */
  #acme: KvAcmeStorage | undefined;
  /** The re-read of the buckets after NATS came back, waiting for its random delay. */
  #reread: RereadTimer | undefined;
  #reconnectedAt = 0;
  #stopped = false;

  private constructor(
    config: ClusterConfig,
    link: NatsLink,
    presence: Presence,
    peers: PeerLinks,
    registry: ClusterRegistry,
    log: Logger,
  ) {
    this.#config = config;
    this.#keys = clusterKeys(config);
    this.#link = link;
    this.#presence = presence;
    this.#peers = peers;
    this.registry = registry;
    this.#log = log;
  }

  /** This node's name. */
  get node(): string {
    return this.#config.node;
  }

  /** Where this node's relay listener is bound (`host:port`). */
  get relayAddress(): string {
    return this.#peers.address;
  }

  /** Where other nodes dial this node's relay listener, as its presence entry says. */
  get advertise(): string {
    return this.#presence.advertise;
  }

  /** What this node knows of the cluster now. */
  view(): ClusterView {
    return {
      node: this.node,
      nats: { state: this.#link.state, server: this.#link.server },
      nodes: this.#presence.nodes(),
      peers: this.#peers.list(),
      relays: [...this.#relays.values()].map((r) =>
        r.claim.protocol === "udp"
          ? {
            port: r.claim.port,
            protocol: "udp" as const,
            udp: r.udp?.udp,
            node: r.claim.node,
            tunnel: r.claim.tunnel,
            bound: r.udp !== undefined,
            connections: r.udp?.udp.flows ?? 0,
            bytesToOwner: r.udp?.udp.bytesIn ?? 0,
            bytesFromOwner: r.udp?.udp.bytesOut ?? 0,
          }
          : {
            port: r.claim.port,
            node: r.claim.node,
            tunnel: r.claim.tunnel,
            bound: r.route !== undefined,
            connections: r.route?.stats.connections ?? 0,
            bytesToOwner: r.route?.stats.aToB ?? 0,
            bytesFromOwner: r.route?.stats.bToA ?? 0,
          }
      ),
    };
  }

  /**
   * Answers admin queries of `kind` from any node, asked of all nodes or of this one by name.
   * Queries and answers are signed with the cluster key (`signed.ts`); others are ignored.
   */
  // deno-lint-ignore no-explicit-any
  answer(kind: string, handler: (data: any) => unknown | Promise<unknown>): void {
    for (const subject of [this.#subject(kind), this.#subject(kind, this.node)]) {
      this.#link.reply(subject, async (text) => {
        const data = openSigned(this.#keys, subject, text);
        if (data === undefined) throw new Error(`an unsigned or stale query on ${subject}`);
        const answer = { node: this.node, data: await handler(data) };
        return seal(this.#keys, `${subject}.reply`, answer);
      });
    }
  }

  /**
   * Asks every live node (or only `node`) a query of `kind`; resolves with the answers that came
   * within `timeoutMs` and names the live nodes that did not answer.
   */
  async ask(
    kind: string,
    data: unknown,
    options: { node?: string; timeoutMs?: number } = {},
  ): Promise<ClusterAnswers> {
    const timeoutMs = options.timeoutMs ?? 2_000;
    const subject = this.#subject(kind, options.node);
    const expected = options.node ? [options.node] : this.#presence.nodes().map((n) => n.node);
    let replies: string[] = [];
    if (this.#link.state === "connected") {
      replies = await this.#link.gather(
        subject,
        seal(this.#keys, subject, data),
        timeoutMs,
        expected.length,
      );
    }
    const answers = replies.map((text) => openSigned(this.#keys, `${subject}.reply`, text))
      .filter((answer) => typeof answer?.node === "string");
    const answered = new Set(answers.map((a) => a.node));
    return { answers, missing: expected.filter((node) => !answered.has(node)) };
  }

  /**
   * ACME's state in the cluster's buckets (`kv_acme.ts`), so that every node serves each
   * certificate and answers each challenge, and a name is ordered by one node at a time. Loaded
   * only when asked (`http.acme` is set).
   */
  async acmeStorage(): Promise<AcmeStorage> {
    if (this.#acme) return this.#acme;
    const { KvAcmeStorage } = await import("./kv_acme.ts");
    const ttlMs = this.#config.presenceTtlMs;
    const [certificates, orders] = await Promise.all([
      this.#link.bucket("certificates"),
      this.#link.bucket("acme", ttlMs),
    ]);
    this.#acme = new KvAcmeStorage({
      certificates,
      certificatesName: `${this.#config.bucketPrefix}-certificates`,
      orders,
      ttlMs,
      keys: this.#keys,
      node: this.node,
      log: this.#log,
    });
    return this.#acme;
  }

  #subject(kind: string, node?: string): string {
    const base = `${this.#config.bucketPrefix}.admin.${kind}`;
    return node ? `${base}.${node}` : base;
  }

  /** Leaves the cluster: presence removed (others release this node's records at once). */
  async stop(): Promise<void> {
    if (this.#stopped) return;
    this.#stopped = true;
    for (const timer of this.#timers) clearTimeout(timer);
    this.#reread?.stop();
    for (const relay of [...this.#relays.values(), ...this.#draining]) {
      relay.route?.close();
      if (relay.route) this.#ports.detach(relay.route);
      if (relay.udp) this.#closeUdpRelay(relay.udp);
    }
    this.#relays.clear();
    this.registry.stop();
    this.#tokens?.stop();
    this.#acme?.stop();
    this.#peers.close();
    await this.#presence.stop();
    await this.#link.close();
  }

  /**
   * Connects to NATS, starts the relay listener, announces this node and loads the registry.
   * Rejects when NATS cannot be reached at start (the daemon does not start half in a cluster).
   */
  static async join(config: ClusterConfig, deps: ClusterDeps): Promise<Cluster> {
    const log = deps.log.child({ node: config.node });
    // Certificates are read once, at start (like the daemon's own).
    const tls = config.tls
      ? {
        cert: await readFile(config.tls.cert, "utf8"),
        key: await readFile(config.tls.key, "utf8"),
        ca: await readFile(config.tls.ca, "utf8"),
      }
      : undefined;
    const link = await connectNats(config, log, deps.count);
    const keys = clusterKeys(config);
    const run = randomBytes(8).toString("hex");
    let registry: ClusterRegistry | undefined;
    let cluster: Cluster | undefined;
    const peers = new PeerLinks({
      node: config.node,
      keys,
      listen: config.listen,
      handshakeTimeoutMs: deps.handshakeTimeoutMs,
      keepAliveMs: Math.max(500, Math.floor(config.presenceTtlMs / 2)),
      streamWindow: deps.streamWindow,
      tls,
      log,
      onStream: (stream, header, rest, node) =>
        cluster
          ? cluster.#relayed(stream, header, rest, node)
          : stream.reset(ResetReason.ShuttingDown),
    });
    // Bound before the presence entry is made: with port 0 (in `listen` or `advertise`) what
    // other nodes dial is known only then, and the entry is the one place they read it from.
    try {
      await peers.start();
    } catch (error) {
      peers.close();
      await link.close();
      throw error;
    }
    const advertise = advertisedAddress(config.advertise, peers.port);
    const presence = new Presence({
      bucket: link.nodes,
      self: {
        node: config.node,
        run,
        advertise,
        version: VERSION,
        startedAt: Date.now(),
      },
      counts: () => ({
        sessions: deps.local.sessionCount,
        tunnels: deps.local.tunnels().length,
      }),
      ttlMs: config.presenceTtlMs,
      log,
    });
    // Minted tokens: its watch checked with the registry's, restarted when NATS came back.
    const tokens = kvTokenBackend(link.tokens);
    try {
      await presence.start();
      registry = new ClusterRegistry({
        local: deps.local,
        link,
        presence,
        opener: (node) => peers.opener(node),
        reachable: (node) => peers.connected(node),
        mayFetch: deps.mayFetch,
        log,
        count: deps.count,
        presenceTtlMs: config.presenceTtlMs,
        tokens: new TokenStore({
          dataDir: deps.dataDir,
          log,
          onChange: deps.onTokensChange,
          backend: tokens,
        }),
      });
      cluster = new Cluster(config, link, presence, peers, registry, log);
      const self = cluster;
      self.#ports = deps.ports;
      self.#udpLimits = deps.udpLimits;
      self.#udpTotals = deps.udpTotals;
      self.#tokens = tokens;
      presence.onNodeUp = (info) => peers.want(info.node, info.advertise);
      presence.onNodeGone = (info) => self.#nodeGone(info);
      // After NATS came back: every bucket but presence read again (watches restarted) and this
      // node's records checked, after a random delay (see link.onState below).
      const reread = new RereadTimer({
        spreadMs: config.rereadSpreadMs,
        random: deps.random,
        run: () => {
          log.info("reading the cluster's buckets again");
          deps.count("cluster_reread");
          void registry!.resync().then(() => registry!.reassert({ rewrite: false }))
            .catch(() => {});
          void tokens.refollow().catch(() => {});
          void self.#acme?.refollow().catch(() => {});
        },
      });
      self.#reread = reread;
      // Now and then, check that this node's records are still there as it wrote them (a NATS
      // failover, or a node that wrongly took us for gone): one read per record of its own.
      presence.onBeat = (beats) => {
        // While a re-read is pending the watches are not checked: a stalled one would be read
        // whole now and again by the re-read.
        if (beats % CHECK_WATCHES_EVERY_BEATS === 0 && !reread.pending) {
          // That the watches still follow the buckets (a watch can stall silently): one request
          // per bucket; a bucket is read whole again only if its watch fell behind.
          void registry!.checkWatches().catch(() => {});
          // The tokens bucket's too: a stalled watch would keep a revoked token working here.
          void tokens.check().catch(() => {});
        }
        // Reads only: a record still as this node wrote it is not written again (each write
        // reaches every node).
        if (beats % REASSERT_EVERY_BEATS === 0) void registry!.reassert({ rewrite: false });
      };
      presence.onSelfLost = () => {
        void registry!.reassert();
        // Once more after a TTL: a node that saw us gone may have removed a record after we
        // wrote it again (its delete races with our write).
        self.#later(config.presenceTtlMs, () => registry!.reassert());
      };
      link.onState = (state) => {
        // Away again before the delay ran out: that re-read is dropped, the next return draws
        // a new delay (reconnections never stack re-reads).
        if (state !== "connected") return reread.cancel();
        self.#reconnectedAt = Date.now();
        registry!.settleUntil = Date.now() + SETTLE_TTLS * config.presenceTtlMs;
        // At once: what other nodes judge this one by, and what this node judges them by.
        // - Its presence entry: were it lost (NATS away longer than the TTL), the others would
        //   release its ports after settling. The beat finds it lost and writes it again, and
        //   `onSelfLost` re-asserts this node's claims at once (rewritten: a node that saw this
        //   one gone may be removing them). That, not the re-read, is what keeps its visitors.
        // - The presence bucket (one small entry per node): whether a record's node is alive
        //   decides what is released and taken over once the settling ends.
        presence.beatNow();
        void presence.refollow().catch(() => {});
        // After a random delay below `rereadSpreadMs`: every node reconnects in the same instant
        // after a NATS restart, and reading the ports, services, hosts, tokens and ACME buckets
        // whole is the load. Meanwhile this node serves from its copy, as it did while NATS was
        // away (a watch that survived the outage keeps it current). Its own records are checked
        // then too, written only where missing or changed: with its presence intact no node had
        // cause to remove them (lost, `onSelfLost` has rewritten them already), and a rewrite of
        // every record reaches every node's watch.
        const delayMs = reread.schedule();
        if (delayMs > 0) log.info("NATS is back: reading the buckets again shortly", { delayMs });
      };
      registry.onClaimLost = (claim) => self.#claimLost(claim);
      registry.watch((change) => {
        if (change.kind !== "port") return;
        if (change.claim.node === config.node) return;
        if (change.op === "claimed") self.#openRelay(change.claim);
        else if (change.op === "changed") self.#updateRelay(change.claim);
        else self.#dropRelay(change.claim);
      });
      for (const info of presence.nodes()) peers.want(info.node, info.advertise);
      await registry.start();
      const eventsOf = (node: string) => `${config.bucketPrefix}.events.${node}`;
      deps.events.subscribe((event) => {
        const subject = eventsOf(config.node);
        link.publish(subject, seal(keys, subject, event));
      });
      link.subscribe(eventsOf("*"), (text, subject) => {
        const event = openSigned(keys, subject, text);
        if (typeof event?.type !== "string" || typeof event.fields !== "object") return;
        const node = subject.slice(subject.lastIndexOf(".") + 1);
        self.events.publish(event.type as DaemonEventType, { ...event.fields, node });
      });
      return cluster;
    } catch (error) {
      peers.close();
      await presence.stop().catch(() => {});
      await link.close();
      throw error;
    }
  }

  /** A stream relayed from another node: a visitor of one of our tunnels, or a service user. */
  #relayed(stream: Stream, header: StreamHeader, rest: Uint8Array, node: string): void {
    if (header.kind === "visitor" || header.kind === "udpVisitor") {
      // A TCP visitor for a UDP tunnel, or a flow for a TCP one: never passed on as the other.
      const protocol = header.kind === "udpVisitor" ? "udp" : undefined;
      const tunnel = this.registry.tunnel(header.tunnel);
      if (tunnel && tunnel.protocol !== protocol) return stream.reset(ResetReason.UnknownTunnel);
      if (tunnel) return tunnel.relayed(stream, header.remote, header.local, rest);
      // A route is claimed (and seen by other nodes) a moment before its tunnel is registered
      // here, once its port is bound: a visitor relayed in between waits for it, briefly.
      let stop = () => {};
      const timer = setTimeout(() => {
        stop();
        stream.reset(ResetReason.UnknownTunnel);
      }, RELAY_TUNNEL_WAIT_MS);
      stop = this.registry.watch((change) => {
        if (change.kind !== "tunnel" || change.op !== "added" || change.id !== header.tunnel) {
          return;
        }
        const added = this.registry.tunnel(header.tunnel);
        if (!added) return;
        clearTimeout(timer);
        stop();
        if (added.protocol !== protocol) return stream.reset(ResetReason.UnknownTunnel);
        added.relayed(stream, header.remote, header.local, rest);
      });
      return;
    }
    if (header.kind === "service") {
      // Only an offer of this node: never relay a relayed stream again.
      const offer = this.registry.service(header.service, true);
      if (!offer) return stream.reset(ResetReason.UnknownService);
      return void connectService(stream, offer, header.from ?? `node ${node}`, rest);
    }
    stream.reset(ResetReason.BadHeader);
  }

  /** Another node claimed a port: listen on it here too and relay its visitors to the owner. */
  #openRelay(claim: PortClaim): void {
    if (this.#config.visitors !== "all" || this.#stopped) return;
    const key = relayKey(claim);
    if (this.#relays.has(key)) return;
    const relay: Relay = { claim, route: undefined, closed: false };
    this.#relays.set(key, relay);
    const bindHost = this.#config.tunnelHost ?? claim.bindHost;
    if (claim.protocol === "udp") return this.#openUdpRelay(relay, bindHost);
    this.#ports.open(bindHost, claim.port).then((listener) => {
      if (relay.closed) return;
      const route = new RelayRoute({
        claim: relay.claim, // the latest rules, if they changed while the port was bound
        opener: this.#peers.opener(claim.node),
        bindHost,
        port: claim.port,
        up: () =>
          this.#peers.connected(claim.node) &&
          this.registry.routeHealthy(claim.port, claim.node, claim.tunnel),
        log: this.#log,
      });
      this.#ports.attach(listener, route);
      relay.route = route;
      this.#log.info("relaying a cluster tunnel", {
        bind: `${bindHost}:${claim.port}`,
        owner: claim.node,
        tunnel: claim.tunnel,
      });
    }, (error) => {
      this.#log.warn("cannot bind a cluster tunnel's port here", {
        bind: `${bindHost}:${claim.port}`,
        owner: claim.node,
        detail: (error as Error).message,
      });
    });
  }

  /**
   * A UDP claim of another node: a route on the port's UDP socket here (bound with its first
   * route), each new flow the port gives it relayed as one stream.
   */
  #openUdpRelay(relay: Relay, bindHost: string): void {
    const { claim } = relay;
    const limits = this.#udpLimits?.();
    this.#ports.openUdp(bindHost, claim.port, { idleMs: limits?.idleMs }).then((port) => {
      const route = new UdpRelayRoute({
        claim: relay.claim, // the latest rules, if they changed while the port was bound
        bindHost,
        maxFlows: limits?.maxFlows,
        opener: this.#peers.opener(claim.node),
        up: () =>
          this.#peers.connected(claim.node) &&
          this.registry.routeHealthy(claim.port, claim.node, claim.tunnel, "udp"),
      });
      this.#ports.attach(port, route);
      // The claim went while the port was bound: off again (the port with it, if it was alone).
      if (relay.closed) return this.#closeUdpRelay(route);
      relay.udp = route;
      this.#log.info("relaying a cluster tunnel", {
        bind: `${bindHost}:${claim.port}`,
        protocol: "udp",
        owner: claim.node,
        tunnel: claim.tunnel,
      });
    }, (error) => {
      this.#log.warn("cannot bind a cluster tunnel's port here", {
        bind: `${bindHost}:${claim.port}`,
        protocol: "udp",
        owner: claim.node,
        detail: (error as Error).message,
      });
    });
  }

  /** A route of `claim`'s port changed its rules: this node's relay to it applies them next. */
  #updateRelay(claim: PortClaim): void {
    const relay = this.#relays.get(relayKey(claim));
    if (!relay || relay.claim.node !== claim.node || relay.claim.tunnel !== claim.tunnel) return;
    relay.claim = claim;
    relay.udp?.update(claim);
    relay.route?.update(claim, undefined);
  }

  /** A route of `claim`'s port went: this node's relay to it closes. */
  #dropRelay(claim: PortClaim): void {
    const relay = this.#relays.get(relayKey(claim));
    if (!relay) return;
    if (relay.claim.node !== claim.node || relay.claim.tunnel !== claim.tunnel) return;
    this.#closeRelay(relay);
  }

  /**
   * Stops taking visitors for a claim that went. Visitors already relayed go on until they end
   * (or the relay session does): a claim can go and come back when NATS was away.
   */
  #closeRelay(relay: Relay): void {
    relay.closed = true;
    const key = relayKey(relay.claim);
    if (this.#relays.get(key) === relay) this.#relays.delete(key);
    // A UDP relay's flows end with it (their visitors' next datagrams open flows on the port's
    // routes that are left), and the port is freed with its last route.
    if (relay.udp) this.#closeUdpRelay(relay.udp);
    relay.udp = undefined;
    const route = relay.route;
    if (!route) return;
    route.stopAccepting();
    this.#ports.detach(route);
    if (route.active === 0) return;
    this.#draining.add(relay);
    const check = () => {
      if (route.active > 0 && !this.#stopped) return this.#later(1_000, check);
      this.#draining.delete(relay);
    };
    this.#later(1_000, check);
  }

  /** Ends a UDP relay's flows, frees its port if it was the last route, keeps its counts. */
  #closeUdpRelay(route: UdpRelayRoute): void {
    route.close();
    this.#ports.detach(route);
    if (this.#udpTotals) addUdpCounters(this.#udpTotals, route.udp, false);
  }

  /**
   * Presence says a node run is gone. Right after NATS came back every entry may have expired
   * at once (the server kept them while away), and live nodes write theirs again within a beat:
   * then wait a TTL and act only on those still gone.
   */
  #nodeGone(info: NodeInfo): void {
    const act = () => {
      if (this.#stopped || this.#presence.alive(info.node, info.run)) return;
      this.#peers.unwant(info.node);
      void this.registry.nodeGone(info.node, info.run);
    };
    const ttl = this.#config.presenceTtlMs;
    const unsettled = this.#link.state !== "connected" ||
      Date.now() - this.#reconnectedAt < SETTLE_TTLS * ttl;
    if (unsettled) this.#later(SETTLE_TTLS * ttl, act);
    else act();
  }

  #later(ms: number, run: () => void): void {
    const timer = setTimeout(() => {
      this.#timers.delete(timer);
      run();
    }, ms);
    this.#timers.add(timer);
  }

  /** A port of ours was taken over while we were away: stop serving it. */
  #claimLost(claim: PortClaim): void {
    const owner = this.registry.tunnelOwner(claim.tunnel);
    if (owner) owner.closeTunnel(claim.tunnel, "port taken over by another node of the cluster");
    else this.registry.tunnel(claim.tunnel)?.close();
  }
}

/**
 * Every key this node signs with and accepts: `cluster.key`, then `cluster.previousKeys`
 * (`docs/cluster.md`, rotating the key).
 */
export function clusterKeys(config: ClusterConfig): string[] {
  return [config.key, ...config.previousKeys];
}

/** The key of a route to another node: its port (`udp/` first for UDP), node and tunnel. */
function relayKey(claim: PortClaim): string {
  const key = `${claim.port}/${claim.node}/${claim.tunnel}`;
  return claim.protocol === "udp" ? `udp/${key}` : key;
}

/** Joins the cluster `config` describes (see {@linkcode Cluster.join}). */
export function joinCluster(config: ClusterConfig, deps: ClusterDeps): Promise<Cluster> {
  return Cluster.join(config, deps);
}
