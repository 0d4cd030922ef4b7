/**
 * Binding a reverse tunnel's port: the one asked for, or, for port 0, a free one among the
 * client's allowed ports, tried from a random place in the list so clients do not pile up on the
 * lowest ports. Each port is claimed in the registry before it is bound (and the claim released
 * if binding fails), so that where the registry is shared no two daemons hold one port.
 *
 * @module
 */

import { randomHex, randomUint32 } from "../../util/crypto/random.ts";
import type { VisitorPolicy } from "../../tunnel/policy/visitor_policy.ts";
import type { Session } from "../../protocol/session.ts";
import type { ClientConfig } from "../config/mod.ts";
import type { Logger } from "../../util/log.ts";
import { allowedPorts } from "../policy/policy.ts";
import type { PortClaim, Registry } from "../registry/registry.ts";
import { ReverseTunnel } from "./reverse_tunnel.ts";
import type { Balance } from "./port_listener.ts";
import type { TunnelPorts } from "./tunnel_ports.ts";
import type { VisitorLimit } from "./visitor_limit.ts";
import { UdpTunnel, type UdpTunnelOptions } from "./udp_tunnel.ts";

/** Ports tried for a port-0 request before giving up. */
const MAX_ATTEMPTS = 64;

/** The result of {@linkcode openTunnel}. */
export type OpenTunnelResult =
  | { ok: true; tunnel: ReverseTunnel }
  | { ok: false; code: "port_in_use" | "not_allowed" | "unavailable"; message: string };

/** What {@linkcode openTunnel} needs besides the client's permissions. */
export interface OpenTunnelOptions {
  /** The client's name. */
  client: string;
  /** The client's yamux session, which visitors are sent through. */
  session: Session;
  /** That session's id. */
  sessionId: string;
  /** The client's label for the tunnel. */
  label?: string;
  /** Logger with the session's context. */
  log: Logger;
  /** Where ports are claimed. */
  registry: Registry;
  /** This node's port listeners. */
  ports: TunnelPorts;
  /** Who holds the port (`client:NAME` or `group:NAME`). Default `client:` and the client. */
  owner?: string;
  /** Whether other routes of the same owner may serve the port too (a group, or HA). */
  shared?: boolean;
  /** How a shared port spreads its visitors. */
  balance?: Balance;
  /** How many visitors the tunnel takes at once; default no limit. */
  visitorLimit?: VisitorLimit;
  /** Its visitor policy in force; default none. */
  policy?: VisitorPolicy;
  /** The policy the client asked for, kept to narrow again when the operator's changes. */
  requestedPolicy?: VisitorPolicy;
  /** A UDP tunnel (its port claimed apart from TCP's), with its flows' limits; default TCP. */
  udp?: Pick<UdpTunnelOptions, "idleMs" | "maxFlows" | "totals">;
}

/** A fresh tunnel id (`t-` and 12 hex digits), for port tunnels and HTTP tunnels alike. */
export function newTunnelId(): string {
  return `t-${randomHex(6)}`;
}

/**
 * Claims and binds a tunnel for `client` (whose permission for `bindHost:port` is already
 * checked). On success the port stays claimed for the tunnel; the caller releases it with the
 * tunnel.
 */
export async function openTunnel(
  client: ClientConfig,
  bindHost: string,
  port: number,
  options: OpenTunnelOptions,
): Promise<OpenTunnelResult> {
  const { registry, sessionId, ports, shared, balance, udp, ...listen } = options;
  const owner = options.owner ?? `client:${options.client}`;
  const id = newTunnelId();
  // A shared tunnel asking for any port joins the port its owner already holds, if any.
  const held = shared && port === 0 && !udp ? await registry.ownerPort(owner, bindHost) : undefined;
  // (If that port went to someone else meanwhile, the usual picks follow.)
  const candidates = port !== 0 ? [port] : [...(held !== undefined ? [held] : []), ...pick(client)];
  let lastError: Error | undefined;
  let joined = false;
  // The port its owner holds elsewhere in the cluster could not be bound on this node.
  let heldBusy = false;
  for (let i = 0; i < candidates.length; i++) {
    const candidate = candidates[i];
    const claim: PortClaim = {
      bindHost,
      port: candidate,
      tunnel: id,
      session: sessionId,
      client: options.client,
      node: registry.node,
      owner,
      shared: shared ?? false,
      ...(udp ? { protocol: "udp" as const } : {}),
      ...(options.policy ? { policy: options.policy } : {}),
    };
    const claimed = await registry.claimPort(claim);
    if (!claimed.ok) {
      if (claimed.reason === "unavailable") {
        return {
          ok: false,
          code: "unavailable",
          message:
            `cannot claim port ${candidate}: the cluster registry (NATS) cannot be reached; tunnels already open keep working`,
        };
      }
      // Another route of this owner took a port at the same instant: join it (once).
      if (claimed.join !== undefined && port === 0 && !joined) {
        joined = true;
        candidates.splice(i + 1, 0, claimed.join);
      }
      lastError = Object.assign(new Error(`port ${candidate} is held by another tunnel`), {
        code: "EADDRINUSE",
      });
      continue;
    }
    try {
      if (udp) {
        // One socket per port: a group's members (and relays) share it, each flow on one.
        const udpPort = await ports.openUdp(bindHost, candidate, { idleMs: udp.idleMs, balance });
        const tunnel = await UdpTunnel.open({
          ...listen,
          ...udp,
          id,
          bindHost,
          port: udpPort.port,
          owner,
          udpPort,
        });
        ports.attach(udpPort, tunnel);
        return { ok: true, tunnel };
      }
      const listener = await ports.open(bindHost, candidate, balance);
      const tunnel = new ReverseTunnel({ ...listen, id, bindHost, port: listener.port, owner });
      ports.attach(listener, tunnel);
      return { ok: true, tunnel };
    } catch (error) {
      await registry.releasePort(claim);
      lastError = error as Error;
      if (!inUse(lastError)) break;
      if (candidate === held) heldBusy = true;
    }
  }
  if (lastError && !inUse(lastError)) {
    return {
      ok: false,
      code: "not_allowed",
      message: `cannot listen on ${bindHost}: ${lastError.message}`,
    };
  }
  const tried = new Set(candidates).size;
  let message = port !== 0
    ? `port ${port} on ${bindHost} is in use`
    : `every port tried (${tried}) on ${bindHost} is in use`;
  if (heldBusy) {
    // Say first what the member came for: its owner's port, taken on this node by someone else.
    message =
      `port ${held} (held by ${owner} in the cluster) is in use on ${bindHost} on this node` +
      (tried > 1 ? `, and so is every other port tried (${tried - 1})` : "");
  }
  return { ok: false, code: "port_in_use", message };
}

function pick(client: ClientConfig): number[] {
  const start = randomUint32();
  const ports: number[] = [];
  for (const port of allowedPorts(client.expose, start)) {
    ports.push(port);
    if (ports.length === MAX_ATTEMPTS) break;
  }
  return ports;
}

/** Deno names the error class; Node and Bun set an errno code. */
function inUse(error: Error & { code?: string }): boolean {
  return error.name === "AddrInUse" || error.code === "EADDRINUSE";
}
