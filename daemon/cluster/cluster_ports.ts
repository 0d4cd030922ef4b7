/**
 * Public ports in the cluster's `ports` bucket: one record per port, naming its owner (a client,
 * or a group) and its routes (each a session on some node that serves the port). A port claimed
 * alone has one route; a shared port (a group's, or an HA client's) has one per serving session,
 * on any node.
 *
 * Every change is a compare-and-set on the record's revision (read, change, `update` at the
 * revision read; `create` when there is none), retried a few times when another node changed it
 * in between, so two nodes can never both take a port, and a route added on one node is never
 * lost to a route removed on another.
 *
 * A route whose node run is no longer present is dead; a record whose routes are all dead is
 * stale once it is older than the presence TTL (a node that just started may not be in this
 * node's presence view yet) and may then be taken over, at the revision read.
 *
 * @module
 */

import type { Logger } from "../../util/log.ts";
import type { ClaimResult, PortClaim, RegistryChange } from "../registry/registry.ts";
import { isRevisionConflict, type KvBucket, type KvEntry } from "./nats.ts";

/** One route of a port, as stored. */
interface StoredRoute {
  node: string;
  run: string;
  session: string;
  tunnel: string;
  client: string;
  /** False while the client reports its local service unhealthy. */
  healthy?: boolean;
}

/** A port's record, as stored. */
interface PortRecord {
  owner: string;
  shared: boolean;
  bindHost: string;
  port: number;
  client: string;
  routes: StoredRoute[];
}

interface Cached {
  record: PortRecord;
  revision: number;
  created: number;
}

/** How many times a compare-and-set is tried before giving up. */
const ATTEMPTS = 6;

/** The KV key of a cluster port: ports are cluster-wide, whatever address each node binds. */
export function portKeyOf(port: number): string {
  return `port-${port}`;
}

/**
 * The KV key naming the port an owner's shared tunnel holds (a group's port): claimed
 * create-if-absent by the first route, so that routes starting at the same instant on several
 * nodes agree on one port.
 */
export function ownerKeyOf(owner: string): string {
  return `owner-${
    Array.from(new TextEncoder().encode(owner), (b) => b.toString(16).padStart(2, "0")).join("")
  }`;
}

/** What {@linkcode ClusterPorts} needs. */
export interface ClusterPortsOptions {
  /** The `ports` bucket. */
  bucket: KvBucket;
  /** This node's name and run. */
  node: string;
  /** This node's run. */
  run: () => string;
  /** Whether a node run is present. */
  alive: (node: string, run: string) => boolean;
  /** Whether records may be judged stale now (false while NATS has just come back). */
  settled: () => boolean;
  /** Whether NATS is connected. */
  connected: () => boolean;
  /** The presence TTL, ms. */
  ttlMs: number;
  /** Registry changes, one per route that comes or goes. */
  emit: (change: RegistryChange) => void;
  /** Counts operations, for metrics. */
  count: (event: string) => void;
  /** Where trouble is logged. */
  log: Logger;
}

/** The ports bucket as this node sees and changes it. */
export class ClusterPorts {
  readonly #o: ClusterPortsOptions;
  /** Every record, by key (from the watch). */
  readonly #records = new Map<string, Cached>();
  /** This node's routes, by tunnel id. */
  readonly #mine = new Map<string, PortClaim>();
  readonly #timers = new Set<ReturnType<typeof setTimeout>>();

  /** Ports over `options.bucket`. */
  constructor(options: ClusterPortsOptions) {
    this.#o = options;
  }

  /** Claims `claim.port` for a route: alone, or beside the routes of the same owner if shared. */
  async claim(claim: PortClaim): Promise<ClaimResult> {
    if (!this.#o.connected()) return this.#unavailable(new Error("NATS is not connected"));
    const key = portKeyOf(claim.port);
    const route = this.#route(claim);
    const owner = claim.owner ?? `client:${claim.client}`;
    const fresh: PortRecord = {
      owner,
      shared: claim.shared ?? false,
      bindHost: claim.bindHost,
      port: claim.port,
      client: claim.client,
      routes: [route],
    };
    for (let attempt = 0; attempt < ATTEMPTS; attempt++) {
      let entry: KvEntry | null;
      try {
        entry = await this.#o.bucket.get(key);
      } catch (error) {
        return this.#unavailable(error);
      }
      const current = entry?.operation === "PUT" ? parse(entry) : undefined;
      let next: PortRecord | undefined;
      if (!current || this.#stale(current, entry!.created.getTime())) {
        if (fresh.shared) {
          // The first route of a shared tunnel: its owner's port is decided here, once.
          const elsewhere = await this.#ownerClaim(owner, claim.port).catch((error) => error);
          if (elsewhere instanceof Error) return this.#unavailable(elsewhere);
          if (elsewhere !== undefined) {
            this.#o.count("registry_port_taken");
            return { ok: false, reason: "taken", join: elsewhere };
          }
        }
        next = fresh;
      } else if (current.shared && fresh.shared && current.owner === owner) {
        next = { ...current, routes: [...current.routes, route] };
      } else {
        this.#o.count("registry_port_taken");
        return { ok: false, reason: "taken", holder: this.#claimOf(current, this.#first(current)) };
      }
      try {
        if (entry) await this.#o.bucket.update(key, JSON.stringify(next), entry.revision);
        else await this.#o.bucket.create(key, JSON.stringify(next));
        this.#mine.set(claim.tunnel, claim);
        this.#o.count(next === fresh ? "registry_port_claimed" : "registry_port_shared");
        return { ok: true };
      } catch (error) {
        if (!isRevisionConflict(error)) return this.#unavailable(error);
      }
    }
    this.#o.count("registry_port_taken");
    return { ok: false, reason: "taken" };
  }

  /** Removes this node's route `claim.tunnel`; the record goes with its last route. */
  async release(claim: PortClaim): Promise<void> {
    if (!this.#mine.delete(claim.tunnel)) return;
    await this.#removeRoutes(
      portKeyOf(claim.port),
      (r) => r.node === this.#o.node && r.tunnel === claim.tunnel,
    ).catch((error) => {
      // NATS is away: the route is re-checked when it returns, and goes with this node's
      // presence if this node dies.
      this.#o.count("registry_failure");
      this.#o.log.debug("port release not written", { port: claim.port, detail: String(error) });
    });
  }

  /** Writes whether this node's route `claim.tunnel` is healthy into the port's record. */
  async setHealth(claim: PortClaim, healthy: boolean): Promise<void> {
    const key = portKeyOf(claim.port);
    for (let attempt = 0; attempt < ATTEMPTS; attempt++) {
      try {
        const entry = await this.#o.bucket.get(key);
        const current = entry?.operation === "PUT" ? parse(entry) : undefined;
        if (!current) return;
        const routes = current.routes.map((r) =>
          r.node === this.#o.node && r.tunnel === claim.tunnel ? { ...r, healthy } : r
        );
        await this.#o.bucket.update(key, JSON.stringify({ ...current, routes }), entry!.revision);
        return;
      } catch (error) {
        if (!isRevisionConflict(error)) {
          this.#o.count("registry_failure");
          return;
        }
      }
    }
  }

  /** Whether a route is healthy as its port's record says (unknown routes count as healthy). */
  routeHealthy(port: number, node: string, tunnel: string): boolean {
    const route = this.#records.get(portKeyOf(port))?.record.routes.find((r) =>
      r.node === node && r.tunnel === tunnel
    );
    return route?.healthy !== false;
  }

  /** The first live route of `port`, if any. */
  holder(port: number): PortClaim | undefined {
    const cached = this.#records.get(portKeyOf(port));
    const route = cached && cached.record.routes.find((r) => this.#live(r));
    return route ? this.#claimOf(cached!.record, route) : undefined;
  }

  /**
   * The port of `owner`'s shared record on `bindHost` (or on any node's address), if any: from
   * this node's view, else from the owner's key in the bucket (its record may not have reached
   * this node yet).
   */
  async ownerPort(owner: string, bindHost: string): Promise<number | undefined> {
    const known = this.#knownOwnerPort(owner, bindHost);
    if (known !== undefined) return known;
    try {
      const entry = await this.#o.bucket.get(ownerKeyOf(owner));
      if (entry?.operation !== "PUT") return undefined;
      const port = Number(JSON.parse(entry.string())?.port);
      return Number.isInteger(port) && port > 0 ? port : undefined;
    } catch {
      return undefined;
    }
  }

  #knownOwnerPort(owner: string, bindHost: string): number | undefined {
    for (const { record } of this.#records.values()) {
      if (!record.shared || record.owner !== owner) continue;
      if (!record.routes.some((r) => this.#live(r))) continue;
      if (record.bindHost === bindHost || record.routes.some((r) => r.node !== this.#o.node)) {
        return record.port;
      }
    }
    return undefined;
  }

  /** Every live route in the cluster, by port. */
  claims(): PortClaim[] {
    return [...this.#records.values()]
      .flatMap(({ record }) =>
        record.routes.filter((r) => this.#live(r)).map((r) => this.#claimOf(record, r))
      )
      .sort((a, b) => a.port - b.port);
  }

  /** The keys this node has records of. */
  keys(): Iterable<string> {
    return this.#records.keys();
  }

  /** Applies a record from the watch (or a listing): emits a change per route that came or went. */
  apply(entry: KvEntry): void {
    const previous = this.#records.get(entry.key);
    if (previous && previous.revision >= entry.revision) return;
    const record = entry.operation === "PUT" ? parse(entry) : undefined;
    if (!record) {
      if (previous) this.forget(entry.key);
      return;
    }
    const cached = { record, revision: entry.revision, created: entry.created.getTime() };
    this.#records.set(entry.key, cached);
    const before = previous?.record.routes ?? [];
    for (const r of before) {
      if (!record.routes.some((n) => sameRoute(n, r))) {
        this.#o.emit({ kind: "port", op: "released", claim: this.#claimOf(previous!.record, r) });
      }
    }
    for (const r of record.routes) {
      if (!before.some((b) => sameRoute(b, r))) {
        this.#o.emit({ kind: "port", op: "claimed", claim: this.#claimOf(record, r) });
      }
    }
    this.#sweepLater(entry.key, cached);
  }

  /** Forgets a record that is gone from the bucket: each of its routes is released. */
  forget(key: string): void {
    const cached = this.#records.get(key);
    if (!cached) return;
    this.#records.delete(key);
    for (const r of cached.record.routes) {
      this.#o.emit({ kind: "port", op: "released", claim: this.#claimOf(cached.record, r) });
    }
  }

  /** A node run is gone: its routes are removed from every record (records left empty go). */
  async nodeGone(node: string, run: string): Promise<void> {
    for (const [key, cached] of [...this.#records]) {
      if (!cached.record.routes.some((r) => r.node === node && r.run === run)) continue;
      if (this.#o.alive(node, run)) return; // back already
      await this.#removeRoutes(key, (r) => r.node === node && r.run === run).catch(() => {});
    }
  }

  /**
   * Writes this node's routes again where they went missing (its presence expired, NATS lost
   * them), and returns those whose port another owner took meanwhile: their tunnels must close.
   * A route still there is rewritten too (same content), so that a node that saw this one gone
   * and is about to remove it at the revision it saw finds the revision moved.
   */
  async reassert(): Promise<PortClaim[]> {
    const lost: PortClaim[] = [];
    for (const claim of [...this.#mine.values()]) {
      const kept = await this.#reassertOne(claim);
      if (kept === false) {
        this.#mine.delete(claim.tunnel);
        lost.push(claim);
      }
    }
    return lost;
  }

  /** Stops timers. */
  stop(): void {
    for (const timer of this.#timers) clearTimeout(timer);
  }

  /** true: held again; false: another owner holds the port; undefined: NATS away (later). */
  async #reassertOne(claim: PortClaim): Promise<boolean | undefined> {
    const key = portKeyOf(claim.port);
    const route = this.#route(claim);
    for (let attempt = 0; attempt < ATTEMPTS; attempt++) {
      try {
        const entry = await this.#o.bucket.get(key);
        const current = entry?.operation === "PUT" ? parse(entry) : undefined;
        if (!current) {
          await this.#o.bucket.create(
            key,
            JSON.stringify(
              {
                owner: claim.owner ?? `client:${claim.client}`,
                shared: claim.shared ?? false,
                bindHost: claim.bindHost,
                port: claim.port,
                client: claim.client,
                routes: [route],
              } satisfies PortRecord,
            ),
          );
          return true;
        }
        const owner = claim.owner ?? `client:${claim.client}`;
        const others = current.routes.filter((r) => !sameRoute(r, route));
        const ours = current.owner === owner &&
          (current.shared || others.every((r) => !this.#live(r)));
        if (!ours && !this.#stale(current, entry!.created.getTime())) return false;
        const previous = current.routes.find((r) => sameRoute(r, route));
        const kept = previous?.healthy === false ? { ...route, healthy: false } : route;
        const next: PortRecord = ours
          ? { ...current, routes: [...others, kept] }
          : { ...current, owner, shared: claim.shared ?? false, routes: [route] };
        await this.#o.bucket.update(key, JSON.stringify(next), entry!.revision);
        return true;
      } catch (error) {
        if (!isRevisionConflict(error)) return undefined;
      }
    }
    return undefined;
  }

  /**
   * Names `port` as `owner`'s port, create-if-absent. Resolves with another port when the owner
   * already holds a live one (join it), or undefined when `port` is now the owner's.
   */
  async #ownerClaim(owner: string, port: number): Promise<number | undefined> {
    const key = ownerKeyOf(owner);
    const value = JSON.stringify({ port });
    for (let attempt = 0; attempt < ATTEMPTS; attempt++) {
      const entry = await this.#o.bucket.get(key);
      if (!entry || entry.operation !== "PUT") {
        try {
          await this.#o.bucket.create(key, value);
          return undefined;
        } catch (error) {
          if (!isRevisionConflict(error)) throw error;
          continue;
        }
      }
      const held = Number(JSON.parse(entry.string())?.port);
      if (held === port) return undefined;
      const record = await this.#o.bucket.get(portKeyOf(held));
      const current = record?.operation === "PUT" ? parse(record) : undefined;
      if (current && current.owner === owner && !this.#stale(current, record!.created.getTime())) {
        return held;
      }
      try {
        await this.#o.bucket.update(key, value, entry.revision); // the old port is gone
        return undefined;
      } catch (error) {
        if (!isRevisionConflict(error)) throw error;
      }
    }
    return undefined;
  }

  /** Removes the routes `drop` matches from a record, deleting it when none is left. */
  async #removeRoutes(key: string, drop: (route: StoredRoute) => boolean): Promise<void> {
    for (let attempt = 0; attempt < ATTEMPTS; attempt++) {
      const entry = await this.#o.bucket.get(key);
      const current = entry?.operation === "PUT" ? parse(entry) : undefined;
      if (!current || !current.routes.some(drop)) return;
      const routes = current.routes.filter((r) => !drop(r));
      try {
        if (routes.length === 0) {
          await this.#o.bucket.delete(key, { previousSeq: entry!.revision });
        } else {
          await this.#o.bucket.update(key, JSON.stringify({ ...current, routes }), entry!.revision);
        }
        return;
      } catch (error) {
        if (!isRevisionConflict(error)) throw error;
      }
    }
  }

  /** Removes a record none of whose routes is live once it is old enough to be stale. */
  #sweepLater(key: string, cached: Cached): void {
    if (cached.record.routes.some((r) => this.#live(r))) return;
    const wait = Math.max(0, cached.created + this.#o.ttlMs - Date.now()) + 100;
    const timer = setTimeout(() => {
      this.#timers.delete(timer);
      if (this.#records.get(key) !== cached || !this.#stale(cached.record, cached.created)) return;
      this.#o.bucket.delete(key, { previousSeq: cached.revision }).catch(() => {});
    }, wait);
    this.#timers.add(timer);
  }

  /** Whether a record may be taken over: no live route, not new, and NATS settled. */
  #stale(record: PortRecord, created: number): boolean {
    if (!this.#o.settled()) return false;
    return !record.routes.some((r) => this.#live(r)) && Date.now() - created > this.#o.ttlMs;
  }

  #live(route: StoredRoute): boolean {
    if (route.node === this.#o.node) return route.run === this.#o.run();
    return this.#o.alive(route.node, route.run);
  }

  #first(record: PortRecord): StoredRoute {
    return record.routes.find((r) => this.#live(r)) ?? record.routes[0];
  }

  #route(claim: PortClaim): StoredRoute {
    return {
      node: this.#o.node,
      run: this.#o.run(),
      session: claim.session,
      tunnel: claim.tunnel,
      client: claim.client,
    };
  }

  #claimOf(record: PortRecord, route: StoredRoute): PortClaim {
    return {
      bindHost: record.bindHost,
      port: record.port,
      tunnel: route.tunnel,
      session: route.session,
      client: route.client,
      node: route.node,
      owner: record.owner,
      shared: record.shared,
    };
  }

  #unavailable(error: unknown): ClaimResult {
    this.#o.count("registry_failure");
    this.#o.count("registry_port_unavailable");
    this.#o.log.warn("the cluster registry cannot be reached", { detail: String(error) });
    return { ok: false, reason: "unavailable" };
  }
}

function sameRoute(a: StoredRoute, b: StoredRoute): boolean {
  return a.node === b.node && a.run === b.run && a.tunnel === b.tunnel;
}

function parse(entry: KvEntry): PortRecord | undefined {
  try {
    const value = JSON.parse(entry.string());
    if (typeof value?.owner !== "string" || !Array.isArray(value.routes)) return undefined;
    return value as PortRecord;
  } catch {
    return undefined;
  }
}
