/**
 * The daemon's state behind one interface: its client sessions, the reverse tunnels they hold
 * and the public ports those listen on, named service offers, and minted tokens. The registry is
 * the only place these change; the daemon, client sessions and the admin API use its operations
 * and read-only views, never each other's maps.
 *
 * Two kinds of things live here, on purpose kept apart:
 * - **live, node-local objects** (a {@linkcode SessionHandle}, a reverse tunnel's listener, the
 *   yamux session a service offer is reached through) that only this daemon can act on;
 * - **plain records** ({@linkcode PortClaim}, {@linkcode ServiceRecord}, token records): JSON-safe,
 *   naming the node that holds them, so that a store shared by several daemons can keep them.
 *
 * {@linkcode LocalRegistry} keeps everything in memory (and minted tokens in the data directory).
 * A cluster backs the same interface with NATS JetStream KV: the operations on shared records are
 * asynchronous for that reason, ports are claimed create-if-absent (a KV `create`, which fails
 * when the key exists) and released only by their holder (a delete with the revision it wrote),
 * and {@linkcode Registry.watch} delivers changes made anywhere.
 *
 * @module
 */

import type { VisitorPolicy } from "../../tunnel/policy/visitor_policy.ts";
import type { Entry } from "../../tunnel/policy/visitor_gate.ts";
import type { SessionStats } from "../../protocol/stats.ts";
import type { Session } from "../../protocol/session.ts";
import type { Stream } from "../../protocol/stream.ts";
import type { Transport } from "../../protocol/transport.ts";
import type { SpliceCounters, SpliceThrottle } from "../../tunnel/splice.ts";
import type { Balance } from "./route_choice.ts";
import type { TokenRegistry } from "../tokens/store.ts";
import type { HttpGate } from "../http/http_gate.ts";
import type { HttpPolicy } from "../../tunnel/policy/http_policy.ts";
import type { UdpCounters } from "../../tunnel/udp/udp_flow.ts";

/** How a client reached the daemon. */
export type TransportKind = "tcp" | "tls" | "ws" | "wss";

/** Lifecycle of a client session. */
export type ClientSessionState = "handshake" | "ready" | "closed";

/** What {@linkcode SessionHandle.resetStream} did. */
export type StreamResetResult = "reset" | "not_found" | "control_stream";

/**
 * A client session as the rest of the daemon sees it: read-only facts and counters, and the
 * operator's actions. The yamux session itself stays inside.
 */
export interface SessionHandle {
  /** Session id, unique in this daemon run (`s1`, `s2`, …). */
  readonly id: string;
  /** The authenticated client's name; undefined during the handshake. */
  readonly client: string | undefined;
  /** handshake, ready or closed. */
  readonly state: ClientSessionState;
  /** How the client connected. */
  readonly transportKind: TransportKind;
  /** The client's address. */
  readonly remoteAddress: string;
  /** When it connected (ms since the epoch). */
  readonly since: number;
  /** Resolves once the session is closed and its tunnels and offers are released. */
  readonly closed: Promise<void>;
  /** The yamux session's counters (live: they keep moving). */
  readonly stats: Readonly<SessionStats>;
  /** Last measured keepalive round trip, ms; 0 until one was answered. */
  readonly rtt: number;
  /** Sessions its client keeps to distinct nodes (its `ha` in the hello); 1 when not said. */
  readonly ha: number;
  /** Streams open now, the control stream included. */
  readonly streamCount: number;
  /** What its UDP forwards did (flows, datagrams, bytes, drops), live; absent: none counted. */
  readonly udpForwards?: Readonly<UdpCounters>;
  /** The control stream's id, once the client opened it. */
  readonly controlStreamId: number | undefined;
  /** The open streams, for inspection only. */
  streams(): IterableIterator<Readonly<Stream>>;
  /** Ids of this session's reverse tunnels. */
  tunnelIds(): string[];
  /** Closes now: GoAway, then the connection ends (the operator's kick: the client reconnects). */
  close(): void;
  /**
   * Closes because its credential no longer holds, telling the client `reason` first (as a final
   * `unauthorized`, so it does not reconnect with it).
   */
  revoked(reason: string): void;
  /** Graceful: GoAway, then close once only the control stream is left. */
  drain(): void;
  /** Resets one stream; the control stream is refused (closing the session is for that). */
  resetStream(id: number): StreamResetResult;
  /** Closes one of this session's tunnels and tells the client why; false if not its own. */
  closeTunnel(id: string, reason: string): boolean;
}

/** Live counters of a tunnel. Byte counts move while connections are open. */
export interface TunnelStats extends SpliceCounters {
  /** Visitors accepted in all. `aToB` counts visitor → client bytes, `bToA` client → visitor. */
  connections: number;
  /** Visitors connected now. */
  active: number;
  /** Visitors that ended in an error (the client could not be reached, or a side failed). */
  errors: number;
}

/**
 * The way to the client holding a host name: that client's tunnel on this node, or, in a
 * cluster, a relay route to the node that holds it (visitors then cross one relay session).
 */
export interface HostRoute {
  /** The tunnel's id in the node that holds it. */
  readonly id: string;
  /** A TLS tunnel: its connections are passed through, never HTTP requests. */
  readonly passthrough: boolean;
  /** Takes a whole visitor connection (a passed-through TLS connection). */
  visitor(visitor: Transport): void;
  /** A stream to the client for one HTTP request, or undefined when it takes none now. */
  open(remote: string, local: string): Stream | undefined;
  /** Counts the bytes of one request {@linkcode open} was for, once it is over. */
  exchanged(bytesIn: number, bytesOut: number): void;
  /** An HTTP tunnel's `policy.http` as the HTTP front applies it; undefined: none. */
  readonly gate?: HttpGate;
  /** Checks one HTTP request's visitor against the tunnel's policy (this node's tunnels only). */
  enter?(remote: string): Entry;
  /**
   * The tunnel's and its client's bandwidth each way for the HTTP front (`in`: request bytes to
   * the client, `out`: response bytes to the visitor); undefined when none is set.
   */
  bandwidth?(): { in?: SpliceThrottle; out?: SpliceThrottle } | undefined;
}

/**
 * A client's tunnel of this node as the rest of the daemon sees it (`tunnels/reverse_tunnel.ts`
 * is the one implementation): facts, counters and the operator's and the cluster's actions.
 */
export interface TunnelHandle extends HostRoute {
  /** The owning client. */
  readonly client: string;
  /** Who holds its port or name (`client:NAME` or `group:NAME`). */
  readonly owner: string;
  /** The bound address (an HTTP tunnel: its host name). */
  readonly bindHost: string;
  /** The bound port (an HTTP tunnel: the HTTP or HTTPS port it is reached on). */
  readonly port: number;
  /** The client's label, if any. */
  readonly label: string | undefined;
  /** The host name of an HTTP or TLS tunnel; undefined for a port's tunnel. */
  readonly host: string | undefined;
  /** `udp` for a UDP port's tunnel (its visitors are flows of datagrams); undefined for TCP. */
  readonly protocol?: "udp";
  /** A UDP tunnel's flows, datagrams, bytes and drops (live); undefined for any other. */
  readonly udp?: Readonly<UdpCounters>;
  /** Every URL visitors reach an HTTP or TLS tunnel by (HTTP and HTTPS ports); empty for a port's. */
  readonly urls: readonly string[];
  /** When it was opened (ms since the epoch). */
  readonly createdAt: number;
  /** Live counters. */
  readonly stats: Readonly<TunnelStats>;
  /** Whether it takes visitors now: open, and its client's local service healthy. */
  readonly healthy: boolean;
  /** False while its client reports its local service failing its health check. */
  reportedHealthy: boolean;
  /** Its visitor policy in force: the operator's rules narrowed by the client's. */
  readonly policy: VisitorPolicy;
  /** The rules its client asked for, narrowed again when the operator's change. */
  readonly requestedPolicy: VisitorPolicy;
  /**
   * Puts a new policy in force without closing it (a reload); settles once it is. `withheld`: why
   * the client's own rules are not in force (the operator no longer allows them).
   */
  setPolicy(policy: VisitorPolicy, withheld?: string): void | Promise<void>;
  /** Why its client's rules are not in force and every visitor is refused; undefined: they are. */
  readonly withheld?: string;
  /** Takes no more visitors; those connected finish (a drain). */
  stopAccepting(): void;
  /** Takes no more visitors and disconnects the connected ones. */
  close(): void;
  /** A visitor another node of the cluster took on its port, relayed here as `stream`. */
  relayed(stream: Stream, remote: string, local: string, rest: Uint8Array): void;
}

/**
 * One route of something served by sessions (a public port, a named service): which session of
 * which client on which node serves it, and who owns it.
 */
export interface RouteClaim {
  /** The route's id in its node: its tunnel (for a service route, its session). */
  readonly tunnel: string;
  /** The session serving it. */
  readonly session: string;
  /** The client of that session. */
  readonly client: string;
  /** The node holding the session. */
  readonly node: string;
  /**
   * Who holds it: `client:NAME`, or `group:NAME`. Claims of the same owner that say `shared`
   * may hold it together (one claim per route). Default: `client:` and `client`.
   */
  readonly owner?: string;
  /** Whether this claim may share it with other claims of its owner. */
  readonly shared?: boolean;
  /**
   * The route's visitor policy as it was claimed, for every node to see (its holding node
   * enforces the live one on every visitor, its own and those other nodes relay).
   */
  readonly policy?: VisitorPolicy;
}

/** A public port held for a reverse tunnel: cluster-wide, one owner at a time. */
export interface PortClaim extends RouteClaim {
  /** The address the port is bound on. */
  readonly bindHost: string;
  /** The port. */
  readonly port: number;
  /** `udp` for a UDP port, a name space apart from TCP's; undefined for TCP. */
  readonly protocol?: "udp";
}

/** A host name held by an HTTP or TLS tunnel: one route, of one session, cluster-wide. */
export interface HostClaim extends RouteClaim {
  /** The host name. */
  readonly host: string;
  /** A TLS tunnel (its connections passed through), not an HTTP one. */
  readonly passthrough: boolean;
  /** An HTTP tunnel's `policy.http`, so every node's HTTP front applies it. */
  readonly http?: HttpPolicy;
  /**
   * The path under `host` it serves (`policy.http.pathPrefix`): several tunnels of one client may
   * hold one name, each request going to the longest prefix its path lies under.
   */
  readonly pathPrefix?: string;
}

/** The outcome of {@linkcode Registry.claimPort}. */
export type ClaimResult<C = PortClaim> =
  | { ok: true }
  | {
    ok: false;
    /** `taken`: someone holds it; `unavailable`: the registry cannot be asked now. */
    reason: "taken" | "unavailable";
    /** Who holds it, when known. */
    holder?: C;
    /**
     * For a shared claim: the port its owner already holds elsewhere (found when two routes of
     * one owner chose ports at the same instant); ask for that one instead.
     */
    join?: number;
  };

/**
 * A named service offer as a record: who offers it, where. A service may have several offers
 * (routes) of one owner: the sessions of a client that keeps sessions to several nodes, or the
 * members of a group; each user goes to one of them.
 */
export interface ServiceRecord {
  /** The service name. */
  readonly name: string;
  /** The offering client. */
  readonly client: string;
  /** The offering session. */
  readonly session: string;
  /** The node holding that session. */
  readonly node: string;
  /** Who owns the name: `client:NAME` (default: the offering client) or `group:NAME`. */
  readonly owner?: string;
  /** How users are spread over the owner's offers (a group's setting). Default round robin. */
  readonly balance?: Balance;
}

/** Live counters of an offer: `aToB` user → offerer bytes, `bToA` the other way. */
export interface ServiceStats extends SpliceCounters {
  /** Users connected in all. */
  connections: number;
  /** Users connected now. */
  active: number;
}

/** An offer this node can reach: its record, its counters and the offerer's yamux session. */
export interface ServiceOffer extends ServiceRecord {
  /** Live counters. */
  readonly stats: ServiceStats;
  /** False while the offering client reports its local service unhealthy: it takes no users. */
  healthy: boolean;
  /**
   * Opens streams to the offering client: its yamux session, or, for an offer held on another node
   * of a cluster, the relay session to that node.
   */
  readonly yamux: Pick<Session, "open">;
}

/** One change to the registry, as {@linkcode Registry.watch} delivers it. */
export type RegistryChange =
  | { kind: "session"; op: "added" | "removed"; id: string }
  | { kind: "tunnel"; op: "added" | "removed"; id: string; session: string }
  | { kind: "port"; op: "claimed" | "changed" | "released"; claim: PortClaim }
  | { kind: "service"; op: "offered" | "withdrawn"; record: ServiceRecord }
  | { kind: "token"; op: "changed" };

/** The daemon's state and the only operations that change it. */
export interface Registry {
  /** This node's name, written into every record it makes. */
  readonly node: string;

  /** Adds a new (handshaking) session of this node. */
  addSession(session: SessionHandle): void;
  /** Forgets a closed session. */
  removeSession(id: string): void;
  /** This node's session `id`. */
  session(id: string): SessionHandle | undefined;
  /** This node's sessions, oldest first. */
  sessions(): SessionHandle[];
  /** How many sessions this node has (handshaking ones included). */
  readonly sessionCount: number;

  /**
   * Claims a public port for a tunnel, if nobody holds it (create-if-absent): of two claims of
   * the same port, however close together, exactly one succeeds, unless both are `shared`
   * claims of the same owner (routes of one tunnel), which hold it together.
   */
  claimPort(claim: PortClaim): Promise<ClaimResult>;
  /**
   * Releases a claim, if it is still held (same tunnel); a stale release changes nothing. The
   * port is free once its last claim is released.
   */
  releasePort(claim: PortClaim): Promise<void>;
  /**
   * Records whether a route's local service is healthy (its client's check), so that every node
   * routing visitors to it knows; a single node keeps it on the tunnel itself.
   */
  setRouteHealth(claim: PortClaim, healthy: boolean): Promise<void>;
  /**
   * Records a port tunnel's rules changed in place (a cluster writes them into the port's record);
   * absent on a single node, whose tunnel holds them.
   */
  updatePort?(claim: PortClaim): Promise<void>;
  /** The port held by `owner`'s shared claims on `bindHost`, if any (a group's port). */
  ownerPort(owner: string, bindHost: string): Promise<number | undefined>;
  /** Who holds `bindHost:port` (of `protocol`, TCP when undefined), if anyone. */
  portHolder(bindHost: string, port: number, protocol?: "udp"): Promise<PortClaim | undefined>;

  /** Adds a listening tunnel of this node, held by session `sessionId`. */
  addTunnel(tunnel: TunnelHandle, sessionId: string): void;
  /** Forgets a tunnel; returns it, if it was known. */
  removeTunnel(id: string): TunnelHandle | undefined;
  /** This node's tunnel `id`. */
  tunnel(id: string): TunnelHandle | undefined;
  /** The session holding tunnel `id`. */
  tunnelOwner(id: string): SessionHandle | undefined;
  /** This node's tunnels, oldest first. */
  tunnels(): TunnelHandle[];
  /**
   * Closes this node's tunnel `id`: through its owning session, which tells the client `reason`;
   * a tunnel whose session is gone is closed and forgotten here. False when there is no such
   * tunnel on this node.
   */
  closeTunnel(id: string, reason: string): boolean;

  /**
   * Registers an offer (a route of the service): refused (`taken`) when another owner offers
   * the name, or `unavailable` when the registry cannot be asked; offers of one owner (the
   * sessions of one client, the members of a group) serve the name together.
   */
  offerService(offer: ServiceOffer): Promise<ClaimResult<ServiceRecord>>;
  /** Withdraws session `sessionId`'s offer of `name`; false when it had none. */
  withdrawService(name: string, sessionId: string): Promise<boolean>;
  /** Withdraws every offer of a session (it ended). */
  withdrawServices(sessionId: string): Promise<void>;
  /** Records whether session `sessionId`'s offer of `name` is healthy; false when it has none. */
  setServiceHealth(name: string, sessionId: string, healthy: boolean): Promise<boolean>;
  /**
   * The offer of `name` the next user goes to, if any can take one: healthy offers only, this
   * node's first (no relay hop), spread by the owner's balance. With `localOnly`, only offers of
   * this node (a stream relayed from another node is never relayed again).
   */
  service(name: string, localOnly?: boolean): ServiceOffer | undefined;
  /** Every offer this node knows, by name (several per name when several serve it). */
  services(): ServiceOffer[];

  /** Minted tokens. */
  readonly tokens: TokenRegistry;

  /**
   * Claims `claim.host` for the HTTP or TLS tunnel `tunnel` (of this node): `taken` when another
   * tunnel holds it, anywhere in the cluster; `unavailable` when the cluster cannot be asked.
   */
  claimHost(claim: HostClaim, tunnel: TunnelHandle): Promise<ClaimResult<HostClaim>>;
  /** Releases `claim.host` if `tunnel` holds it. */
  releaseHost(claim: HostClaim, tunnel: TunnelHandle): Promise<void>;
  /**
   * Records an HTTP tunnel's rules changed in place (a cluster writes them into the name's record,
   * and every node's route to it applies them); absent on a single node.
   */
  updateHost?(claim: HostClaim): Promise<void>;
  /**
   * The tunnel holding `host`: this node's own, or in a cluster a relay to the node that holds
   * it (its visitors and requests cross one relay session); undefined when nobody does. Given a
   * request's `path`, the tunnel holding the longest path prefix of `host` it lies under, if any.
   */
  hostRoute(host: string, path?: string): HostRoute | undefined;
  /** Whether host claims may name a `pathPrefix` (a single node and a cluster both do). */
  readonly pathPrefixes?: boolean;

  /** Calls `listener` with every change from now on; returns the function that stops it. */
  watch(listener: (change: RegistryChange) => void): () => void;
}
