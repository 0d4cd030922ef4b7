/**
 * The cluster in the admin API: `GET /v1/cluster` (nodes, their health and version, NATS, relay
 * sessions, cluster ports), and what lets the other endpoints reach across nodes: queries to the
 * other nodes (their sessions and tunnels, kicks and tunnel closes), asked over NATS
 * request/reply and signed with the cluster key. This node's own answers are
 * `cluster/answers.ts`'s.
 *
 * A query has a deadline; nodes that do not answer in time are named in `missing`, never silently
 * left out.
 *
 * @module
 */

import { Hono } from "hono";
import type { Context } from "hono";
import type { AdminCluster, ClusterApiDeps } from "./deps.ts";
import { ApiError } from "./errors.ts";
import { sessionId, tunnelId } from "./params.ts";

/** How long a cluster-wide admin query waits for the nodes' answers. */
export const QUERY_TIMEOUT_MS = 2_000;

/** `scope` of a listing: this node (default) or the whole cluster; 400 for anything else. */
export function scopeOf(c: Context, deps: ClusterApiDeps): AdminCluster | undefined {
  const scope = c.req.query("scope") ?? "node";
  if (scope !== "node" && scope !== "cluster") {
    throw new ApiError(400, "bad_request", `scope must be "node" or "cluster"`);
  }
  if (scope === "node") return undefined;
  if (!deps.cluster) throw new ApiError(400, "bad_request", "this daemon is not in a cluster");
  return deps.cluster;
}

/** `/v1/cluster`. */
export function clusterApi(deps: ClusterApiDeps): Hono {
  const app = new Hono();
  const cluster = deps.cluster;

  app.get("/v1/cluster", async (c) => {
    if (!cluster) return c.json({ cluster: null });
    const view = cluster.view();
    const [health, sessions] = await Promise.all([
      cluster.ask("health", null, { timeoutMs: QUERY_TIMEOUT_MS }),
      clusterListing(cluster, "sessions"),
    ]);
    const byNode = new Map(health.answers.map((a) => [a.node, a.data]));
    // Clients that asked for sessions on several nodes (--ha) and have fewer now.
    const wanted = new Map<string, { wanted: number; nodes: Set<string> }>();
    for (const s of sessions.items as { node: string; client: string | null; ha?: number }[]) {
      if (!s.client || (s.ha ?? 1) < 2) continue;
      const entry = wanted.get(s.client) ?? { wanted: 0, nodes: new Set<string>() };
      entry.wanted = Math.max(entry.wanted, s.ha!);
      entry.nodes.add(s.node);
      wanted.set(s.client, entry);
    }
    const degraded = [...wanted].filter(([, e]) => e.nodes.size < e.wanted).map((
      [client, e],
    ) => ({ client, wanted: e.wanted, nodes: [...e.nodes].sort() }));
    return c.json({
      cluster: {
        node: view.node,
        nats: view.nats,
        nodes: view.nodes.map((n) => ({
          node: n.node,
          advertise: n.advertise,
          version: n.version,
          startedAt: new Date(n.startedAt).toISOString(),
          lastHeartbeat: new Date(n.at).toISOString(),
          sessions: n.sessions,
          tunnels: n.tunnels,
          health: byNode.get(n.node) ?? null,
        })),
        missing: health.missing,
        degraded,
        peers: view.peers,
        relays: view.relays,
        ports: cluster.registry.claims(),
      },
    });
  });

  return app;
}

/** Lists `kind` (sessions or tunnels) of every node, each item with its `node`. */
export async function clusterListing(cluster: AdminCluster, kind: "sessions" | "tunnels") {
  const { answers, missing } = await cluster.ask(kind, null, { timeoutMs: QUERY_TIMEOUT_MS });
  const items = answers.sort((a, b) => a.node.localeCompare(b.node)).flatMap((a) =>
    Array.isArray(a.data) ? a.data.map((item: object) => ({ node: a.node, ...item })) : []
  );
  return { items, missing };
}

/** Kicks session `id` on node `node` (another node of the cluster). */
export async function kickRemote(cluster: AdminCluster, node: string, id: string): Promise<void> {
  const { answers } = await cluster.ask("kick", { id: sessionId(id) }, {
    node,
    timeoutMs: QUERY_TIMEOUT_MS,
  });
  if (answers.length === 0) {
    throw new ApiError(504, "node_unreachable", `node ${node} did not answer`);
  }
  if (!answers[0].data?.found) throw new ApiError(404, "not_found", `no session ${id} on ${node}`);
}

/** Closes tunnel `id` wherever in the cluster it is held; 404 naming silent nodes if nowhere. */
export async function closeRemoteTunnel(cluster: AdminCluster, id: string): Promise<void> {
  const { answers, missing } = await cluster.ask("close-tunnel", { id: tunnelId(id) }, {
    timeoutMs: QUERY_TIMEOUT_MS,
  });
  if (answers.some((a) => a.data?.found)) return;
  const silent = missing.length > 0 ? ` (no answer from ${missing.join(", ")})` : "";
  throw new ApiError(404, "not_found", `no tunnel ${id} in the cluster${silent}`);
}
