/**
 * The `expose` and `unexpose` control requests. Every `expose` is first checked for what any
 * tunnel needs (the daemon is not draining, the client is under its tunnel limit); a request
 * naming `http` then becomes a tunnel by host name (`expose_http.ts`), any other a port tunnel
 * (TCP, or with `protocol: "udp"` a UDP port whose visitors are flows, `udp_tunnel.ts`):
 * the client's permission for the address and port, the group it joins, a port claimed in the
 * registry and bound (`openTunnel`). `unexpose` takes one of the session's tunnels down.
 *
 * @module
 */

import type { Session } from "../../protocol/session.ts";
import type { ClientMessage } from "../../tunnel/control/control.ts";
import { formatHostPort } from "../../util/net/address.ts";
import type { ClientConfig, Config } from "../config/mod.ts";
import { canExpose } from "../policy/policy.ts";
import { openTunnel } from "../tunnels/open_tunnel.ts";
import type { TunnelPorts } from "../tunnels/tunnel_ports.ts";
import type { Answer } from "./answer.ts";
import { exposeHttp, type ExposeHttpContext, type ExposeMessage } from "./expose_http.ts";
import { joinGroup } from "./join_group.ts";
import { checkIdentityProviders } from "../policy/identity_providers.ts";
import { narrowVisitorPolicy, type VisitorPolicy } from "../../tunnel/policy/visitor_policy.ts";
import type { SessionTunnels } from "./session_tunnels.ts";
import type { UdpCounters } from "../../tunnel/udp/udp_flow.ts";

export type { ExposeMessage };

/** A `policy` request: new rules for one of the session's tunnels. */
export type PolicyMessage = Extract<ClientMessage, { type: "policy" }>;

/** An `unexpose` request. */
export type UnexposeMessage = Extract<ClientMessage, { type: "unexpose" }>;

/**
 * How long an `unexpose` answer waits for the registry to release the port (in a cluster, a NATS
 * write; it gives up quietly when NATS is away, after its own timeout).
 */
const RELEASE_WAIT_MS = 2_000;

/** What `expose` and `unexpose` need from the session and the daemon. */
export interface ExposeContext extends ExposeHttpContext {
  /** The client's yamux session, which visitors are sent through. */
  readonly yamux: Session;
  /** This node's port listeners. */
  readonly ports: TunnelPorts;
  /** The session's tunnels. */
  readonly tunnels: Pick<SessionTunnels, "add" | "get" | "remove" | "hostClaim" | "portClaim">;
  /** The configuration in force now: groups, the cluster's tunnel address, the base domain. */
  config(): Pick<Config, "groups" | "cluster" | "http" | "limits" | "identityProviders">;
  /** True while the daemon drains: no new tunnels. */
  draining(): boolean;
  /** The daemon's totals of closed UDP tunnels, which each UDP tunnel adds to as it closes. */
  readonly udpTotals?: UdpCounters;
}

/**
 * Opens the tunnel `message` asks `client` for and answers `exposed`, or refuses it:
 * `shutting_down`, `limit_reached`, `not_allowed`, `port_in_use`, `conflict` or `unavailable`.
 */
export async function expose(
  context: ExposeContext,
  client: ClientConfig,
  message: ExposeMessage,
  answer: Answer,
): Promise<void> {
  if (context.draining()) return answer.fail("shutting_down", "the daemon is draining");
  const owned = context.registry.tunnels().filter((t) => t.client === client.name).length;
  if (owned >= client.limits.tunnels) {
    return answer.fail("limit_reached", `tunnel limit ${client.limits.tunnels} reached`);
  }
  // The rules the operator set for this client, narrowed by the client's own: never wider.
  const requested = message.policy ?? {};
  const narrowed = narrowVisitorPolicy(client.visitors, requested);
  if (!narrowed.ok) return answer.fail("not_allowed", narrowed.error);
  const fetched = checkIdentityProviders(
    client.visitors,
    requested,
    context.config().identityProviders ?? [],
  );
  if (fetched) return answer.fail("not_allowed", fetched);
  const policy = { policy: narrowed.policy, requestedPolicy: requested };
  const udp = message.protocol === "udp";
  if (udp && message.http !== undefined) {
    return answer.fail("not_allowed", "an HTTP or TLS tunnel cannot be UDP");
  }
  if (message.http !== undefined) {
    return await exposeHttp(context, client, message, message.http, answer, policy);
  }
  if (requested.http !== undefined) {
    return answer.fail("not_allowed", "policy.http: only an HTTP tunnel takes HTTP rules");
  }
  // The operator's HTTP rules concern its HTTP tunnels; a port's visitors meet the rest.
  if (policy.policy.http !== undefined) {
    const { http: _http, ...rest } = policy.policy;
    policy.policy = rest;
  }
  const bindHost = message.bindHost ?? "127.0.0.1";
  const decision = canExpose(client, bindHost, message.port);
  if (!decision.ok) return answer.fail("not_allowed", decision.message);
  // A group's tunnel: the client's token must allow the group, and the client must hold the
  // group's key. Then every member's session is a route of one port.
  const joined = joinGroup(client, context.config().groups, message.group, message.groupKey);
  if (typeof joined === "string") return answer.fail("not_allowed", joined);
  // A UDP port has no owner's port to join by number: each member names the group's port.
  if (udp && message.group !== undefined && message.port === 0) {
    return answer.fail("not_allowed", "a group's UDP tunnel needs its port named (not 0)");
  }
  const limits = context.config().limits;
  const { owner, balance } = joined;
  const shared = message.group !== undefined || message.shared === true;
  // In a cluster whose nodes share a machine, each binds its own address (tunnelHost).
  const listenHost = context.config().cluster?.tunnelHost ?? bindHost;
  const opened = await openTunnel(client, listenHost, message.port, {
    client: client.name,
    session: context.yamux,
    sessionId: context.sessionId,
    label: message.label,
    log: context.log,
    registry: context.registry,
    ports: context.ports,
    owner,
    shared,
    balance,
    visitorLimit: context.visitorLimit(client.name),
    ...policy,
    ...(udp
      ? {
        udp: {
          idleMs: limits.udpFlowIdleMs,
          maxFlows: limits.udpFlowsPerTunnel,
          totals: context.udpTotals,
        },
      }
      : {}),
  });
  if (!opened.ok) return answer.fail(opened.code, opened.message);
  const tunnel = opened.tunnel;
  // The session may have ended while the port was being bound.
  if (context.ended()) {
    tunnel.close();
    context.ports.detach(tunnel);
    return void context.registry.releasePort(context.tunnels.portClaim(tunnel));
  }
  context.tunnels.add(tunnel, formatHostPort(tunnel.bindHost, tunnel.port));
  answer.send({
    type: "exposed",
    id: message.id,
    tunnel: tunnel.id,
    bindHost: tunnel.bindHost,
    port: tunnel.port,
  });
}

/**
 * Takes down the session's tunnel that `message` names and answers `ok` once its port (or name)
 * is released, or after two seconds at most; `not_found` if the session holds no such tunnel.
 */
export async function unexpose(
  context: Pick<ExposeContext, "tunnels">,
  message: UnexposeMessage,
  answer: Answer,
): Promise<void> {
  const tunnel = context.tunnels.get(message.tunnel);
  if (!tunnel) return answer.fail("not_found", `no tunnel ${message.tunnel} in this session`);
  // Answered once the port (or name) is released in the registry, so a client that closes a
  // tunnel and exposes the port again, here or on another node, finds it free; in a cluster with
  // NATS away, after at most RELEASE_WAIT_MS (the release is retried then).
  const released = context.tunnels.remove(tunnel);
  let timer: ReturnType<typeof setTimeout> | undefined;
  await Promise.race([
    released,
    new Promise<void>((resolve) => timer = setTimeout(resolve, RELEASE_WAIT_MS)),
  ]);
  clearTimeout(timer);
  answer.send({ type: "ok", id: message.id });
}

/**
 * Puts the rules `message` carries in force on one of the session's tunnels, narrowed by the
 * operator's as at `expose`, without closing it; answers `ok`, `not_found` or `not_allowed`.
 */
export async function setPolicy(
  context: Pick<ExposeContext, "tunnels" | "config">,
  client: ClientConfig,
  message: PolicyMessage,
  answer: Answer,
): Promise<void> {
  const tunnel = context.tunnels.get(message.tunnel);
  if (!tunnel) return answer.fail("not_found", `no tunnel ${message.tunnel} in this session`);
  const http = tunnel.host !== undefined && !tunnel.passthrough;
  if (!http && message.policy.http !== undefined) {
    return answer.fail("not_allowed", "policy.http: only an HTTP tunnel takes HTTP rules");
  }
  const narrowed = narrowVisitorPolicy(client.visitors, message.policy);
  if (!narrowed.ok) return answer.fail("not_allowed", narrowed.error);
  // The registry holds the tunnel by its name and path: another path is another tunnel.
  if (http && narrowed.policy.http?.pathPrefix !== tunnel.httpPolicy?.pathPrefix) {
    return answer.fail(
      "not_allowed",
      "policy.http.pathPrefix: a tunnel's path is set when it is exposed; expose another tunnel",
    );
  }
  const fetched = checkIdentityProviders(
    client.visitors,
    message.policy,
    context.config().identityProviders ?? [],
  );
  if (fetched) return answer.fail("not_allowed", fetched);
  tunnel.requestedPolicy = message.policy;
  // Answered once the new rules are in force here: the client's next request meets them.
  await tunnel.setPolicy(narrowed.policy);
  answer.send({ type: "ok", id: message.id });
}

/**
 * The policy in force for a tunnel whose client asked for `requested` under the operator's
 * `operator` rules and `identityProviders` (a reload), and, when the operator no longer allows
 * what the client asked for, why (`withheld`). Then nobody may visit until the client asks for
 * rules that are allowed: never wider than the operator's, and no URL fetched that the operator
 * no longer lists (the client's own JWT or OIDC rule is dropped with the rest of its rules).
 */
export function renarrow(
  operator: VisitorPolicy,
  requested: VisitorPolicy,
  identityProviders: readonly string[],
): { policy: VisitorPolicy; withheld?: string } {
  const narrowed = narrowVisitorPolicy(operator, requested);
  const withheld = narrowed.ok
    ? checkIdentityProviders(operator, requested, identityProviders)
    : narrowed.error;
  if (narrowed.ok && withheld === undefined) return { policy: narrowed.policy };
  const { allow: _allow, ...rest } = operator;
  return { policy: { ...rest, deny: ["0.0.0.0/0", "::/0"] }, withheld };
}
