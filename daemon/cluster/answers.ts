/**
 * This node's answers to the other nodes' admin queries, asked over NATS request/reply through
 * {@linkcode Cluster.answer}: its sessions and tunnels, its health, and the actions an operator
 * on another node asks of it (kick a session, close a tunnel).
 *
 * Sessions and tunnels go out in the admin API's own shapes (`registry/views.ts`), which the
 * asking node's admin API passes on as they are: those shapes are the wire between nodes, which
 * may run different versions.
 *
 * `daemon/main.ts` wires these once the admin API is up: a node whose admin API is off answers
 * no queries, so the other nodes list it as `missing` and cannot act on it.
 *
 * @module
 */

import type { Registry } from "../registry/registry.ts";
import type { ServedCertificate } from "../tls/certificates.ts";
import { OPERATOR_CLOSE, sessionSummary, tunnelList } from "../registry/views.ts";
import type { Cluster } from "./cluster.ts";

/** What the answers read of this node and act on. */
export interface AnsweringNode {
  /** Its sessions and tunnels, listed, kicked and closed (read at each query). */
  readonly registry: Registry;
  /** Its lifecycle state (`running`, `draining`, …). */
  readonly state: string;
  /** When it started (ms since the epoch). */
  readonly startedAt: number;
  /** The certificates its HTTPS port terminates host names with (shown with the tunnels). */
  readonly certificates: { find(host: string): ServedCertificate | undefined };
}

/** The clients of `registry`'s sessions that asked for sessions on several nodes (`--ha`). */
export function haClients(registry: Registry): { client: string; wanted: number }[] {
  const wanted = new Map<string, number>();
  for (const session of registry.sessions()) {
    const client = session.client;
    const ha = session.ha ?? 1;
    if (client && ha >= 2) wanted.set(client, Math.max(ha, wanted.get(client) ?? 0));
  }
  return [...wanted].sort(([a], [b]) => a < b ? -1 : a > b ? 1 : 0).map(([client, n]) => ({
    client,
    wanted: n,
  }));
}

/** Answers the other nodes' admin queries about `node` through `cluster`, from now on. */
export function answerQueries(cluster: Pick<Cluster, "answer">, node: AnsweringNode): void {
  cluster.answer("sessions", () => node.registry.sessions().map(sessionSummary));
  cluster.answer("tunnels", () => tunnelList(node.registry, node.certificates));
  cluster.answer("health", () => ({
    state: node.state,
    uptimeSeconds: Math.round((Date.now() - node.startedAt) / 1000),
    sessions: node.registry.sessionCount,
    tunnels: node.registry.tunnels().length,
    // This node's --ha clients, so that `/v1/cluster` finds the degraded ones without asking
    // every node for every session.
    ha: haClients(node.registry),
  }));
  cluster.answer("kick", (data: { id?: unknown }) => {
    const session = typeof data?.id === "string" ? node.registry.session(data.id) : undefined;
    session?.close();
    return { found: session !== undefined };
  });
  cluster.answer("close-tunnel", (data: { id?: unknown }) => ({
    found: typeof data?.id === "string" && node.registry.closeTunnel(data.id, OPERATOR_CLOSE),
  }));
}
