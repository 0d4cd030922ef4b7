/**
 * Public ports in the cluster's `ports` bucket: one record per port (see
 * {@linkcode ClusterClaims}: its owner and its routes), plus what only ports have: an owner key
 * per shared tunnel, so that routes of one group starting at the same instant on several nodes,
 * each asking for any port, agree on one.
 *
 * @module
 */

import type { ClaimResult, PortClaim, RegistryChange } from "../registry/registry.ts";
import {
  type ClaimRecord,
  ClusterClaims,
  type ClusterClaimsOptions,
  routeClaim,
  type StoredRoute,
} from "./claims.ts";
import { isRevisionConflict, type KvBucket, type KvEntry } from "./nats.ts";

/** How many times a compare-and-set is tried before giving up. */
const ATTEMPTS = 6;

/**
 * The KV key of a cluster port: ports are cluster-wide, whatever address each node binds, and
 * TCP and UDP are name spaces apart (a TCP port keeps the key it always had).
 */
export function portKeyOf(port: number, protocol?: "udp"): string {
  return protocol === "udp" ? `udp-${port}` : `port-${port}`;
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

/** What {@linkcode ClusterPorts} needs: what every claims bucket needs, and where changes go. */
export type ClusterPortsOptions =
  & Omit<ClusterClaimsOptions<PortClaim>, "kind" | "onRoute" | "noun">
  & {
    /** Registry changes, one per route that comes or goes. */
    emit: (change: RegistryChange) => void;
  };

/** The ports bucket as this node sees and changes it. */
export class ClusterPorts {
  readonly #bucket: KvBucket;
  readonly #node: string;
  readonly #ttlMs: number;
  readonly #claims: ClusterClaims<PortClaim>;

  /** Ports over `options.bucket`. */
  constructor(options: ClusterPortsOptions) {
    this.#bucket = options.bucket;
    this.#node = options.node;
    this.#ttlMs = options.ttlMs;
    this.#claims = new ClusterClaims<PortClaim>({
      ...options,
      noun: "port",
      kind: {
        keyOf: (claim) => portKeyOf(claim.port, claim.protocol),
        subjectOf: (claim) => ({
          bindHost: claim.bindHost,
          port: claim.port,
          ...(claim.protocol === "udp" ? { protocol: "udp" } : {}),
        }),
        claimOf: claimOf,
        beforeFirstShared: async (claim, owner) => {
          // The owner's key names its TCP port, which a port-0 member joins; a UDP member
          // names its port, and the owner's TCP port is not its concern.
          if (claim.protocol === "udp") return undefined;
          const elsewhere = await this.#ownerClaim(owner, claim.port);
          return elsewhere === undefined
            ? undefined
            : { ok: false, reason: "taken", join: elsewhere };
        },
      },
      onRoute: (op, claim) =>
        options.emit({ kind: "port", op: op === "added" ? "claimed" : "released", claim }),
      // A route's rules changed in place (its client's or its operator's reload): other nodes'
      // relays of it check visitors by the new ones.
      onChange: (claim) => options.emit({ kind: "port", op: "changed", claim }),
    });
  }

  /** Claims `claim.port` for a route: alone, or beside the routes of the same owner if shared. */
  claim(claim: PortClaim): Promise<ClaimResult> {
    return this.#claims.claim(claim);
  }

  /**
   * Removes this node's route `claim.tunnel`; the record goes with its last route, and with the
   * record the owner key naming its port (a port that could not be bound must not stay the
   * owner's port while its key is young).
   */
  async release(claim: PortClaim): Promise<void> {
    await this.#claims.release(claim);
    if (claim.shared && claim.protocol !== "udp") {
      await this.#dropOwnerKey(claim.owner ?? `client:${claim.client}`, claim.port).catch(() => {});
    }
  }

  /** Writes what this node's route of `claim.port` says now (its visitor policy) into its record. */
  update(claim: PortClaim): Promise<void> {
    return this.#claims.update(claim);
  }

  /** Writes whether this node's route `claim.tunnel` is healthy into the port's record. */
  setHealth(claim: PortClaim, healthy: boolean): Promise<void> {
    return this.#claims.setHealth(claim, healthy);
  }

  /** Whether a route is healthy as its port's record says (unknown routes count as healthy). */
  routeHealthy(port: number, node: string, tunnel: string, protocol?: "udp"): boolean {
    return this.#claims.routeHealthy(portKeyOf(port, protocol), node, tunnel);
  }

  /** The first live route of `port` (of `protocol`, TCP when undefined), if any. */
  holder(port: number, protocol?: "udp"): PortClaim | undefined {
    return this.#claims.liveRoutes(portKeyOf(port, protocol))[0]?.claim;
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
      const entry = await this.#bucket.get(ownerKeyOf(owner));
      if (entry?.operation !== "PUT") return undefined;
      const port = Number(JSON.parse(entry.string())?.port);
      return Number.isInteger(port) && port > 0 ? port : undefined;
    } catch {
      return undefined;
    }
  }

  #knownOwnerPort(owner: string, bindHost: string): number | undefined {
    for (const { record } of this.#claims.records()) {
      if (!record.shared || record.owner !== owner) continue;
      if (!record.routes.some((r) => this.#claims.isLive(r))) continue;
      if (record.protocol === "udp") continue; // groups are TCP ports only
      if (record.bindHost === bindHost || record.routes.some((r) => r.node !== this.#node)) {
        return record.port as number;
      }
    }
    return undefined;
  }

  /** Every live route in the cluster, by port. */
  claims(): PortClaim[] {
    return this.#claims.claims().sort((a, b) => a.port - b.port);
  }

  /** The keys this node has records of. */
  keys(): Iterable<string> {
    return this.#claims.keys();
  }

  /** Applies a record from the watch (or a listing): a change per route that came or went. */
  apply(entry: KvEntry): void {
    this.#claims.apply(entry);
  }

  /** Forgets a record that is gone from the bucket: each of its routes is released. */
  forget(key: string): void {
    this.#claims.forget(key);
  }

  /** A node run is gone: its routes are removed from every record (records left empty go). */
  nodeGone(node: string, run: string): Promise<void> {
    return this.#claims.nodeGone(node, run);
  }

  /**
   * Writes this node's routes again where they went missing, and returns those whose port
   * another owner took meanwhile: their tunnels must close.
   */
  reassert(options: { rewrite?: boolean } = {}): Promise<PortClaim[]> {
    return this.#claims.reassert(options);
  }

  /** Stops timers. */
  stop(): void {
    this.#claims.stop();
  }

  /** Deletes `owner`'s key if it names `port` and the port has no record (any more). */
  async #dropOwnerKey(owner: string, port: number): Promise<void> {
    const key = ownerKeyOf(owner);
    const entry = await this.#bucket.get(key);
    if (entry?.operation !== "PUT" || Number(JSON.parse(entry.string())?.port) !== port) return;
    if (await this.#claims.read(portKeyOf(port))) return;
    await this.#bucket.delete(key, { previousSeq: entry.revision });
  }

  /**
   * Names `port` as `owner`'s port, create-if-absent. Resolves with another port when the owner
   * already holds a live one (join it), or undefined when `port` is now the owner's.
   */
  async #ownerClaim(owner: string, port: number): Promise<number | undefined> {
    const key = ownerKeyOf(owner);
    const value = JSON.stringify({ port });
    for (let attempt = 0; attempt < ATTEMPTS; attempt++) {
      const entry = await this.#bucket.get(key);
      if (!entry || entry.operation !== "PUT") {
        try {
          await this.#bucket.create(key, value);
          return undefined;
        } catch (error) {
          if (!isRevisionConflict(error)) throw error;
          continue;
        }
      }
      const held = Number(JSON.parse(entry.string())?.port);
      if (held === port) return undefined;
      const current = await this.#claims.read(portKeyOf(held));
      if (
        current && current.record.owner === owner &&
        !this.#claims.isStale(current.record, current.created)
      ) {
        return held;
      }
      // Named a moment ago and its record not written yet: another node is claiming it now.
      if (!current && Date.now() - entry.created.getTime() < this.#ttlMs) return held;
      try {
        await this.#bucket.update(key, value, entry.revision); // the old port is gone
        return undefined;
      } catch (error) {
        if (!isRevisionConflict(error)) throw error;
      }
    }
    return undefined;
  }
}

function claimOf(record: ClaimRecord, route: StoredRoute): PortClaim {
  return {
    ...routeClaim(record, route),
    bindHost: record.bindHost as string,
    port: record.port as number,
    ...(record.protocol === "udp" ? { protocol: "udp" as const } : {}),
  };
}
