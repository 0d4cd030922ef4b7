/**
 * Reverse tunnels: a client's tunnel on this node, for a public port or (an HTTP or TLS tunnel)
 * a host name. Every visitor its port's listener (`port_listener.ts`) or the HTTP(S) front gives
 * it becomes a new stream to the client, piped both ways (`stream_route.ts`). A port may have
 * several routes (sessions of one client on several nodes, members of a group, relays to other
 * nodes); each client tunnel is one of them, with its own id and counters.
 *
 * @module
 */

import type { HttpGate } from "../http/http_gate.ts";
import type { HttpPolicy } from "../../tunnel/policy/http_policy.ts";
import type { Session } from "../../protocol/session.ts";
import type { Stream } from "../../protocol/stream.ts";
import type { Logger } from "../../util/log.ts";
import type { TunnelHandle, TunnelStats } from "../registry/registry.ts";
import { StreamRoute } from "./stream_route.ts";
import type { VisitorLimit } from "./visitor_limit.ts";
import { LiveThrottle, type SpliceThrottle } from "../../tunnel/splice.ts";
import { type Entry, VisitorGate } from "../../tunnel/policy/visitor_gate.ts";
import type { VisitorPolicy } from "../../tunnel/policy/visitor_policy.ts";
import type { UdpCounters } from "../../tunnel/udp/udp_flow.ts";

export type { TunnelStats };

/** How to open a reverse tunnel. */
export interface ReverseTunnelOptions {
  /** The tunnel id, unique in the daemon. */
  id: string;
  /** The owning client's name. */
  client: string;
  /**
   * Who holds the public port: `client:NAME`, or `group:NAME` for a group's tunnel. Routes of one
   * owner may share a port. Default `client:` and the client's name.
   */
  owner?: string;
  /** The client's yamux session, which visitors are sent through. */
  session: Pick<Session, "open">;
  /** The public address (as its listener is bound). */
  bindHost: string;
  /** The public port. */
  port: number;
  /** The client's name for the tunnel, shown to operators. */
  label?: string;
  /**
   * For an HTTP tunnel: the host name it holds on the daemon's HTTP port (then `bindHost` is that
   * name and `port` the HTTP port, for display); its visitors are requests (see `open`).
   */
  host?: string;
  /**
   * With `host`: a TLS tunnel, whose visitors are whole connections of the HTTPS port passed on
   * undecrypted (see `visitor`), never HTTP requests.
   */
  passthrough?: boolean;
  /** With `host`: every URL visitors reach it by (the HTTP and the HTTPS port's). */
  urls?: readonly string[];
  /** With `host`: the tunnel's `policy.http`, which the HTTP front applies to its requests. */
  httpPolicy?: HttpPolicy;
  /**
   * The HTTP front's gate for `httpPolicy`, made by the caller (`makeHttpGate`): its code loads
   * with the first tunnel that has HTTP rules, not at every daemon's start.
   */
  gate?: HttpGate;
  /** How many visitors it takes at once, with its client's other tunnels; default no limit. */
  visitorLimit?: VisitorLimit;
  /** Its visitor policy in force (the operator's narrowed by the client's); default none. */
  policy?: VisitorPolicy;
  /** The policy the client asked for, kept to narrow again when the operator's changes. */
  requestedPolicy?: VisitorPolicy;
  /** Logger with the session's context. */
  log: Logger;
}

/** A client's tunnel on this node. */
export class ReverseTunnel extends StreamRoute implements TunnelHandle {
  /** Owning client. */
  readonly client: string;
  /** Who holds the port (`client:NAME` or `group:NAME`). */
  readonly owner: string;
  /** Bound address. */
  readonly bindHost: string;
  /** Bound port. */
  readonly port: number;
  /** The client's label, if any. */
  readonly label: string | undefined;
  /** The host name of an HTTP tunnel; undefined for a port's tunnel. */
  readonly host: string | undefined;
  /** `udp` for a UDP port's tunnel (`udp_tunnel.ts`); undefined for TCP, HTTP and TLS. */
  readonly protocol: "udp" | undefined = undefined;
  /** A UDP tunnel's counters; undefined for any other. */
  readonly udp: Readonly<UdpCounters> | undefined = undefined;
  /** A TLS tunnel: the host's HTTPS connections are passed through, not terminated. */
  readonly passthrough: boolean;
  /** Every URL visitors reach an HTTP or TLS tunnel by; empty for a port's tunnel. */
  readonly urls: readonly string[];
  /**
   * Told after each {@linkcode setPolicy}, once the new rules are in force (the session writes
   * them into the tunnel's cluster record, so other nodes' routes apply them too).
   */
  onPolicy: (() => void) | undefined;
  /** When it was opened (ms since the epoch). */
  readonly createdAt = Date.now();
  /** False while the client reports its local service failing its health check. */
  reportedHealthy = true;
  /** The policy the client asked for (its own rules, before the operator's narrowed them). */
  requestedPolicy: VisitorPolicy;
  readonly #limit: VisitorLimit | undefined;
  readonly #gate: VisitorGate;
  #httpPolicy: HttpPolicy | undefined;
  #httpGate: HttpGate | undefined;
  /** Policy changes begun, so that one overtaken while it loads the gate's code yields. */
  #changes = 0;
  /** Why its client's rules are not in force (the operator no longer allows them), if so. */
  #withheld: string | undefined;

  /** A tunnel through `options.session`; its port listener or the HTTP(S) front hands it visitors. */
  constructor(options: ReverseTunnelOptions) {
    super(options.id, options.session, true, options.log.child({ tunnel: options.id }));
    this.client = options.client;
    this.owner = options.owner ?? `client:${options.client}`;
    this.bindHost = options.bindHost;
    this.port = options.port;
    this.label = options.label;
    this.host = options.host;
    this.passthrough = options.passthrough ?? false;
    this.urls = options.urls ?? [];
    this.#httpPolicy = options.httpPolicy;
    this.#httpGate = options.gate;
    this.#limit = options.visitorLimit;
    this.#gate = new VisitorGate(options.policy ?? {});
    this.requestedPolicy = options.requestedPolicy ?? {};
  }

  /** Its visitor policy in force. */
  get policy(): VisitorPolicy {
    return this.#gate.policy;
  }

  /** An HTTP tunnel's `policy.http` in force, if it has one. */
  get httpPolicy(): HttpPolicy | undefined {
    return this.#httpPolicy;
  }

  /** Why its client's rules are not in force and every visitor is refused; undefined: they are. */
  get withheld(): string | undefined {
    return this.#withheld;
  }

  /** The HTTP front's gate for {@linkcode httpPolicy}, read by the front at each request. */
  get gate(): HttpGate | undefined {
    return this.#httpGate;
  }

  /**
   * Puts a new policy in force (a reload, a client's `policy` request): visitors connected stay,
   * the next ones (and the next request on a kept-alive connection) meet it. An HTTP tunnel's
   * `http` part gets a new gate; its `pathPrefix` stays as exposed (the registry holds the tunnel
   * by it). A port's or a TLS tunnel's visitors are never HTTP requests: `http` is dropped.
   * `withheld` says why the client's own rules are not in force (`policy` then refuses everyone):
   * its refusals are counted as `policy_not_allowed`.
   */
  async setPolicy(policy: VisitorPolicy, withheld?: string): Promise<void> {
    const { http: asked, ...rest } = policy;
    const http = this.host !== undefined && !this.passthrough
      ? keepPrefix(asked, this.#httpPolicy?.pathPrefix)
      : undefined;
    const change = ++this.#changes;
    if (JSON.stringify(http) !== JSON.stringify(this.#httpPolicy)) {
      // The gate's code loads with the first HTTP rules, as at expose.
      const gate = http && new (await import("../http/http_gate.ts")).HttpGate(http);
      // A later change settled while this one waited for the code: the later one stands.
      if (change !== this.#changes) return;
      this.#httpPolicy = http;
      this.#httpGate = gate;
    }
    this.#withheld = withheld;
    this.#gate.update(http ? { ...rest, http } : rest);
    this.onPolicy?.();
  }

  /**
   * Checks one visitor (or one HTTP request) from `remote` against the policy: admitted with what
   * to call when it is over, or refused (counted) and why.
   */
  enter(remote: string): Entry {
    let entry = this.#gate.enter(remote);
    if (!entry.ok) {
      if (this.#withheld !== undefined) entry = { ok: false, reason: "policy_not_allowed" };
      this.#limit?.refused(entry.reason, { tunnel: this.id, visitor: remote });
    }
    return entry;
  }

  /** Whether it takes visitors: open, and its client's service healthy. */
  override get healthy(): boolean {
    return this.reportedHealthy && super.healthy;
  }

  /**
   * A visitor its policy refuses, or past its own cap or its client's, is refused at once, and
   * counted.
   */
  protected override admit(remote: string): (() => void) | undefined {
    const entry = this.enter(remote);
    if (!entry.ok) return undefined;
    const limit = this.#limit;
    if (!limit) return entry.leave;
    if (this.stats.active >= limit.perTunnel()) {
      entry.leave();
      limit.refused("tunnel_visitor_limit");
      return undefined;
    }
    if (!limit.client.take()) {
      entry.leave();
      limit.refused("client_visitor_limit");
      return undefined;
    }
    return () => {
      entry.leave();
      limit.client.give();
    };
  }

  /**
   * The tunnel's bandwidth and its client's, each way, when either is set (else nothing per
   * chunk): a chunk spends from both, and the longer hold wins.
   */
  protected override throttle(): { aToB?: SpliceThrottle; bToA?: SpliceThrottle } | undefined {
    const client = this.#limit?.client;
    const aToB = both(this.#gate.throttle("in"), client?.throttle("in"));
    const bToA = both(this.#gate.throttle("out"), client?.throttle("out"));
    return aToB || bToA ? { aToB, bToA } : undefined;
  }

  /**
   * A relayed HTTP tunnel's stream carries every request of one visitor connection of another
   * node (kept alive, up to its request limit): its bytes meet the tunnel's and client's buckets
   * as they are at each chunk, so a rule put in force meanwhile holds it from its next chunk, as
   * this node's HTTP front asks at each request. Any other relayed visitor is one connection.
   */
  protected override relayThrottle(): { aToB?: SpliceThrottle; bToA?: SpliceThrottle } | undefined {
    if (this.host === undefined || this.passthrough) return this.throttle();
    return { aToB: this.liveThrottle("in"), bToA: this.liveThrottle("out") };
  }

  /**
   * The tunnel's and its client's bandwidth one way (`in`: visitor → service), as they are at
   * each chunk: looked up again only when a limit of either was set or lifted, so a chunk costs
   * nothing while no rule changes, and nothing is spent while there is none.
   */
  liveThrottle(direction: "in" | "out"): LiveThrottle {
    const client = this.#limit?.client;
    return new LiveThrottle(
      () => both(this.#gate.throttle(direction), client?.throttle(direction)),
      // Both only grow: their sum moves whenever either does.
      () => this.#gate.bandwidthGeneration + (client?.bandwidthGeneration ?? 0),
    );
  }

  /** The same throttles for the HTTP front's requests (`in`) and responses (`out`). */
  bandwidth(): { in?: SpliceThrottle; out?: SpliceThrottle } | undefined {
    const both = this.throttle();
    return both && { in: both.aToB, out: both.bToA };
  }

  /**
   * A visitor that another node of the cluster took on this tunnel's port and relays here as
   * `stream` (its `remote` and `local` addresses as that node saw them; `rest`: bytes read with
   * the stream's header). It goes on to the client like a visitor of our own port.
   */
  override relayed(stream: Stream, remote: string, local: string, rest: Uint8Array): void {
    super.relayed(stream, remote, local, rest);
  }
}

/** `http` with the path prefix `prefix` (none when undefined); undefined when it is left empty. */
function keepPrefix(
  http: HttpPolicy | undefined,
  prefix: string | undefined,
): HttpPolicy | undefined {
  const { pathPrefix: _asked, ...rest } = http ?? {};
  const out: HttpPolicy = prefix === undefined ? rest : { ...rest, pathPrefix: prefix };
  return Object.keys(out).length > 0 ? out : undefined;
}

/** One throttle spending from `a` and `b` together (the longer hold), or whichever is set. */
function both(
  a: SpliceThrottle | undefined,
  b: SpliceThrottle | undefined,
): SpliceThrottle | undefined {
  if (!a || !b) return a ?? b;
  return { spend: (n) => Math.max(a.spend(n), b.spend(n)) };
}
