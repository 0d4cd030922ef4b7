/**
 * The {@linkcode Registry} of a cluster node: live, node-local objects (sessions, tunnels, the
 * yamux sessions behind offers) in a {@linkcode LocalRegistry}, and the shared records (public
 * ports, service offers) in NATS JetStream KV, one bucket per kind.
 *
 * No port is ever held by two owners:
 * - a claim is a KV `create` (create-if-absent): of two claims of a port, however close
 *   together, the server accepts exactly one;
 * - a claim names its node and the node's run; a claim whose node run is no longer present is
 *   stale and may be taken over, but only with `update` at the revision that was read, so two
 *   nodes taking over the same stale claim cannot both win;
 * - a claim is released only by its holder, with a delete at the revision it wrote, so a late
 *   release cannot remove somebody else's claim; stale claims of a gone node are removed the
 *   same way by whichever live node gets there first.
 *
 * Changes made anywhere reach every node through KV watches, and {@linkcode Registry.watch}
 * reports them (remote port claims are what makes a node bind relay listeners).
 *
 * @module
 */

import { type HttpPolicy, parseHttpPolicy, underPrefix } from "../../tunnel/policy/http_policy.ts";
import type { LocalRegistry } from "../registry/local_registry.ts";
import type {
  ClaimResult,
  HostClaim,
  HostRoute,
  PortClaim,
  Registry,
  RegistryChange,
  RouteClaim,
  ServiceOffer,
  ServiceRecord,
  SessionHandle,
  TunnelHandle,
} from "../registry/registry.ts";
import type { TokenRegistry } from "../tokens/store.ts";
import type { Logger } from "../../util/log.ts";
import type { KvBucket, KvEntry, NatsLink } from "./nats.ts";
import { ClusterPorts } from "./cluster_ports.ts";
import { ClusterClaims, routeClaim } from "./claims.ts";
import { type Balance, chooseRoute } from "../registry/route_choice.ts";
import type { StreamOpener } from "./peers.ts";
import type { Presence } from "./presence.ts";
import { RelayRoute } from "./relay_route.ts";
import { Follower } from "./follower.ts";

/** One offer of a named service as a route (its id in its node is its session). */
type ServiceClaim = RouteClaim & { readonly name: string; readonly balance?: Balance };

/**
 * The KV key of a host name (host names are [a-z0-9.-] once validated, which KV keys allow), and
 * of a path prefix under it (hex after a `_`, which no host name has: each place its own record).
 */
export function hostKeyOf(host: string, pathPrefix?: string): string {
  return pathPrefix ? `host-${host}_${hexOf(pathPrefix)}` : `host-${host}`;
}

/** `text`'s UTF-8 bytes in hex, for KV keys. */
function hexOf(text: string): string {
  return Array.from(new TextEncoder().encode(text), (b) => b.toString(16).padStart(2, "0")).join(
    "",
  );
}

/** Where a name's route is kept here: the name, or the name and its path prefix. */
function placeOf(claim: HostClaim): string {
  return claim.pathPrefix ? claim.host + claim.pathPrefix : claim.host;
}

/** The KV key of a service name (names that are not key-safe are hex-encoded). */
export function serviceKeyOf(name: string): string {
  if (/^[A-Za-z0-9_-]+$/.test(name)) return `svc-${name}`;
  return `svx-${hexOf(name)}`;
}

/** How to build a {@linkcode ClusterRegistry}. */
export interface ClusterRegistryOptions {
  /** The node-local part. Its node name is this node's. */
  local: LocalRegistry;
  /** NATS and its buckets. */
  link: NatsLink;
  /** Who is alive. */
  presence: Presence;
  /** Opens relay streams to another node. */
  opener: (node: string) => StreamOpener;
  /**
   * Whether a relay session to `node` is up: a dead node's offers take no users even before its
   * presence expires. Default: always.
   */
  reachable?: (node: string) => boolean;
  /**
   * Whether this node may fetch `url` for a JWT or OIDC rule of another node's HTTP tunnel (see
   * `RelayRoute`); default: any.
   */
  mayFetch?: (url: string) => boolean;
  /** Where registry trouble is logged. */
  log: Logger;
  /** Counts registry operations and their failures, by name. */
  count: (event: string) => void;
  /** Minted tokens, shared by the cluster (a store over the `tokens` bucket). */
  tokens: TokenRegistry;
  /**
   * The presence TTL, ms. A record of a node run that presence does not know is stale only once
   * it is older than this: the node may have just started and its presence not reached us yet.
   */
  presenceTtlMs: number;
}

/** A cluster node's registry. */
export class ClusterRegistry implements Registry {
  readonly node: string;
  readonly tokens: TokenRegistry;
  /**
   * A claim this node held was taken by another node while this one was away: the tunnel must
   * stop serving the port. Set by the cluster.
   */
  onClaimLost: ((claim: PortClaim) => void) | null = null;

  readonly #options: ClusterRegistryOptions;
  readonly #local: LocalRegistry;
  /** Public ports and their routes (the `ports` bucket). */
  readonly #ports: ClusterPorts;
  /** Named services and their offers (the `services` bucket). */
  readonly #services: ClusterClaims<ServiceClaim>;
  /** Host names of HTTP and TLS tunnels and their one route (the `hosts` bucket). */
  readonly #hosts: ClusterClaims<HostClaim>;
  /**
   * Other nodes' host names as this node reaches them: a relay route each, by place (the name, or
   * the name and a path prefix).
   */
  readonly #remoteHosts = new Map<string, RelayRoute>();
  /** The path prefixes other nodes' tunnels hold, by host name. */
  readonly #remotePrefixes = new Map<string, string[]>();
  /** Other nodes' offers as this node reaches them (over relays), with their counters. */
  readonly #remoteOffers = new Map<string, ServiceOffer>();
  /** Counts service choices, so that offers are taken in turn. */
  #turn = 0;
  readonly #watchers = new Set<(change: RegistryChange) => void>();
  readonly #stops: (() => void)[] = [];
  /** The watches of the ports, services and hosts buckets. */
  readonly #followers: Follower[];

  /** A registry over `options.local` and the cluster's buckets; call {@linkcode start}. */
  constructor(options: ClusterRegistryOptions) {
    this.#options = options;
    this.#local = options.local;
    this.node = options.local.node;
    this.tokens = options.tokens;
    // What the claims buckets (ports, services, hosts) judge liveness and staleness by.
    const common = {
      node: this.node,
      run: () => options.presence.run,
      alive: (node: string, run: string) => options.presence.alive(node, run),
      settled: () => Date.now() >= this.settleUntil,
      connected: () => options.link.state === "connected",
      ttlMs: options.presenceTtlMs,
      count: options.count,
      log: options.log,
    };
    this.#ports = new ClusterPorts({
      ...common,
      bucket: options.link.ports,
      emit: (change) => this.#emit(change),
    });
    this.#services = new ClusterClaims<ServiceClaim>({
      ...common,
      bucket: options.link.services,
      noun: "service",
      kind: {
        keyOf: (claim) => serviceKeyOf(claim.name),
        subjectOf: (claim) => ({ name: claim.name, balance: claim.balance }),
        claimOf: (record, route) => ({
          ...routeClaim(record, route),
          name: record.name as string,
          balance: record.balance as Balance | undefined,
        }),
      },
      // This node's own offers are reported by the local part.
      onRoute: (op, claim) => {
        if (claim.node === this.node) return;
        if (op === "removed") this.#remoteOffers.delete(remoteKey(claim));
        this.#emit({
          kind: "service",
          op: op === "added" ? "offered" : "withdrawn",
          record: recordOf(claim),
        });
      },
    });
    this.#hosts = new ClusterClaims<HostClaim>({
      ...common,
      bucket: options.link.hosts,
      noun: "host",
      kind: {
        keyOf: (claim) => hostKeyOf(claim.host, claim.pathPrefix),
        // `http` undefined (not left out): a change that drops the rules drops them from the record.
        subjectOf: (claim) => ({
          host: claim.host,
          passthrough: claim.passthrough,
          http: claim.http,
          pathPrefix: claim.pathPrefix,
        }),
        claimOf: (record, route) => {
          const http = record.http === undefined ? undefined : recordPolicy(record.http);
          return {
            ...routeClaim(record, route),
            host: record.host as string,
            passthrough: record.passthrough === true,
            ...(http ? { http } : {}),
            // The prefix is the rules' own (checked with them), so a record cannot say another.
            ...(http?.pathPrefix ? { pathPrefix: http.pathPrefix } : {}),
          };
        },
      },
      // Another node's tunnel changed its rules in place: its route here applies them next.
      onChange: (claim) => {
        const current = this.#remoteHosts.get(placeOf(claim));
        if (claim.node !== this.node && current?.id === claim.tunnel) {
          current.update(claim, claim.http);
        }
      },
      // Another node's name: reach it here through a relay route to that node, whose visitors
      // (HTTP requests, TLS connections) cross the relay session to the tunnel's own node.
      onRoute: (op, claim) => {
        if (claim.node === this.node) return;
        const place = placeOf(claim);
        const current = this.#remoteHosts.get(place);
        if (op === "removed") {
          if (current?.id === claim.tunnel) {
            this.#remoteHosts.delete(place);
            this.#setRemotePrefix(claim, false);
            current.stopAccepting();
          }
          return;
        }
        if (current?.id === claim.tunnel) return;
        current?.stopAccepting();
        this.#setRemotePrefix(claim, true);
        this.#remoteHosts.set(
          place,
          new RelayRoute({
            claim,
            opener: options.opener(claim.node),
            bindHost: claim.host,
            port: 0,
            passthrough: claim.passthrough,
            httpPolicy: claim.http,
            mayFetch: options.mayFetch,
            up: () => options.reachable?.(claim.node) ?? true,
            log: options.log,
          }),
        );
      },
    });
    const follow = (
      name: string,
      bucket: KvBucket,
      records: { apply(entry: KvEntry): void; forget(key: string): void; keys(): Iterable<string> },
    ) =>
      new Follower({
        name,
        bucket,
        apply: (entry) => records.apply(entry),
        // Missing from the listing: gone, unless written since (confirm before forgetting).
        reconcile: async (listed) => {
          for (const key of [...records.keys()]) {
            if (listed.has(key)) continue;
            const entry = await bucket.get(key);
            if (entry?.operation === "PUT") records.apply(entry);
            else records.forget(key);
          }
        },
        onStall: (what) => {
          options.count("registry_watch_stalled");
          options.log.warn("cluster watch fell behind; reading the bucket again", {
            bucket: what,
          });
        },
      });
    this.#followers = [
      follow("ports", options.link.ports, this.#ports),
      follow("services", options.link.services, this.#services),
      follow("hosts", options.link.hosts, this.#hosts),
    ];
    // Sessions, tunnels and this node's offers change in the local part; pass those on.
    this.#stops.push(options.local.watch((change) => {
      if (change.kind === "session" || change.kind === "tunnel" || change.kind === "service") {
        this.#emit(change);
      }
    }));
  }

  /** Loads the shared records and follows their changes. */
  async start(): Promise<void> {
    await this.resync();
  }

  /**
   * (Re)starts following the shared buckets and reconciles with what is in them: records this
   * node missed are applied, records gone meanwhile are forgotten. Run at start, after NATS
   * came back (a watch may not survive a server failover) and now and then.
   */
  async resync(): Promise<void> {
    for (const follower of this.#followers) await follower.start();
  }

  /**
   * Whole reads of the ports, services and hosts buckets so far, one per bucket each time: at
   * start, after NATS came back, after a watch fell behind.
   */
  get reads(): number {
    return this.#followers.reduce((sum, follower) => sum + follower.reads, 0);
  }

  /**
   * Checks that the watches still follow their buckets: one request per bucket, whatever the
   * number of records and nodes; a bucket is read whole again only when its watch fell behind
   * (see `follower.ts`). Resolves to how many had.
   */
  async checkWatches(): Promise<number> {
    let stalled = 0;
    for (const follower of this.#followers) if (!(await follower.check())) stalled++;
    return stalled;
  }

  /** Stops following. Claims stay until released (or until this node's presence expires). */
  stop(): void {
    this.#ports.stop();
    this.#services.stop();
    this.#hosts.stop();
    for (const stop of this.#stops) stop();
    for (const follower of this.#followers) follower.stop();
  }

  // ---- sessions and tunnels: node-local ----

  addSession(session: SessionHandle): void {
    this.#local.addSession(session);
  }
  removeSession(id: string): void {
    this.#local.removeSession(id);
  }
  session(id: string): SessionHandle | undefined {
    return this.#local.session(id);
  }
  sessions(): SessionHandle[] {
    return this.#local.sessions();
  }
  get sessionCount(): number {
    return this.#local.sessionCount;
  }
  addTunnel(tunnel: TunnelHandle, sessionId: string): void {
    this.#local.addTunnel(tunnel, sessionId);
  }
  removeTunnel(id: string): TunnelHandle | undefined {
    return this.#local.removeTunnel(id);
  }
  tunnel(id: string): TunnelHandle | undefined {
    return this.#local.tunnel(id);
  }
  tunnelOwner(id: string): SessionHandle | undefined {
    return this.#local.tunnelOwner(id);
  }
  tunnels(): TunnelHandle[] {
    return this.#local.tunnels();
  }
  closeTunnel(id: string, reason: string): boolean {
    return this.#local.closeTunnel(id, reason);
  }

  // ---- host names: cluster-wide, one route each ----

  /** Path prefixes of HTTP tunnels: each place of a name is its own record. */
  readonly pathPrefixes = true;

  async claimHost(claim: HostClaim, tunnel: TunnelHandle): Promise<ClaimResult<HostClaim>> {
    // The places of one name are one client's, as on a single node: judged by this node's view
    // of the records (each place is its own record, so two clients starting on two nodes at the
    // same instant could both pass; the name's own record is still held by one).
    for (const { record } of this.#hosts.records()) {
      if (record.host !== claim.host || record.client === claim.client) continue;
      if (record.routes.some((r) => this.#hosts.isLive(r))) return { ok: false, reason: "taken" };
    }
    const result = await this.#hosts.claim(claim);
    if (!result.ok) return result;
    const local = await this.#local.claimHost(claim, tunnel);
    if (!local.ok) await this.#hosts.release(claim);
    return local;
  }

  async releaseHost(claim: HostClaim, tunnel: TunnelHandle): Promise<void> {
    await this.#local.releaseHost(claim, tunnel);
    await this.#hosts.release(claim);
  }

  /** Writes the rules `claim` carries now into the name's record (a tunnel's changed in place). */
  updateHost(claim: HostClaim): Promise<void> {
    return this.#hosts.update(claim);
  }

  /**
   * The route of `host`: given a request's `path`, the place of the longest prefix it lies
   * under, this node's tunnel or a relay to another node's, else the name's own.
   */
  hostRoute(host: string, path?: string): HostRoute | undefined {
    if (path !== undefined) {
      const prefixes = [...this.#local.prefixesOf(host), ...this.#remotePrefixes.get(host) ?? []]
        .sort((a, b) => b.length - a.length);
      for (const prefix of prefixes) {
        if (!underPrefix(path, prefix)) continue;
        const route = this.#local.hostAt(host, prefix) ?? this.#remoteHosts.get(host + prefix);
        if (route) return route;
      }
    }
    return this.#local.hostAt(host) ?? this.#remoteHosts.get(host);
  }

  /** Notes (or forgets) the path prefix of another node's route to `claim.host`. */
  #setRemotePrefix(claim: HostClaim, held: boolean): void {
    const prefix = claim.pathPrefix;
    if (!prefix) return;
    const prefixes = (this.#remotePrefixes.get(claim.host) ?? []).filter((p) => p !== prefix);
    if (held) prefixes.push(prefix);
    if (prefixes.length > 0) this.#remotePrefixes.set(claim.host, prefixes);
    else this.#remotePrefixes.delete(claim.host);
  }

  // ---- ports: cluster-wide ----

  claimPort(claim: PortClaim): Promise<ClaimResult> {
    return this.#ports.claim(claim);
  }

  releasePort(claim: PortClaim): Promise<void> {
    return this.#ports.release(claim);
  }

  /** Writes the visitor policy `claim` carries now into the port's record. */
  updatePort(claim: PortClaim): Promise<void> {
    return this.#ports.update(claim);
  }

  setRouteHealth(claim: PortClaim, healthy: boolean): Promise<void> {
    return this.#ports.setHealth(claim, healthy);
  }

  /** Whether the route `tunnel` of `node` on `port` is healthy, as its record says. */
  routeHealthy(port: number, node: string, tunnel: string, protocol?: "udp"): boolean {
    return this.#ports.routeHealthy(port, node, tunnel, protocol);
  }

  ownerPort(owner: string, bindHost: string): Promise<number | undefined> {
    return this.#ports.ownerPort(owner, bindHost);
  }

  portHolder(_bindHost: string, port: number, protocol?: "udp"): Promise<PortClaim | undefined> {
    return Promise.resolve(this.#ports.holder(port, protocol));
  }

  /** Every live route in the cluster (this node's included), by port. */
  claims(): PortClaim[] {
    return this.#ports.claims();
  }

  // ---- services: cluster-wide names ----

  async offerService(offer: ServiceOffer): Promise<ClaimResult<ServiceRecord>> {
    const claim = serviceClaimOf(offer);
    const result = await this.#services.claim(claim);
    if (!result.ok) {
      return { ok: false, reason: result.reason, holder: result.holder && recordOf(result.holder) };
    }
    const local = await this.#local.offerService(offer);
    if (!local.ok) await this.#services.release(claim);
    return local;
  }

  async withdrawService(name: string, sessionId: string): Promise<boolean> {
    const offer = this.#local.services().find((o) => o.name === name && o.session === sessionId);
    if (!offer || !await this.#local.withdrawService(name, sessionId)) return false;
    await this.#services.release(serviceClaimOf(offer));
    return true;
  }

  async withdrawServices(sessionId: string): Promise<void> {
    for (const offer of this.#local.services()) {
      if (offer.session === sessionId) await this.withdrawService(offer.name, sessionId);
    }
  }

  async setServiceHealth(name: string, sessionId: string, healthy: boolean): Promise<boolean> {
    const offer = this.#local.services().find((o) => o.name === name && o.session === sessionId);
    if (!offer || !await this.#local.setServiceHealth(name, sessionId, healthy)) return false;
    await this.#services.setHealth(serviceClaimOf(offer), healthy);
    return true;
  }

  service(name: string, localOnly = false): ServiceOffer | undefined {
    const local = this.#local.services().filter((o) => o.name === name);
    const candidates = local.map((offer) => ({
      offer,
      local: true,
      healthy: offer.healthy,
      active: offer.stats.active,
    }));
    const remote = localOnly ? [] : this.#remoteRoutes(name);
    for (const offer of remote) {
      candidates.push({ offer, local: false, healthy: offer.healthy, active: offer.stats.active });
    }
    const balance = local[0]?.balance ?? remote[0]?.balance ?? "round_robin";
    return chooseRoute(candidates, balance, this.#turn++)?.offer;
  }

  services(): ServiceOffer[] {
    const names = new Set(this.#services.claims().map((claim) => claim.name));
    const remote = [...names].flatMap((name) => this.#remoteRoutes(name));
    return [...this.#local.services(), ...remote].sort((a, b) => a.name.localeCompare(b.name));
  }

  /** The live offers of `name` held on other nodes, reached over relays. */
  #remoteRoutes(name: string): ServiceOffer[] {
    return this.#services.liveRoutes(serviceKeyOf(name))
      .filter(({ claim }) => claim.node !== this.node)
      .map(({ claim, healthy }) => {
        const key = remoteKey(claim);
        let offer = this.#remoteOffers.get(key);
        if (!offer) {
          offer = {
            ...recordOf(claim),
            yamux: this.#options.opener(claim.node),
            healthy,
            stats: { aToB: 0, bToA: 0, connections: 0, active: 0 },
          };
          this.#remoteOffers.set(key, offer);
        }
        offer.healthy = healthy && (this.#options.reachable?.(claim.node) ?? true);
        return offer;
      });
  }

  watch(listener: (change: RegistryChange) => void): () => void {
    this.#watchers.add(listener);
    return () => this.#watchers.delete(listener);
  }

  // ---- presence ----

  /**
   * A node run is gone: its records are stale. Forget them here at once (relay listeners close),
   * and remove them from the buckets at the revision seen, unless another node already did.
   */
  async nodeGone(node: string, run: string): Promise<void> {
    await this.#ports.nodeGone(node, run);
    await this.#services.nodeGone(node, run);
  }

  /**
   * Writes this node's records again where they went missing (this node's presence expired, or
   * NATS lost them), and gives up those another node took in the meantime. `rewrite: false`
   * (the periodic check) leaves records that hold this node's routes as they are unwritten.
   */
  async reassert(options: { rewrite?: boolean } = {}): Promise<void> {
    const { log } = this.#options;
    for (const claim of await this.#ports.reassert(options)) {
      log.warn("port taken over by another node while this one was away; closing the tunnel", {
        port: claim.port,
        tunnel: claim.tunnel,
      });
      this.onClaimLost?.(claim);
    }
    for (const claim of await this.#hosts.reassert(options)) {
      log.warn("host name taken over by another node while this one was away; released", {
        host: claim.host,
        tunnel: claim.tunnel,
      });
      const tunnel = this.#local.hostAt(claim.host, claim.pathPrefix);
      if (tunnel?.id === claim.tunnel) await this.#local.releaseHost(claim, tunnel);
    }
    for (const claim of await this.#services.reassert(options)) {
      log.warn("service taken over by another owner while this node was away; withdrawn", {
        service: claim.name,
        session: claim.session,
      });
      await this.#local.withdrawService(claim.name, claim.session);
    }
  }

  /**
   * Until then, records of nodes presence does not know are not taken over: NATS just came back,
   * every entry may have expired at once, and live nodes are still writing theirs again.
   */
  settleUntil = 0;

  #emit(change: RegistryChange): void {
    for (const watcher of this.#watchers) {
      try {
        watcher(change);
      } catch {
        // A broken watcher must not break the registry.
      }
    }
  }
}

/** The cluster route of an offer of this node. */
function serviceClaimOf(offer: ServiceOffer): ServiceClaim {
  return {
    name: offer.name,
    balance: offer.balance,
    tunnel: offer.session,
    session: offer.session,
    client: offer.client,
    node: offer.node,
    owner: offer.owner ?? `client:${offer.client}`,
    shared: true,
  };
}

/** The record of an offer, from its cluster route. */
/**
 * Another node's record of a tunnel's `policy.http`, checked as a client's would be; one this
 * node cannot read (a newer node's rule) lets nobody in rather than being ignored.
 */
function recordPolicy(value: unknown): HttpPolicy {
  const parsed = parseHttpPolicy(value, "http");
  return parsed.ok ? parsed.policy : { basicAuth: [] };
}

function recordOf(claim: ServiceClaim): ServiceRecord {
  const { name, client, session, node, owner, balance } = claim;
  return { name, client, session, node, owner, balance };
}

/** Where an offer of another node is kept: node, session and name. */
function remoteKey(claim: ServiceClaim): string {
  return `${claim.node}/${claim.session}/${claim.name}`;
}
