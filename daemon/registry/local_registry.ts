/**
 * The single-node {@linkcode Registry}: everything in this process's memory, minted tokens in the
 * data directory (through the {@linkcode TokenRegistry} it is given). Its asynchronous operations
 * settle at once; their semantics (create-if-absent claims, releases only by the holder) are the
 * ones a shared store must keep too.
 *
 * @module
 */

import { chooseRoute } from "./route_choice.ts";
import { underPrefix } from "../../tunnel/policy/http_policy.ts";
import type { ServiceOffer } from "./registry.ts";
import type { TokenRegistry } from "../tokens/store.ts";
import type {
  ClaimResult,
  HostClaim,
  PortClaim,
  Registry,
  RegistryChange,
  ServiceRecord,
  SessionHandle,
  TunnelHandle,
} from "./registry.ts";

/**
 * The key of a port claim: `bindHost:port` (a host holds each port once per address), and its
 * protocol for UDP (TCP and UDP ports are apart: one client may hold TCP 53 and UDP 53).
 */
export function portKey(bindHost: string, port: number, protocol?: "udp"): string {
  return protocol === "udp" ? `udp|${bindHost}|${port}` : `${bindHost}|${port}`;
}

/** Who holds a claim or an offer: its `owner`, or its client. */
export function ownerOf(claim: { readonly owner?: string; readonly client: string }): string {
  return claim.owner ?? `client:${claim.client}`;
}

/** Whether `claim` may hold a port together with `holder`: both shared, one owner. */
export function canShare(holder: PortClaim, claim: PortClaim): boolean {
  return !!holder.shared && !!claim.shared && ownerOf(holder) === ownerOf(claim);
}

/** The plain record of an offer (no live handles, no counters). */
export function serviceRecord(offer: ServiceOffer): ServiceRecord {
  const { name, client, session, node, owner, balance } = offer;
  return { name, client, session, node, owner, balance };
}

/** How to build a {@linkcode LocalRegistry}. */
export interface LocalRegistryOptions {
  /** This node's name. Default `local`. */
  node?: string;
  /** Where minted tokens live. */
  tokens: TokenRegistry;
}

/** In-memory registry of one daemon. */
export class LocalRegistry implements Registry {
  readonly node: string;
  readonly tokens: TokenRegistry;
  readonly #sessions = new Map<string, SessionHandle>();
  readonly #tunnels = new Map<string, { tunnel: TunnelHandle; session: string }>();
  /** The claims of each port: one, or several shared claims of one owner. */
  readonly #ports = new Map<string, PortClaim[]>();
  /** The offers of each service name: one owner's, in the order they came. */
  readonly #services = new Map<string, ServiceOffer[]>();
  /** Counts service choices, so that offers are taken in turn. */
  #turn = 0;
  readonly #watchers = new Set<(change: RegistryChange) => void>();

  /** An empty registry. */
  constructor(options: LocalRegistryOptions) {
    this.node = options.node ?? "local";
    this.tokens = options.tokens;
  }

  addSession(session: SessionHandle): void {
    this.#sessions.set(session.id, session);
    this.#emit({ kind: "session", op: "added", id: session.id });
  }

  removeSession(id: string): void {
    if (this.#sessions.delete(id)) this.#emit({ kind: "session", op: "removed", id });
  }

  session(id: string): SessionHandle | undefined {
    return this.#sessions.get(id);
  }

  sessions(): SessionHandle[] {
    return [...this.#sessions.values()]; // insertion order: oldest first
  }

  get sessionCount(): number {
    return this.#sessions.size;
  }

  claimPort(claim: PortClaim): Promise<ClaimResult> {
    const key = portKey(claim.bindHost, claim.port, claim.protocol);
    const holders = this.#ports.get(key) ?? [];
    if (holders.length > 0 && !canShare(holders[0], claim)) {
      return Promise.resolve({ ok: false, reason: "taken", holder: holders[0] });
    }
    this.#ports.set(key, [...holders, claim]);
    this.#emit({ kind: "port", op: "claimed", claim });
    return Promise.resolve({ ok: true });
  }

  releasePort(claim: PortClaim): Promise<void> {
    const key = portKey(claim.bindHost, claim.port, claim.protocol);
    const holders = this.#ports.get(key) ?? [];
    const held = holders.find((h) => h.tunnel === claim.tunnel && h.node === claim.node);
    if (held) {
      const left = holders.filter((h) => h !== held);
      if (left.length > 0) this.#ports.set(key, left);
      else this.#ports.delete(key);
      this.#emit({ kind: "port", op: "released", claim: held });
    }
    return Promise.resolve();
  }

  portHolder(bindHost: string, port: number, protocol?: "udp"): Promise<PortClaim | undefined> {
    return Promise.resolve(this.#ports.get(portKey(bindHost, port, protocol))?.[0]);
  }

  setRouteHealth(_claim: PortClaim, _healthy: boolean): Promise<void> {
    return Promise.resolve(); // the tunnel itself carries it on a single node
  }

  ownerPort(owner: string, bindHost: string): Promise<number | undefined> {
    for (const holders of this.#ports.values()) {
      const first = holders[0];
      if (
        first.bindHost === bindHost && !first.protocol && first.shared && ownerOf(first) === owner
      ) {
        return Promise.resolve(first.port);
      }
    }
    return Promise.resolve(undefined);
  }

  addTunnel(tunnel: TunnelHandle, sessionId: string): void {
    this.#tunnels.set(tunnel.id, { tunnel, session: sessionId });
    this.#emit({ kind: "tunnel", op: "added", id: tunnel.id, session: sessionId });
  }

  removeTunnel(id: string): TunnelHandle | undefined {
    const entry = this.#tunnels.get(id);
    if (!entry) return undefined;
    this.#tunnels.delete(id);
    this.#emit({ kind: "tunnel", op: "removed", id, session: entry.session });
    return entry.tunnel;
  }

  tunnel(id: string): TunnelHandle | undefined {
    return this.#tunnels.get(id)?.tunnel;
  }

  tunnelOwner(id: string): SessionHandle | undefined {
    const entry = this.#tunnels.get(id);
    return entry ? this.#sessions.get(entry.session) : undefined;
  }

  tunnels(): TunnelHandle[] {
    return [...this.#tunnels.values()].map((entry) => entry.tunnel);
  }

  closeTunnel(id: string, reason: string): boolean {
    const tunnel = this.tunnel(id);
    if (!tunnel) return false;
    // The owning session removes it (and releases its port) and tells its client; an orphan,
    // whose session no longer claims it, must at least stop listening and leave the registry.
    if (!this.tunnelOwner(id)?.closeTunnel(id, reason)) {
      tunnel.close();
      this.removeTunnel(id);
    }
    return true;
  }

  // ---- host names of HTTP tunnels ----

  /** Tunnels by place: the host name, or the host name and a path prefix (`host/api`). */
  readonly #hosts = new Map<string, TunnelHandle>();
  /** The path prefixes held under each host that has any, longest first. */
  readonly #prefixes = new Map<string, string[]>();

  /** Path prefixes of HTTP tunnels are served on a single node. */
  readonly pathPrefixes = true;

  claimHost(claim: HostClaim, tunnel: TunnelHandle): Promise<ClaimResult<HostClaim>> {
    const place = placeOf(claim);
    const holder = this.#hosts.get(place);
    if (holder && holder !== tunnel) return Promise.resolve({ ok: false, reason: "taken" });
    // The places of one name are one client's: no other may take a path of someone's name.
    const others = [
      claim.host,
      ...(this.#prefixes.get(claim.host) ?? []).map((p) => claim.host + p),
    ]
      .map((key) => this.#hosts.get(key))
      .filter((t) => t !== undefined && t !== tunnel);
    if (others.some((t) => t!.client !== tunnel.client)) {
      return Promise.resolve({ ok: false, reason: "taken" });
    }
    this.#hosts.set(place, tunnel);
    if (claim.pathPrefix) {
      const prefixes = this.#prefixes.get(claim.host) ?? [];
      if (!prefixes.includes(claim.pathPrefix)) prefixes.push(claim.pathPrefix);
      prefixes.sort((a, b) => b.length - a.length);
      this.#prefixes.set(claim.host, prefixes);
    }
    return Promise.resolve({ ok: true });
  }

  releaseHost(claim: HostClaim, tunnel: TunnelHandle): Promise<void> {
    const place = placeOf(claim);
    if (this.#hosts.get(place) !== tunnel) return Promise.resolve();
    this.#hosts.delete(place);
    const prefixes = claim.pathPrefix ? this.#prefixes.get(claim.host) : undefined;
    if (prefixes) {
      prefixes.splice(prefixes.indexOf(claim.pathPrefix!), 1);
      if (prefixes.length === 0) this.#prefixes.delete(claim.host);
    }
    return Promise.resolve();
  }

  /**
   * This node's tunnel holding `host` (a node holds its own names' routes only); given a
   * request's `path`, the one of the longest prefix it lies under, else the name's own.
   */
  hostRoute(host: string, path?: string): TunnelHandle | undefined {
    const prefixes = path === undefined ? undefined : this.#prefixes.get(host);
    if (prefixes) {
      for (const prefix of prefixes) {
        if (underPrefix(path!, prefix)) return this.#hosts.get(host + prefix);
      }
    }
    return this.#hosts.get(host);
  }

  /** This node's tunnel holding exactly `host` and `pathPrefix` (none: the name's own). */
  hostAt(host: string, pathPrefix?: string): TunnelHandle | undefined {
    return this.#hosts.get(pathPrefix ? host + pathPrefix : host);
  }

  /** The path prefixes this node's tunnels hold under `host`, longest first. */
  prefixesOf(host: string): readonly string[] {
    return this.#prefixes.get(host) ?? [];
  }

  offerService(offer: ServiceOffer): Promise<ClaimResult<ServiceRecord>> {
    const offers = this.#services.get(offer.name) ?? [];
    const holder = offers.find((o) => ownerOf(o) !== ownerOf(offer));
    if (holder) {
      return Promise.resolve({ ok: false, reason: "taken", holder: serviceRecord(holder) });
    }
    if (!offers.some((o) => o.session === offer.session)) {
      this.#services.set(offer.name, [...offers, offer]);
      this.#emit({ kind: "service", op: "offered", record: serviceRecord(offer) });
    }
    return Promise.resolve({ ok: true });
  }

  withdrawService(name: string, sessionId: string): Promise<boolean> {
    const offers = this.#services.get(name) ?? [];
    const offer = offers.find((o) => o.session === sessionId);
    if (!offer) return Promise.resolve(false);
    const left = offers.filter((o) => o !== offer);
    if (left.length > 0) this.#services.set(name, left);
    else this.#services.delete(name);
    this.#emit({ kind: "service", op: "withdrawn", record: serviceRecord(offer) });
    return Promise.resolve(true);
  }

  async withdrawServices(sessionId: string): Promise<void> {
    for (const offer of this.services()) {
      if (offer.session === sessionId) await this.withdrawService(offer.name, sessionId);
    }
  }

  setServiceHealth(name: string, sessionId: string, healthy: boolean): Promise<boolean> {
    const offer = this.#services.get(name)?.find((o) => o.session === sessionId);
    if (offer) offer.healthy = healthy;
    return Promise.resolve(offer !== undefined);
  }

  service(name: string, _localOnly?: boolean): ServiceOffer | undefined {
    const offers = this.#services.get(name);
    if (!offers) return undefined;
    const candidates = offers.map((offer) => ({
      offer,
      local: true,
      healthy: offer.healthy,
      active: offer.stats.active,
    }));
    const balance = offers[0].balance ?? "round_robin";
    return chooseRoute(candidates, balance, this.#turn++)?.offer;
  }

  services(): ServiceOffer[] {
    return [...this.#services.values()].flat().sort((a, b) => a.name.localeCompare(b.name));
  }

  watch(listener: (change: RegistryChange) => void): () => void {
    this.#watchers.add(listener);
    return () => this.#watchers.delete(listener);
  }

  /** Tells every watcher; one that throws does not stop the others or the operation. */
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

/** Where a host claim is kept: its name, and its path prefix when it has one. */
function placeOf(claim: HostClaim): string {
  return claim.pathPrefix ? claim.host + claim.pathPrefix : claim.host;
}
