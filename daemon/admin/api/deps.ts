/**
 * What each endpoint module of the admin API needs of the daemon: one small interface per
 * module, naming only what it reads and acts on, so that an endpoint can be built over small
 * fakes (its tests call `app.request(...)` with no listener) and a reader sees what it touches.
 * The daemon satisfies them all as it is; {@linkcode AdminDeps} is what the whole app needs.
 *
 * Endpoints read these properties at each request, never once when the app is built: the
 * daemon's registry becomes the cluster registry once it joined one, and its config changes on
 * a reload.
 *
 * The cluster is described here too, by what the admin asks of it, rather than imported:
 * `cluster/answers.ts` builds on this folder's views, and importing the cluster's types here
 * would make the two folders import each other.
 *
 * @module
 */

import type { Config } from "../../config/mod.ts";
import type { Counters } from "../../counters.ts";
import type { EventFeed } from "../../events.ts";
import type { HttpStats } from "../../http/http_stats.ts";
import type { PortClaim, Registry } from "../../registry/registry.ts";
import type { CertificateStore } from "../../tls/certificates.ts";
import type { UdpCounters } from "../../../tunnel/udp/udp_flow.ts";

/**
 * The daemon's lifecycle states, as `daemon.ts` names them. A state added there and not here
 * makes the daemon no longer an {@linkcode AdminDeps}, so the two cannot drift apart unseen.
 */
export type DaemonState = "starting" | "running" | "draining" | "stopped";

/** Where the daemon's listeners are bound, as `host:port` (the WebSocket one with its path). */
export interface ListenerAddresses {
  /** The yamux-over-TCP (or TLS) listener. */
  readonly tcp?: string;
  /** The WebSocket listener. */
  readonly websocket?: string;
  /** The HTTP tunnels' port. */
  readonly http?: string;
  /** The HTTPS and TLS tunnels' port. */
  readonly https?: string;
  /** In a cluster: the relay listener. */
  readonly cluster?: string;
  /** In a cluster: where other nodes dial the relay listener. */
  readonly advertise?: string;
}

/** A live node of the cluster, as its presence entry says. */
export interface ClusterNode {
  /** The node's name. */
  readonly node: string;
  /** Where other nodes reach its relay listener. */
  readonly advertise: string;
  /** Its tunnelmux version. */
  readonly version: string;
  /** When it started (ms since the epoch). */
  readonly startedAt: number;
  /** When it last wrote its entry (ms since the epoch, its clock). */
  readonly at: number;
  /** Its client sessions. */
  readonly sessions: number;
  /** Its reverse tunnels. */
  readonly tunnels: number;
}

/** A relay session with another node (the cluster's view carries more, shown as it is). */
export interface ClusterPeer {
  /** The other node's name. */
  readonly node: string;
  /** Whether the session is up. */
  readonly connected: boolean;
  /** Relay streams this node opened. */
  readonly streamsOut: number;
  /** Relay streams the other node opened. */
  readonly streamsIn: number;
}

/** A listener this node keeps for a tunnel held on another node (shown as the view has it). */
export interface ClusterRelay {
  /** The public port relayed. */
  readonly port: number;
  /** `udp` for a UDP port's relay; absent for TCP. */
  readonly protocol?: "udp";
  /** A UDP relay's flows, datagrams and drops (`refused`: by the tunnel's rules here). */
  readonly udp?: Readonly<UdpCounters>;
  /** The node holding the tunnel. */
  readonly node: string;
  /** The tunnel, on that node. */
  readonly tunnel: string;
  /** Visitor bytes relayed to that node. */
  readonly bytesToOwner: number;
  /** Bytes relayed back to visitors. */
  readonly bytesFromOwner: number;
}

/** What this node knows of the cluster now. */
export interface ClusterFacts {
  /** This node's name. */
  readonly node: string;
  /** The NATS connection. */
  readonly nats: { readonly state: string; readonly server: string | undefined };
  /** Every live node, this one included. */
  readonly nodes: readonly ClusterNode[];
  /** Relay sessions with the other nodes. */
  readonly peers: readonly ClusterPeer[];
  /** Relay listeners for tunnels held elsewhere. */
  readonly relays: readonly ClusterRelay[];
}

/** The answers to a query of the cluster's nodes: one per node that answered, and who did not. */
export interface ClusterAnswers {
  /** Each answer with the node that gave it. */
  // deno-lint-ignore no-explicit-any
  readonly answers: { node: string; data: any }[];
  /** Live nodes that did not answer before the deadline. */
  readonly missing: string[];
}

/** What the admin API asks of this node's cluster (`cluster/cluster.ts`'s `Cluster`). */
export interface AdminCluster {
  /** This node's name. */
  readonly node: string;
  /** What this node knows of the cluster now. */
  view(): ClusterFacts;
  /** Asks every live node (or only `options.node`) a query of `kind`, within a deadline. */
  ask(
    kind: string,
    data: unknown,
    options?: { node?: string; timeoutMs?: number },
  ): Promise<ClusterAnswers>;
  /** Every node's events, each with its `node`. */
  readonly events: EventFeed;
  /** The cluster-wide port claims, and each route's health as its record says. */
  readonly registry: {
    /** Every port claim of every node. */
    claims(): PortClaim[];
    /** Whether route `tunnel` of `node` on `port` takes visitors, as its record says. */
    routeHealthy(port: number, node: string, tunnel: string, protocol?: "udp"): boolean;
  };
}

/** The session endpoints': sessions to list, kick and reset, and the cluster to reach across. */
export interface SessionsApiDeps {
  /** This node's sessions. */
  readonly registry: Registry;
  /** The cluster, when the daemon is in one. */
  readonly cluster?: AdminCluster;
  /** Where a stream reset by an operator is published. */
  readonly events: Pick<EventFeed, "publish">;
}

/** The tunnel endpoints': tunnels and services to list and close, and the HTTPS certificates. */
export interface TunnelsApiDeps {
  /** This node's tunnels and the services it knows. */
  readonly registry: Registry;
  /** The cluster, when the daemon is in one. */
  readonly cluster?: AdminCluster;
  /** The certificates the HTTPS port terminates with. */
  readonly certificates: Pick<CertificateStore, "find" | "list">;
}

/** The token endpoints': minted tokens, the sessions using them, and the limits in force. */
export interface TokensApiDeps {
  /** Minted tokens (`registry.tokens`) and the sessions of their clients. */
  readonly registry: Registry;
  /** The configuration in force: its limits bound a mint's scopes. */
  readonly config: Config;
  /** Where mints and revocations are published. */
  readonly events: Pick<EventFeed, "publish">;
}

/** The probes', `/v1/info`'s and `/v1/drain`'s: the daemon's lifecycle and what it runs. */
export interface SystemApiDeps {
  /** The lifecycle state. */
  readonly state: DaemonState;
  /** When the daemon started (ms since the epoch). */
  readonly startedAt: number;
  /** The configuration in force. */
  readonly config: Config;
  /** Where its listeners are bound. */
  readonly addresses: ListenerAddresses;
  /** What it holds, counted in `/v1/info`. */
  readonly registry: Registry;
  /** Begins a graceful shutdown; resolves once stopped. */
  drain(graceMs: number): Promise<void>;
}

/** `/v1/cluster`'s: the cluster, when the daemon is in one. */
export interface ClusterApiDeps {
  /** The cluster, when the daemon is in one. */
  readonly cluster?: AdminCluster;
}

/** The event feed's: the daemon's events (and every node's, in a cluster). */
export interface EventsApiDeps {
  /** The daemon's events. */
  readonly events: EventFeed;
  /** Settles once the daemon stopped: every feed connection then ends. */
  readonly stopped: Promise<unknown>;
  /** The cluster, when the daemon is in one: its feed of every node's events. */
  readonly cluster?: Pick<AdminCluster, "events">;
}

/** `/metrics`': everything counted, read at scrape time. */
export interface MetricsApiDeps {
  /** The lifecycle state. */
  readonly state: DaemonState;
  /** When the daemon started (ms since the epoch). */
  readonly startedAt: number;
  /** Sessions, tunnels and services, with their live counters. */
  readonly registry: Registry;
  /** The daemon's events: sessions are followed from `session_opened`. */
  readonly events: Pick<EventFeed, "subscribe">;
  /** The daemon's event counters. */
  readonly counters: Pick<Counters, "get" | "snapshot">;
  /** What the HTTP front saw, by host. */
  readonly httpStats: Pick<HttpStats, "entries">;
  /** The cluster, when the daemon is in one. */
  readonly cluster?: Pick<AdminCluster, "view">;
  /**
   * UDP counters: closed UDP tunnels' totals (live ones are in the registry), UDP forwards', and
   * closed UDP relays' totals (live ones are in the cluster's view).
   */
  readonly udp?: {
    readonly closedTunnels: Readonly<UdpCounters>;
    readonly forwards: Readonly<UdpCounters>;
    readonly closedRelays?: Readonly<UdpCounters>;
  };
}

/** What the whole admin app needs: every endpoint module's, and the admin token's hash. */
export type AdminDeps =
  & SessionsApiDeps
  & TunnelsApiDeps
  & TokensApiDeps
  & SystemApiDeps
  & ClusterApiDeps
  & EventsApiDeps
  & MetricsApiDeps;
