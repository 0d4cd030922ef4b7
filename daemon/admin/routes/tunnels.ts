/**
 * Reverse tunnel and named service routes: list them, and close a tunnel.
 *
 * @module
 */

import { Hono } from "hono";
import type { Daemon } from "../../daemon.ts";
import { ApiError } from "../errors.ts";
import { tunnelId } from "../params.ts";
import { serviceView } from "../views.ts";
import {
  closeLocalTunnel,
  closeRemoteTunnel,
  clusterListing,
  scopeOf,
  tunnelList,
} from "./cluster.ts";

/** `/v1/tunnels` and below. */
export function tunnelRoutes(daemon: Daemon): Hono {
  const app = new Hono();

  // `?scope=cluster`: every node's tunnels, each with its node, and the nodes that did not answer.
  app.get("/v1/tunnels", async (c) => {
    const cluster = scopeOf(c, daemon);
    const services = daemon.registry.services().map(serviceView);
    if (cluster) {
      const { items, missing } = await clusterListing(cluster, "tunnels");
      return c.json({ tunnels: items, services, missing });
    }
    return c.json({ tunnels: tunnelList(daemon), services });
  });

  // The owning session closes it (so its bookkeeping and events stay right) and tells the
  // client with `tunnel_closed`. In a cluster, a tunnel held on another node is closed there.
  app.delete("/v1/tunnels/:id", async (c) => {
    const id = tunnelId(c.req.param("id"));
    if (closeLocalTunnel(daemon, id)) return c.body(null, 204);
    if (!daemon.cluster) throw new ApiError(404, "not_found", `no tunnel ${id}`);
    await closeRemoteTunnel(daemon.cluster, id);
    return c.body(null, 204);
  });

  return app;
}
