/**
 * Claims in a cluster bucket, each a record with its routes: one record per key (a public port, a service name),
 * naming its owner (a client, or a group) and its routes (each a session on some node that
 * serves it). A record claimed alone has one route; a shared one (a group's, or an HA client's)
 * has one per serving session, on any node. {@linkcode ClusterPorts} and the cluster's named
 * services are both this, with their own keys and subject fields.
 *
 * Every change is a compare-and-set on the record's revision (read, change, `update` at the
 * revision read; `create` when there is none), retried a few times when another node changed it
 * in between, so two nodes can never both take a key, and a route added on one node is never
 * lost to a route removed on another.
 *
 * A route whose node run is no longer present is dead; a record whose routes are all dead is
 * stale once it is older than the presence TTL (a node that just started may not be in this
 * node's presence view yet) and may then be taken over, at the revision read.
 *
 * @module
 */

import type { Logger } from "../../util/log.ts";
import type { ClaimResult, RouteClaim } from "../registry/registry.ts";
import type { VisitorPolicy } from "../../tunnel/policy/visitor_policy.ts";
import { isRevisionConflict, type KvBucket, type KvEntry } from "./nats.ts";

/** One route of a record, as stored. */
export interface StoredRoute {
  /** The node holding the route's session. */
  node: string;
  /** That node's run (a restarted node is a new run: its old routes are dead). */
  run: string;
  /** The session. */
  session: string;
  /** The route's id on its node (a tunnel id; for a service, the session id). */
  tunnel: string;
  /** The session's client. */
  client: string;
  /** False while the client reports its local service unhealthy. */
  healthy?: boolean;
  /** The route's visitor policy when it was claimed (absent: none). */
  policy?: VisitorPolicy;
}

/** A record as stored: the subject's own fields (a port's address, a service's name) and these. */
export interface ClaimRecord {
  /** `client:NAME` or `group:NAME`. */
  owner: string;
  /** Whether further routes of the owner may join. */
  shared: boolean;
  /** The client that created it. */
  client: string;
  /** The routes, in the order they came. */
  routes: StoredRoute[];
  /** The subject's fields. */
  [field: string]: unknown;
}

/** What a kind of record (ports, services) adds to the common machinery. */
export interface RouteKind<C extends RouteClaim> {
  /** The record's key for a claim. */
  keyOf(claim: C): string;
  /** The fields that say what the record is about, stored beside the routes. */
  subjectOf(claim: C): Record<string, unknown>;
  /** A claim from a record and one of its routes. */
  claimOf(record: ClaimRecord, route: StoredRoute): C;
  /**
   * Runs before the first route of a shared record is written: resolves with a result to return
   * instead (the owner holds another key already: join it), or undefined to go on.
   */
  beforeFirstShared?(claim: C, owner: string): Promise<ClaimResult<C> | undefined>;
}

/** What {@linkcode ClusterClaims} needs. */
export interface ClusterClaimsOptions<C extends RouteClaim> {
  /** The bucket. */
  bucket: KvBucket;
  /** What the records are about. */
  kind: RouteKind<C>;
  /** This node's name. */
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
  /** A route came or went (from the watch: anywhere in the cluster). */
  onRoute: (op: "added" | "removed", claim: C) => void;
  /**
   * A route that stays changed what it says (its rules, its record's subject fields, such as an
   * HTTP tunnel's `http`): from the watch, anywhere in the cluster.
   */
  onChange?: (claim: C) => void;
  /** Counts operations, for metrics (`NOUN_claimed`, `NOUN_shared`, `NOUN_taken`, …). */
  count: (event: string) => void;
  /** The noun of the counters: `port`, `service`. */
  noun: string;
  /** Where trouble is logged. */
  log: Logger;
}

interface Cached {
  record: ClaimRecord;
  revision: number;
  created: number;
}

/** How many times a compare-and-set is tried before giving up. */
const ATTEMPTS = 6;

/** The records of one bucket as this node sees and changes them. */
export class ClusterClaims<C extends RouteClaim> {
  readonly #o: ClusterClaimsOptions<C>;
  /** Every record, by key (from the watch). */
  readonly #records = new Map<string, Cached>();
  /** This node's routes, by route id. */
  readonly #mine = new Map<string, C>();
  // Routes released while NATS was away, their removal not written yet (by tunnel id).
  readonly #unreleased = new Map<string, C>();
  readonly #timers = new Set<ReturnType<typeof setTimeout>>();

  /** Routes over `options.bucket`. */
  constructor(options: ClusterClaimsOptions<C>) {
    this.#o = options;
  }

  /** Claims a key for a route: alone, or beside the routes of the same owner if shared. */
  async claim(claim: C): Promise<ClaimResult<C>> {
    if (!this.#o.connected()) return this.#unavailable(new Error("NATS is not connected"));
    const key = this.#o.kind.keyOf(claim);
    const route = this.#route(claim);
    const fresh = this.#fresh(claim, route);
    for (let attempt = 0; attempt < ATTEMPTS; attempt++) {
      let entry: KvEntry | null;
      try {
        entry = await this.#o.bucket.get(key);
      } catch (error) {
        return this.#unavailable(error);
      }
      const current = entry?.operation === "PUT" ? parse(entry) : undefined;
      let next: ClaimRecord | undefined;
      if (!current || this.isStale(current, entry!.created.getTime())) {
        if (fresh.shared && this.#o.kind.beforeFirstShared) {
          const instead = await this.#o.kind.beforeFirstShared(claim, fresh.owner)
            .catch((error) => error);
          if (instead instanceof Error) return this.#unavailable(instead);
          if (instead !== undefined) {
            this.#count("taken");
            return instead;
          }
        }
        next = fresh;
      } else if (current.shared && fresh.shared && current.owner === fresh.owner) {
        const others = current.routes.filter((r) => !sameRoute(r, route));
        next = { ...current, routes: [...others, route] };
      } else {
        this.#count("taken");
        return { ok: false, reason: "taken", holder: this.#claimOf(current, this.#first(current)) };
      }
      try {
        if (entry) await this.#o.bucket.update(key, JSON.stringify(next), entry.revision);
        else await this.#o.bucket.create(key, JSON.stringify(next));
        this.#mine.set(claim.tunnel, claim);
        this.#unreleased.delete(claim.tunnel);
        this.#count(next === fresh ? "claimed" : "shared");
        return { ok: true };
      } catch (error) {
        if (!isRevisionConflict(error)) return this.#unavailable(error);
      }
    }
    this.#count("taken");
    return { ok: false, reason: "taken" };
  }

  /** Removes this node's route `claim.tunnel`; the record goes with its last route. */
  async release(claim: C): Promise<void> {
    if (!this.#mine.delete(claim.tunnel)) return;
    await this.#removeRoute(claim);
  }

  /**
   * Removes a released route from its record. NATS away: kept in {@linkcode #unreleased} and tried
   * again by the next {@linkcode reassert}, since a route left behind with this node's live run
   * would keep its key held (and other nodes relaying to a tunnel gone) until this node dies.
   */
  async #removeRoute(claim: C): Promise<void> {
    try {
      await this.#removeRoutes(
        this.#o.kind.keyOf(claim),
        (r) => r.node === this.#o.node && r.tunnel === claim.tunnel,
      );
      this.#unreleased.delete(claim.tunnel);
    } catch (error) {
      this.#unreleased.set(claim.tunnel, claim);
      this.#o.count("registry_failure");
      this.#o.log.debug(`${this.#o.noun} release not written`, {
        key: this.#o.kind.keyOf(claim),
        detail: String(error),
      });
    }
  }

  /** Writes whether this node's route `claim.tunnel` is healthy into its record. */
  async setHealth(claim: C, healthy: boolean): Promise<void> {
    const key = this.#o.kind.keyOf(claim);
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

  /**
   * Writes what this node's route `claim.tunnel` says now (its visitor policy, the record's
   * subject fields) into its record, at the revision read: rules changed in place reach every
   * node's watch. Nothing is written when the record no longer holds the route.
   */
  async update(claim: C): Promise<void> {
    if (!this.#mine.has(claim.tunnel)) return;
    this.#mine.set(claim.tunnel, claim);
    const key = this.#o.kind.keyOf(claim);
    const route = this.#route(claim);
    for (let attempt = 0; attempt < ATTEMPTS; attempt++) {
      try {
        const entry = await this.#o.bucket.get(key);
        const current = entry?.operation === "PUT" ? parse(entry) : undefined;
        const previous = current?.routes.find((r) => sameRoute(r, route));
        if (!current || !previous) return;
        const kept = previous.healthy === false ? { ...route, healthy: false } : route;
        const routes = current.routes.map((r) => r === previous ? kept : r);
        const next = { ...current, ...this.#o.kind.subjectOf(claim), routes };
        await this.#o.bucket.update(key, JSON.stringify(next), entry!.revision);
        return;
      } catch (error) {
        if (!isRevisionConflict(error)) {
          // NATS is away: the periodic reassert writes the route as it is now.
          this.#o.count("registry_failure");
          return;
        }
      }
    }
  }

  /** Whether a route is healthy as its record says (unknown routes count as healthy). */
  routeHealthy(key: string, node: string, tunnel: string): boolean {
    const route = this.#records.get(key)?.record.routes.find((r) =>
      r.node === node && r.tunnel === tunnel
    );
    return route?.healthy !== false;
  }

  /** The live routes of `key`, each with its health as stored. */
  liveRoutes(key: string): { claim: C; healthy: boolean }[] {
    const cached = this.#records.get(key);
    if (!cached) return [];
    return cached.record.routes.filter((r) => this.isLive(r)).map((r) => ({
      claim: this.#claimOf(cached.record, r),
      healthy: r.healthy !== false,
    }));
  }

  /** The record of `key` as this node last saw it. */
  record(key: string): { record: ClaimRecord; created: number } | undefined {
    return this.#records.get(key);
  }

  /** Every record this node has seen. */
  records(): IterableIterator<{ record: ClaimRecord; created: number }> {
    return this.#records.values();
  }

  /** Every live route in the cluster. */
  claims(): C[] {
    return [...this.#records.values()].flatMap(({ record }) =>
      record.routes.filter((r) => this.isLive(r)).map((r) => this.#claimOf(record, r))
    );
  }

  /** The keys this node has records of. */
  keys(): Iterable<string> {
    return this.#records.keys();
  }

  /** Reads `key` from the bucket (not the view): its record, if any, and when it was written. */
  async read(key: string): Promise<{ record: ClaimRecord; created: number } | undefined> {
    const entry = await this.#o.bucket.get(key);
    const record = entry?.operation === "PUT" ? parse(entry) : undefined;
    return record && { record, created: entry!.created.getTime() };
  }

  /** Applies a record from the watch (or a listing): one event per route that came or went. */
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
        this.#o.onRoute("removed", this.#claimOf(previous!.record, r));
      }
    }
    const subjectChanged = previous !== undefined &&
      subjectText(previous.record) !== subjectText(record);
    for (const r of record.routes) {
      const was = before.find((b) => sameRoute(b, r));
      if (!was) this.#o.onRoute("added", this.#claimOf(record, r));
      else if (subjectChanged || !sameRules(was, r)) this.#o.onChange?.(this.#claimOf(record, r));
    }
    this.#sweepLater(entry.key, cached);
  }

  /** Forgets a record that is gone from the bucket: each of its routes is removed. */
  forget(key: string): void {
    const cached = this.#records.get(key);
    if (!cached) return;
    this.#records.delete(key);
    for (const r of cached.record.routes) {
      this.#o.onRoute("removed", this.#claimOf(cached.record, r));
    }
  }

  /**
   * A node run is gone: its routes are removed from every record (records left empty go). Every
   * live node does this at once, so each walks the records in its own random order and skips a
   * record whose removal by another node its watch has already brought: the nodes share the
   * work instead of each reading every record of the dead node.
   */
  async nodeGone(node: string, run: string): Promise<void> {
    const dead = (r: StoredRoute) => r.node === node && r.run === run;
    const held = [...this.#records].filter(([, cached]) => cached.record.routes.some(dead))
      .map(([key]) => key);
    for (let i = held.length - 1; i > 0; i--) {
      const j = Math.floor(Math.random() * (i + 1));
      [held[i], held[j]] = [held[j], held[i]];
    }
    for (const key of held) {
      // Gone, or without the dead route, since: another node was first.
      if (!this.#records.get(key)?.record.routes.some(dead)) continue;
      if (this.#o.alive(node, run)) return; // back already
      await this.#removeRoutes(key, dead).catch(() => {});
    }
  }

  /**
   * Writes this node's routes again where they went missing (its presence expired, NATS lost
   * them), and returns those whose key another owner took meanwhile: they must stop serving.
   * A route still there is rewritten too (same content), so that a node that saw this one gone
   * and is about to remove it at the revision it saw finds the revision moved; that race exists
   * only after this node was away (its presence lost, NATS back). The periodic check passes
   * `rewrite: false`: a record that already holds this route as it is stays unwritten, since each
   * write reaches every node's watch, and rewriting every record every period cost
   * nodes × records deliveries per period. Routes released while NATS was away are removed first.
   */
  async reassert(options: { rewrite?: boolean } = {}): Promise<C[]> {
    const rewrite = options.rewrite ?? true;
    for (const claim of [...this.#unreleased.values()]) await this.#removeRoute(claim);
    const lost: C[] = [];
    for (const claim of [...this.#mine.values()]) {
      const kept = await this.#reassertOne(claim, rewrite);
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

  /** Whether a record may be taken over: no live route, not new, and NATS settled. */
  isStale(record: ClaimRecord, created: number): boolean {
    if (!this.#o.settled()) return false;
    return !record.routes.some((r) => this.isLive(r)) && Date.now() - created > this.#o.ttlMs;
  }

  /** Whether a route's node run is present (this node's: the current run). */
  isLive(route: StoredRoute): boolean {
    if (route.node === this.#o.node) return route.run === this.#o.run();
    return this.#o.alive(route.node, route.run);
  }

  /** true: held again; false: another owner holds the key; undefined: NATS away (later). */
  async #reassertOne(claim: C, rewrite: boolean): Promise<boolean | undefined> {
    const key = this.#o.kind.keyOf(claim);
    const route = this.#route(claim);
    for (let attempt = 0; attempt < ATTEMPTS; attempt++) {
      try {
        const entry = await this.#o.bucket.get(key);
        const current = entry?.operation === "PUT" ? parse(entry) : undefined;
        if (!current) {
          await this.#o.bucket.create(key, JSON.stringify(this.#fresh(claim, route)));
          return true;
        }
        const owner = ownerOf(claim);
        const others = current.routes.filter((r) => !sameRoute(r, route));
        const ours = current.owner === owner &&
          (current.shared || others.every((r) => !this.isLive(r)));
        if (!ours && !this.isStale(current, entry!.created.getTime())) return false;
        const previous = current.routes.find((r) => sameRoute(r, route));
        const kept = previous?.healthy === false ? { ...route, healthy: false } : route;
        const subject = this.#o.kind.subjectOf(claim);
        if (
          !rewrite && ours && previous && sameContent(previous, kept) &&
          subjectText({ ...current, ...subject }) === subjectText(current)
        ) return true;
        const next: ClaimRecord = ours
          ? { ...current, ...subject, routes: [...others, kept] }
          : this.#fresh(claim, route);
        await this.#o.bucket.update(key, JSON.stringify(next), entry!.revision);
        return true;
      } catch (error) {
        if (!isRevisionConflict(error)) return undefined;
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
    if (cached.record.routes.some((r) => this.isLive(r))) return;
    const wait = Math.max(0, cached.created + this.#o.ttlMs - Date.now()) + 100;
    const timer = setTimeout(() => {
      this.#timers.delete(timer);
      if (this.#records.get(key) !== cached || !this.isStale(cached.record, cached.created)) {
        return;
      }
      this.#o.bucket.delete(key, { previousSeq: cached.revision }).catch(() => {});
    }, wait);
    this.#timers.add(timer);
  }

  #fresh(claim: C, route: StoredRoute): ClaimRecord {
    return {
      ...this.#o.kind.subjectOf(claim),
      owner: ownerOf(claim),
      shared: claim.shared ?? false,
      client: claim.client,
      routes: [route],
    };
  }

  #first(record: ClaimRecord): StoredRoute {
    return record.routes.find((r) => this.isLive(r)) ?? record.routes[0];
  }

  #route(claim: C): StoredRoute {
    return {
      node: this.#o.node,
      run: this.#o.run(),
      session: claim.session,
      tunnel: claim.tunnel,
      client: claim.client,
      ...(claim.policy && Object.keys(claim.policy).length > 0 ? { policy: claim.policy } : {}),
    };
  }

  #claimOf(record: ClaimRecord, route: StoredRoute): C {
    return this.#o.kind.claimOf(record, route);
  }

  #count(what: "claimed" | "shared" | "taken"): void {
    this.#o.count(`registry_${this.#o.noun}_${what}`);
  }

  #unavailable(error: unknown): ClaimResult<C> {
    this.#o.count("registry_failure");
    this.#o.count(`registry_${this.#o.noun}_unavailable`);
    this.#o.log.warn("the cluster registry cannot be reached", { detail: String(error) });
    return { ok: false, reason: "unavailable" };
  }
}

/** The claim fields every kind shares, from a record and one of its routes. */
export function routeClaim(record: ClaimRecord, route: StoredRoute): RouteClaim {
  return {
    tunnel: route.tunnel,
    session: route.session,
    client: route.client,
    node: route.node,
    owner: record.owner,
    shared: record.shared,
    ...(route.policy ? { policy: route.policy } : {}),
  };
}

/** Who a claim is for: its `owner`, else its client. */
function ownerOf(claim: RouteClaim): string {
  return claim.owner ?? `client:${claim.client}`;
}

function sameRoute(a: StoredRoute, b: StoredRoute): boolean {
  return a.node === b.node && a.run === b.run && a.tunnel === b.tunnel;
}

function parse(entry: KvEntry): ClaimRecord | undefined {
  try {
    const value = JSON.parse(entry.string());
    if (typeof value?.owner !== "string" || !Array.isArray(value.routes)) return undefined;
    return value as ClaimRecord;
  } catch {
    return undefined;
  }
}

/** Whether two stored routes say the same (a route without `healthy` is healthy). */
function sameContent(a: StoredRoute, b: StoredRoute): boolean {
  return a.node === b.node && a.run === b.run && a.session === b.session &&
    a.tunnel === b.tunnel && a.client === b.client && (a.healthy ?? true) === (b.healthy ?? true) &&
    sameRules(a, b);
}

/** Whether two stored routes carry the same visitor policy. */
function sameRules(a: StoredRoute, b: StoredRoute): boolean {
  return JSON.stringify(a.policy ?? {}) === JSON.stringify(b.policy ?? {});
}

/** A record's fields other than its routes, as text (what its subject says, compared). */
function subjectText(record: ClaimRecord): string {
  const { routes: _routes, ...rest } = record;
  // A field set to undefined is one JSON leaves out: the same as absent.
  const keys = Object.keys(rest).filter((key) => rest[key] !== undefined).sort();
  return JSON.stringify(keys.map((key) => [key, rest[key]]));
}
