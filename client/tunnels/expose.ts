/**
 * Reverse tunnels as the client holds them: what a script asked for ({@linkcode ExposeOptions}),
 * the record that follows the tunnel across reconnects (its id and port change with each
 * session's answer), the request that asks the daemon for it, and the {@linkcode Tunnel} view a
 * script gets.
 *
 * @module
 */

import type { DaemonMessage } from "../../tunnel/control/control.ts";
import { parseHostPort } from "../../util/net/address.ts";
import type { HealthMonitor, HealthOptions } from "./health_check.ts";
import { parseVisitorPolicy, type VisitorPolicy } from "../../tunnel/policy/visitor_policy.ts";
import type { ControlRequest } from "../connect/requests.ts";
import { newUdpCounters, type UdpCounters } from "../../tunnel/udp/udp_flow.ts";
import { currentRuntime } from "../../util/host/runtime.ts";

/** What `Client.expose` asks for. */
export interface ExposeOptions {
  /** Where visitors are sent on this side, `host:port`. */
  local: string;
  /** The daemon's port to listen on; 0 (default) lets the daemon pick an allowed one. */
  remotePort?: number;
  /**
   * `udp`: the daemon's port is a UDP port, and each visitor address there is a flow whose
   * datagrams reach UDP `local` from a socket of its own (docs/design/udp.md). Not with `http`,
   * `tls`, `proxyProtocol` or `health`. Default `tcp`.
   */
  protocol?: "tcp" | "udp";
  /** The daemon's address to bind; default 127.0.0.1 on the daemon. */
  bindHost?: string;
  /** A name shown to operators. */
  label?: string;
  /** Send a PROXY protocol header to `local` first, so it sees the visitor's real address. */
  proxyProtocol?: "v1" | "v2";
  /**
   * An HTTP tunnel instead of a port: the host name to hold on the daemon's HTTP port (a label
   * under its base domain, e.g. `myapp` for `myapp.tunnels.example.com`, or a full name the
   * client may hold). Each request whose `Host` is that name reaches `local`. The tunnel's
   * `remoteHost` is the full name and `remotePort` the daemon's HTTP port.
   */
  http?: string;
  /**
   * A TLS tunnel instead of a port: the host name to hold on the daemon's HTTPS port (named as
   * for `http`). Each connection whose TLS server name (SNI) is that name reaches `local` as it
   * came, never decrypted by the daemon: `local` speaks TLS with its own certificate.
   */
  tls?: string;
  /**
   * Serve the tunnel as a member of this group (with `groupKey`): every member's session is a
   * route of one public port, and visitors are balanced across the members. The client's token
   * must allow the group. With `remotePort` 0 a member joins the port the group already holds
   * (TCP only: a UDP member names its port; each new UDP flow stays on the member it is given).
   */
  group?: string;
  /** The group's key (a secret the daemon's config holds the hash of). */
  groupKey?: string;
  /**
   * Let other sessions of this client serve the same port too (high availability: the same
   * client connected to several nodes), instead of the port being refused to them.
   */
  shared?: boolean;
  /**
   * Check `local` now and then (TCP connect, or HTTP GET): while it fails, the daemon sends this
   * tunnel's visitors to its other routes (a group's other members, the client's other
   * sessions) instead. Default: no check.
   */
  health?: HealthOptions;
  /**
   * Who may visit and how much: visitor IP allow and deny lists, connection rates and counts per
   * visitor address, bandwidth, and for an HTTP tunnel its `http` rules: basic auth (users with
   * `scrypt:` hashes: see `hashPassword`), a bearer JWT, OIDC login, header rules, `hostRewrite`
   * (`docs/policy.md`). The daemon narrows it by the operator's rules for this client (never
   * widens it), enforces the result, and refuses the tunnel rather than ignore a rule it cannot
   * enforce. Default: the operator's rules.
   */
  policy?: VisitorPolicy;
}

/** A reverse tunnel held by the client. Its remote port stays the same across reconnects when it can. */
export interface Tunnel {
  /** The daemon's id for it (a new one after each reconnect). */
  readonly id: string;
  /** Where the daemon listens. */
  readonly remoteHost: string;
  /** The daemon's port. */
  readonly remotePort: number;
  /**
   * An HTTP or TLS tunnel's address for visitors, as the daemon gives it (`https://NAME.DOMAIN/`
   * where it has TLS for the name, else `http://NAME.DOMAIN:PORT/`); undefined for a port's tunnel.
   */
  readonly url: string | undefined;
  /** Where visitors go on this side. */
  readonly local: string;
  /** `udp` for a UDP tunnel; `tcp` for any other (HTTP and TLS tunnels too). */
  readonly protocol: "tcp" | "udp";
  /** A UDP tunnel's flows, datagrams and drops on this side (live); undefined for any other. */
  readonly udp: Readonly<UdpCounters> | undefined;
  /** Closes the tunnel on the daemon and forgets it. */
  close(): Promise<void>;
  /**
   * Replaces its visitor policy without closing it: visitors connected stay, the next ones meet
   * the new rules (kept for reconnects too). Rejects if the daemon refuses the rules.
   */
  setPolicy(policy: VisitorPolicy): Promise<void>;
}

/** A tunnel the client holds, as the current session's daemon knows it. */
export interface TunnelRecord {
  /** What the script asked for. */
  request: ExposeOptions;
  /** The daemon's id; empty until the daemon first exposed it. */
  id: string;
  /** Where the daemon listens, from its last answer. */
  remoteHost: string;
  /** The daemon's port, from its last answer (asked for again after a reconnect). */
  remotePort: number;
  /** An HTTP or TLS tunnel's address, from the daemon's reply. */
  url?: string;
  /** Closed by the script or by the daemon: never exposed again. */
  closed: boolean;
  /** Registered with keep(): exposed whenever a session is ready, even if it never was yet. */
  kept?: boolean;
  /** The health check of its local service, when asked for. */
  monitor?: HealthMonitor;
  /** A UDP tunnel's counters on this side, across reconnects. */
  udp?: UdpCounters;
}

/** A tunnel's record before it is exposed; a bad local address fails here, not at a visitor. */
export function newTunnelRecord(options: ExposeOptions, kept: boolean): TunnelRecord {
  parseHostPort(options.local);
  const protocol = options.protocol ?? "tcp";
  if (protocol !== "tcp" && protocol !== "udp") {
    throw new TypeError(`protocol must be "tcp" or "udp", not ${JSON.stringify(protocol)}`);
  }
  if (protocol === "udp") {
    const wrong = (["http", "tls", "proxyProtocol", "health"] as const)
      .filter((key) => options[key] !== undefined);
    if (wrong.length > 0) throw new TypeError(`a UDP tunnel takes no ${wrong.join(", ")}`);
    // Said now, not at its first visitor's flow: the flows need a UDP socket here.
    if (currentRuntime() === "node") {
      throw new TypeError(
        "a UDP tunnel needs the client on Deno or Bun (Node has no UDP adapter yet)",
      );
    }
  }
  const request = options.policy === undefined
    ? options
    : { ...options, policy: checkedPolicy(options.policy) };
  const record: TunnelRecord = {
    request,
    id: "",
    remoteHost: "",
    remotePort: 0,
    closed: false,
    kept,
  };
  if (protocol === "udp") record.udp = newUdpCounters();
  return record;
}

/** `policy` checked and in canonical form; a bad one throws a TypeError naming its field. */
export function checkedPolicy(policy: unknown): VisitorPolicy {
  const parsed = parseVisitorPolicy(policy, "policy");
  if (!parsed.ok) throw new TypeError(`bad visitor policy: ${parsed.error}`);
  return parsed.policy;
}

/** The `expose` request for `options`, asking for `port` (0: any the daemon allows). */
export function exposeRequest(options: ExposeOptions, port: number): ControlRequest {
  const { bindHost, label, group, groupKey, shared, http, tls, policy } = options;
  const name = tls ?? http;
  return {
    type: "expose",
    // An HTTP or TLS tunnel holds a name on the daemon's shared ports, never a port of its own.
    port: name === undefined ? port : 0,
    bindHost,
    label,
    group,
    groupKey,
    shared,
    http: name,
    passthrough: tls === undefined ? undefined : true,
    // Only when UDP: a daemon without UDP tunnels refuses the field rather than open a TCP port.
    ...(options.protocol === "udp" ? { protocol: "udp" as const } : {}),
    // No rules of its own: left out, so a daemon without visitor policies still understands it.
    ...(policy && Object.keys(policy).length > 0 ? { policy } : {}),
  };
}

/** Takes the daemon's `exposed` answer into `record`; false for any other answer. */
export function recordExposed(record: TunnelRecord, reply: DaemonMessage): boolean {
  if (reply.type !== "exposed") return false;
  record.id = reply.tunnel;
  record.remoteHost = reply.bindHost;
  record.remotePort = reply.port;
  record.url = reply.url;
  return true;
}

/** The tunnel the daemon knows as `id` (ids change on reconnects, so a scan; no copy per visitor). */
export function tunnelById(
  tunnels: Iterable<TunnelRecord>,
  id: string,
): TunnelRecord | undefined {
  for (const record of tunnels) if (record.id === id) return record;
  return undefined;
}

/**
 * The script's view of `record`, live: it reads the record, so it follows reconnects. Its
 * `close()` marks the record closed and stops its health check once, then calls `forget`
 * (which drops the record and tells the daemon); its `setPolicy` checks the rules and hands them
 * to `setPolicy`.
 */
export function tunnelView(
  record: TunnelRecord,
  forget: () => Promise<void>,
  setPolicy: (policy: VisitorPolicy) => Promise<void>,
): Tunnel {
  return {
    get id() {
      return record.id;
    },
    get remoteHost() {
      return record.remoteHost;
    },
    get remotePort() {
      return record.remotePort;
    },
    get url() {
      if (record.request.http === undefined && record.request.tls === undefined) return undefined;
      if (record.remoteHost === "") return undefined;
      if (record.url !== undefined) return record.url;
      // A daemon that does not say (an older one): its HTTP port.
      const port = record.remotePort === 80 ? "" : `:${record.remotePort}`;
      return `http://${record.remoteHost}${port}/`;
    },
    local: record.request.local,
    protocol: record.udp ? "udp" : "tcp",
    udp: record.udp,
    close: async () => {
      if (record.closed) return;
      record.closed = true;
      record.monitor?.stop();
      await forget();
    },
    setPolicy: (policy) => setPolicy(checkedPolicy(policy)),
  };
}
