/**
 * The `health` control request: the client's health check of the local service behind one of its
 * tunnels, or behind a service it offers, changed. While unhealthy, that route takes no visitors
 * (another route of the same port or name does, if any). A change is logged, counted
 * (`route_healthy`, `route_unhealthy`), published (`route_health`) and recorded in the registry;
 * a report that changes nothing is only answered.
 *
 * @module
 */

import type { ClientMessage } from "../../tunnel/control/control.ts";
import type { Logger } from "../../util/log.ts";
import type { ClientConfig } from "../config/mod.ts";
import type { DaemonEventType } from "../events.ts";
import type { Registry } from "../registry/registry.ts";
import type { Answer } from "./answer.ts";
import type { SessionTunnels } from "./session_tunnels.ts";

/** A `health` request. */
export type HealthMessage = Extract<ClientMessage, { type: "health" }>;

/** What a health report needs from the session and the daemon. */
export interface HealthContext {
  /** The session's id: only its own offers are reported on. */
  readonly sessionId: string;
  /** Where route and offer health is recorded (read at each use). */
  readonly registry: Registry;
  /** The session's tunnels. */
  readonly tunnels: Pick<SessionTunnels, "get" | "portClaim">;
  /** The session's logger. */
  readonly log: Logger;
  /** Counts an event for metrics. */
  count(event: string): void;
  /** Publishes an event to the daemon's feed. */
  publish(type: DaemonEventType, fields: Record<string, string | number | undefined>): void;
}

/**
 * Records the health `message` reports for one of the session's tunnels or offers and answers
 * `ok`; `not_found` when the session holds no such tunnel or offer.
 */
export async function reportHealth(
  context: HealthContext,
  client: Pick<ClientConfig, "name">,
  message: HealthMessage,
  answer: Answer,
): Promise<void> {
  if (message.service !== undefined) {
    const name = message.service;
    const known = context.registry.services().find((o) =>
      o.name === name && o.session === context.sessionId
    );
    if (!known) return answer.fail("not_found", `this session does not offer ${name}`);
    if (known.healthy !== message.healthy) {
      context.log.info(message.healthy ? "offer healthy again" : "offer withdrawn: unhealthy", {
        service: name,
        detail: message.detail,
      });
      context.count(message.healthy ? "route_healthy" : "route_unhealthy");
      context.publish("route_health", {
        service: name,
        client: client.name,
        session: context.sessionId,
        healthy: message.healthy ? 1 : 0,
        detail: message.detail,
      });
      await context.registry.setServiceHealth(name, context.sessionId, message.healthy);
    }
    return answer.send({ type: "ok", id: message.id });
  }
  const tunnel = context.tunnels.get(message.tunnel ?? "");
  if (!tunnel) return answer.fail("not_found", `no tunnel ${message.tunnel} in this session`);
  if (tunnel.reportedHealthy !== message.healthy) {
    tunnel.reportedHealthy = message.healthy;
    context.log.info(message.healthy ? "route healthy again" : "route withdrawn: unhealthy", {
      tunnel: tunnel.id,
      detail: message.detail,
    });
    context.count(message.healthy ? "route_healthy" : "route_unhealthy");
    context.publish("route_health", {
      tunnel: tunnel.id,
      client: client.name,
      session: context.sessionId,
      healthy: message.healthy ? 1 : 0,
      detail: message.detail,
    });
    await context.registry.setRouteHealth(context.tunnels.portClaim(tunnel), message.healthy);
  }
  answer.send({ type: "ok", id: message.id });
}
