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

import type { ReverseTunnel } from "../reverse_tunnel.ts";
import type { LocalRegistry } from "../registry/local_registry.ts";
import type {
  ClaimResult,
  PortClaim,
  Registry,
  RegistryChange,
  ServiceOffer,
  ServiceRecord,
  SessionHandle,
} from "../registry/registry.ts";
import type { TokenRegistry } from "../tokens/store.ts";
import type { Logger } from "../../util/log.ts";
import { isRevisionConflict, type KvBucket, type KvEntry, type NatsLink } from "./nats.ts";
import { ClusterPorts } from "./cluster_ports.ts";
import type { StreamOpener } from "./peers.ts";
import type { Presence } from "./presence.ts";

/** A record as stored in KV: the record, plus the run of the node that wrote it. */
type Stored<T> = T & { run: string };

interface Held<T> {
  record: Stored<T>;
  revision: number;
  /** When the server stored it (ms since the epoch). */
  created: number;
}

/** The KV key of a service name (names that are not key-safe are hex-encoded). */
export function serviceKeyOf(name: string): string {
  if (/^[A-Za-z0-9_-]+$/.test(name)) return `svc-${name}`;
  return `svx-${
    Array.from(new TextEncoder().encode(name), (b) => b.toString(16).padStart(2, "0")).join("")
  }`;
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
  /** Every offer in the bucket, by key (from the watch), with counters for remote ones. */
  readonly #services = new Map<string, Held<ServiceRecord> & { offer?: ServiceOffer }>();
  readonly #myServices = new Map<string, Held<ServiceRecord>>();
  readonly #watchers = new Set<(change: RegistryChange) => void>();
  readonly #stops: (() => void)[] = [];
  readonly #watches = new Map<string, { stop(): void }>();

  /** A registry over `options.local` and the cluster's buckets; call {@linkcode start}. */
  constructor(options: ClusterRegistryOptions) {
    this.#options = options;
    this.#local = options.local;
    this.node = options.local.node;
    this.tokens = options.tokens;
    this.#ports = new ClusterPorts({
      bucket: options.link.ports,
      node: this.node,
      run: () => options.presence.run,
      alive: (node, run) => options.presence.alive(node, run),
      settled: () => Date.now() >= this.settleUntil,
      connected: () => options.link.state === "connected",
      ttlMs: options.presenceTtlMs,
      emit: (change) => this.#emit(change),
      count: options.count,
      log: options.log,
    });
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
    const { link } = this.#options;
    await this.#follow(
      "ports",
      link.ports,
      (entry) => this.#ports.apply(entry),
      (key) => this.#ports.forget(key),
      () => this.#ports.keys(),
    );
    await this.#follow("services", link.services, (entry) => this.#applyService(entry), (key) => {
      const held = this.#services.get(key);
      if (!held) return;
      this.#services.delete(key);
      if (held.record.node !== this.node) {
        this.#emit({ kind: "service", op: "withdrawn", record: strip(held.record) });
      }
    }, () => this.#services.keys());
  }

  /** Stops following. Claims stay until released (or until this node's presence expires). */
  stop(): void {
    this.#ports.stop();
    for (const stop of this.#stops) stop();
    for (const watch of this.#watches.values()) watch.stop();
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
  addTunnel(tunnel: ReverseTunnel, sessionId: string): void {
    this.#local.addTunnel(tunnel, sessionId);
  }
  removeTunnel(id: string): ReverseTunnel | undefined {
    return this.#local.removeTunnel(id);
  }
  tunnel(id: string): ReverseTunnel | undefined {
    return this.#local.tunnel(id);
  }
  tunnelOwner(id: string): SessionHandle | undefined {
    return this.#local.tunnelOwner(id);
  }
  tunnels(): ReverseTunnel[] {
    return this.#local.tunnels();
  }

  // ---- ports: cluster-wide ----

  claimPort(claim: PortClaim): Promise<ClaimResult> {
    return this.#ports.claim(claim);
  }

  releasePort(claim: PortClaim): Promise<void> {
    return this.#ports.release(claim);
  }

  setRouteHealth(claim: PortClaim, healthy: boolean): Promise<void> {
    return this.#ports.setHealth(claim, healthy);
  }

  /** Whether the route `tunnel` of `node` on `port` is healthy, as its record says. */
  routeHealthy(port: number, node: string, tunnel: string): boolean {
    return this.#ports.routeHealthy(port, node, tunnel);
  }

  ownerPort(owner: string, bindHost: string): Promise<number | undefined> {
    return this.#ports.ownerPort(owner, bindHost);
  }

  portHolder(_bindHost: string, port: number): Promise<PortClaim | undefined> {
    return Promise.resolve(this.#ports.holder(port));
  }

  /** Every live route in the cluster (this node's included), by port. */
  claims(): PortClaim[] {
    return this.#ports.claims();
  }

  // ---- services: cluster-wide names ----

  async offerService(offer: ServiceOffer): Promise<boolean> {
    const record: ServiceRecord = {
      name: offer.name,
      client: offer.client,
      session: offer.session,
      node: offer.node,
    };
    const key = serviceKeyOf(offer.name);
    const result = await this.#claim(this.#options.link.services, key, record, this.#myServices);
    if (!result.ok) {
      const holder = result.holder as ServiceRecord | undefined;
      return holder?.node === this.node && holder.session === offer.session;
    }
    return await this.#local.offerService(offer);
  }

  async withdrawService(name: string, sessionId: string): Promise<boolean> {
    if (!await this.#local.withdrawService(name, sessionId)) return false;
    const key = serviceKeyOf(name);
    const mine = this.#myServices.get(key);
    if (mine && mine.record.session === sessionId) {
      this.#myServices.delete(key);
      await this.#options.link.services.delete(key, { previousSeq: mine.revision }).catch(() =>
        this.#options.count("registry_failure")
      );
    }
    return true;
  }

  async withdrawServices(sessionId: string): Promise<void> {
    for (const offer of this.#local.services()) {
      if (offer.session === sessionId) await this.withdrawService(offer.name, sessionId);
    }
  }

  service(name: string): ServiceOffer | undefined {
    const local = this.#local.service(name);
    if (local) return local;
    const held = this.#services.get(serviceKeyOf(name));
    if (!held || held.record.node === this.node || !this.#live(held.record)) return undefined;
    held.offer ??= {
      ...strip(held.record),
      yamux: this.#options.opener(held.record.node),
      stats: { aToB: 0, bToA: 0, connections: 0, active: 0 },
    };
    return held.offer;
  }

  services(): ServiceOffer[] {
    const all = new Map(this.#local.services().map((o) => [o.name, o]));
    for (const held of this.#services.values()) {
      const offer = this.service(held.record.name);
      if (offer && !all.has(offer.name)) all.set(offer.name, offer);
    }
    return [...all.values()].sort((a, b) => a.name.localeCompare(b.name));
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
    const { link } = this.#options;
    await this.#ports.nodeGone(node, run);
    for (const [key, held] of [...this.#services]) {
      if (held.record.node !== node || held.record.run !== run) continue;
      this.#services.delete(key);
      this.#emit({ kind: "service", op: "withdrawn", record: strip(held.record) });
      await link.services.delete(key, { previousSeq: held.revision }).catch(() => {});
    }
  }

  /**
   * Writes this node's records again where they went missing (this node's presence expired, or
   * NATS lost them), and gives up those another node took in the meantime.
   */
  async reassert(): Promise<void> {
    const { link, log } = this.#options;
    for (const claim of await this.#ports.reassert()) {
      log.warn("port taken over by another node while this one was away; closing the tunnel", {
        port: claim.port,
        tunnel: claim.tunnel,
      });
      this.onClaimLost?.(claim);
    }
    for (const [key, mine] of [...this.#myServices]) {
      if (await this.#reassertOne(link.services, key, mine) === false) {
        this.#myServices.delete(key);
        await this.#local.withdrawService(mine.record.name, mine.record.session);
      }
    }
  }

  /** true: held again; false: someone else holds it; undefined: NATS is away (try later). */
  async #reassertOne<T extends { node: string }>(
    bucket: KvBucket,
    key: string,
    mine: Held<T>,
  ): Promise<boolean | undefined> {
    // Our own record is written again too: a node that saw us gone may be about to delete it at
    // the revision it saw, and must then find the revision moved. A lost race is tried again.
    for (let attempt = 0; attempt < 3; attempt++) {
      try {
        const entry = await bucket.get(key);
        if (entry && entry.operation === "PUT") {
          const held = parse<T>(entry);
          const ours = held?.node === this.node && held.run === this.#options.presence.run;
          if (!ours && held && !this.#stale(held, entry.created.getTime())) return false;
          mine.revision = await bucket.update(key, JSON.stringify(mine.record), entry.revision);
          return true;
        }
        mine.revision = await bucket.create(key, JSON.stringify(mine.record));
        return true;
      } catch (error) {
        if (!isRevisionConflict(error)) return undefined;
      }
    }
    return false;
  }

  /** Create-if-absent, or take over a stale record at the revision read. */
  async #claim<T extends { node: string }>(
    bucket: KvBucket,
    key: string,
    record: T,
    mine: Map<string, Held<T>>,
  ): Promise<ClaimResult> {
    if (this.#options.link.state !== "connected") {
      return this.#unavailable(new Error(`NATS is ${this.#options.link.state}`));
    }
    const stored: Stored<T> = { ...record, run: this.#options.presence.run };
    const value = JSON.stringify(stored);
    try {
      const revision = await bucket.create(key, value);
      mine.set(key, { record: stored, revision, created: Date.now() });
      return { ok: true };
    } catch (error) {
      if (!isRevisionConflict(error)) return this.#unavailable(error);
    }
    let entry: KvEntry | null;
    try {
      entry = await bucket.get(key);
    } catch (error) {
      return this.#unavailable(error);
    }
    const held = entry?.operation === "PUT" ? parse<T>(entry) : undefined;
    if (held && !this.#stale(held, entry!.created.getTime())) {
      return { ok: false, reason: "taken", holder: strip(held) as unknown as PortClaim };
    }
    try {
      // Stale (its node run is gone) or deleted in between: take it over at the revision read.
      const revision = entry
        ? await bucket.update(key, value, entry.revision)
        : await bucket.create(key, value);
      mine.set(key, { record: stored, revision, created: Date.now() });
      return { ok: true };
    } catch (error) {
      if (!isRevisionConflict(error)) return this.#unavailable(error);
      return { ok: false, reason: "taken" };
    }
  }

  #unavailable(error: unknown): ClaimResult {
    this.#options.count("registry_failure");
    this.#options.log.warn("the cluster registry cannot be reached", { detail: String(error) });
    return { ok: false, reason: "unavailable" };
  }

  /**
   * Until then, records of nodes presence does not know are not taken over: NATS just came back,
   * every entry may have expired at once, and live nodes are still writing theirs again.
   */
  settleUntil = 0;

  /** Whether a record may be taken over or removed: its node run is gone, and it is not new. */
  #stale(record: { node: string; run: string }, created: number): boolean {
    if (Date.now() < this.settleUntil) return false;
    return !this.#live(record) && Date.now() - created > this.#options.presenceTtlMs;
  }

  #live(record: { node: string; run: string }): boolean {
    if (record.node === this.node) return record.run === this.#options.presence.run;
    return this.#options.presence.alive(record.node, record.run);
  }

  async #follow(
    name: string,
    bucket: KvBucket,
    apply: (entry: KvEntry) => void,
    forget: (key: string) => void,
    cached: () => Iterable<string>,
  ): Promise<void> {
    this.#watches.get(name)?.stop();
    const watch = await bucket.watch({ include: "updates" });
    this.#watches.set(name, watch);
    (async () => {
      for await (const entry of watch) apply(entry);
    })().catch(() => {});
    // Then the current values (applying one twice is harmless: revisions decide).
    const listed = new Set<string>();
    for await (const key of await bucket.keys()) {
      listed.add(key);
      const entry = await bucket.get(key);
      if (entry) apply(entry);
    }
    // Missing from the listing: gone, unless written since (confirm before forgetting).
    for (const key of [...cached()]) {
      if (listed.has(key)) continue;
      const entry = await bucket.get(key);
      if (entry?.operation === "PUT") apply(entry);
      else forget(key);
    }
  }

  /**
   * Removes a record of a node run presence does not know, once it is old enough to be stale
   * (a node that crashed and never came back leaves such records; nobody saw it go).
   */
  #sweepLater<T>(
    bucket: KvBucket,
    key: string,
    held: Held<T & { node: string }>,
    map: Map<string, Held<T & { node: string }>>,
  ): void {
    if (this.#live(held.record)) return;
    const wait = Math.max(0, held.created + this.#options.presenceTtlMs - Date.now()) + 100;
    const timer = setTimeout(() => {
      if (map.get(key) !== held || !this.#stale(held.record, held.created)) return;
      bucket.delete(key, { previousSeq: held.revision }).catch(() => {});
    }, wait);
    this.#stops.push(() => clearTimeout(timer));
  }

  #applyService(entry: KvEntry): void {
    const previous = this.#services.get(entry.key);
    if (previous && previous.revision >= entry.revision) return;
    const record = entry.operation === "PUT" ? parse<ServiceRecord>(entry) : undefined;
    if (previous && record && sameHolder(previous.record, record)) {
      this.#services.set(entry.key, { ...previous, revision: entry.revision });
      return;
    }
    if (previous) {
      this.#services.delete(entry.key);
      if (previous.record.node !== this.node) {
        this.#emit({ kind: "service", op: "withdrawn", record: strip(previous.record) });
      }
    }
    if (!record) return;
    const held = { record, revision: entry.revision, created: entry.created.getTime() };
    this.#services.set(entry.key, held);
    this.#sweepLater(this.#options.link.services, entry.key, held, this.#services);
    if (record.node !== this.node) {
      this.#emit({ kind: "service", op: "offered", record: strip(record) });
    }
  }

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

function parse<T>(entry: KvEntry): Stored<T> | undefined {
  try {
    const value = JSON.parse(entry.string());
    return typeof value === "object" && value !== null && typeof value.run === "string"
      ? value
      : undefined;
  } catch {
    return undefined;
  }
}

/** Whether two records are the same holding (same session, node run and, for ports, tunnel). */
function sameHolder(
  a: { session: string; node: string; run: string; tunnel?: string },
  b: { session: string; node: string; run: string; tunnel?: string },
): boolean {
  return a.session === b.session && a.node === b.node && a.run === b.run && a.tunnel === b.tunnel;
}

function strip<T>(record: Stored<T>): T {
  const { run: _run, ...rest } = record;
  return rest as unknown as T;
}
