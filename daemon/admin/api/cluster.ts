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
import { PAGE_DEFAULT, sessionId, tunnelId } from "./params.ts";

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
    const { limit, cursor } = clusterPage(c.req.query());
    const view = cluster.view();
    const health = await cluster.ask("health", null, { timeoutMs: QUERY_TIMEOUT_MS });
    const byNode = new Map(health.answers.map((a) => {
      const { ha: _, ...shown } = (a.data ?? {}) as Record<string, unknown>;
      return [a.node, a.data ? shown : a.data];
    }));
    // Clients that asked for sessions on several nodes (--ha) and have fewer now. Each node's
    // health answer names its own; a node of an older version does not, and only then is every
    // node's whole session list asked for (100 nodes of 1,000 sessions each is megabytes).
    const haOf = (data: unknown) => (data as { ha?: unknown } | null)?.ha;
    const summaries = health.answers.every((a) => Array.isArray(haOf(a.data)))
      ? health.answers.flatMap((a) =>
        (haOf(a.data) as Partial<HaSummary>[])
          .filter((h) => typeof h?.client === "string" && Number.isInteger(h.wanted))
          .map((h) => ({ node: a.node, client: h.client!, ha: h.wanted }))
      )
      : (await clusterListing(cluster, "sessions")).items as {
        node: string;
        client: string | null;
        ha?: number;
      }[];
    const wanted = new Map<string, { wanted: number; nodes: Set<string> }>();
    for (const s of summaries) {
      if (!s.client || (s.ha ?? 1) < 2) continue;
      const entry = wanted.get(s.client) ?? { wanted: 0, nodes: new Set<string>() };
      entry.wanted = Math.max(entry.wanted, s.ha!);
      entry.nodes.add(s.node);
      wanted.set(s.client, entry);
    }
    const degraded = [...wanted].filter(([, e]) => e.nodes.size < e.wanted).map((
      [client, e],
    ) => ({ client, wanted: e.wanted, nodes: [...e.nodes].sort() }));
    // Ports and relays can number 100,000: one page of each, walked in the same order (port,
    // node, tunnel) with one cursor, and their counts.
    const claims = cluster.registry.claims().sort(compareRoutes);
    const from = cursor === undefined ? 0 : claims.findIndex((r) => compareRoutes(r, cursor) > 0);
    const start = from < 0 ? claims.length : from;
    const ports = claims.slice(start, start + limit);
    const more = start + limit < claims.length;
    const last = more ? ports[ports.length - 1] : undefined;
    const inPage = (r: RouteKey) =>
      (cursor === undefined || compareRoutes(r, cursor) > 0) &&
      (last === undefined || compareRoutes(r, last) <= 0);
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
        counts: {
          nodes: view.nodes.length,
          ports: new Set(claims.map((r) => r.port)).size,
          routes: claims.length,
          relays: view.relays.length,
        },
        ports,
        relays: view.relays.filter(inPage).sort(compareRoutes),
        nextCursor: last ? cursorOf(last) : null,
      },
    });
  });

  return app;
}

/** A route or a relay, as ordered in `/v1/cluster`'s pages. */
interface RouteKey {
  readonly port: number;
  readonly node: string;
  readonly tunnel: string;
}

/** An `--ha` client of a node, in its health answer. */
export interface HaSummary {
  /** The client's name. */
  client: string;
  /** On how many nodes it asked for sessions. */
  wanted: number;
}

/** Orders routes and relays by port, then node, then tunnel. */
export function compareRoutes(a: RouteKey, b: RouteKey): number {
  return a.port - b.port || compareText(a.node, b.node) || compareText(a.tunnel, b.tunnel);
}

function compareText(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

/** A page's cursor: its last route, `PORT/NODE/TUNNEL`. */
export function cursorOf(route: RouteKey): string {
  return `${route.port}/${route.node}/${route.tunnel}`;
}

/** Largest `limit` of `/v1/cluster`'s pages. */
const CLUSTER_PAGE_MAX = 1000;

/**
 * Reads `limit` (1..1000, default 100) and `cursor` (`PORT/NODE/TUNNEL`, the last route of the
 * previous page) from `/v1/cluster`'s query; a 400 for anything else.
 */
export function clusterPage(
  query: Record<string, string | undefined>,
): { limit: number; cursor: RouteKey | undefined } {
  let limit = PAGE_DEFAULT;
  if (query.limit !== undefined) {
    limit = /^\d{1,4}$/.test(query.limit) ? Number(query.limit) : NaN;
    if (!(limit >= 1 && limit <= CLUSTER_PAGE_MAX)) {
      throw new ApiError(
        400,
        "bad_request",
        `limit must be an integer from 1 to ${CLUSTER_PAGE_MAX}`,
      );
    }
  }
  if (query.cursor === undefined) return { limit, cursor: undefined };
  const match = /^(\d{1,5})\/([A-Za-z0-9._-]{1,128})\/([A-Za-z0-9._-]{1,128})$/.exec(query.cursor);
  if (!match || Number(match[1]) > 65535) {
    throw new ApiError(400, "bad_request", "cursor is the nextCursor of the previous page");
  }
  return { limit, cursor: { port: Number(match[1]), node: match[2], tunnel: match[3] } };
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
