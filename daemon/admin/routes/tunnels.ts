/**
 * Reverse tunnel and named service routes: list them, and close a tunnel.
 *
 * @module
 */

import { Hono } from "hono";
import type { Daemon } from "../../daemon.ts";
import { ApiError } from "../errors.ts";
import { tunnelId } from "../params.ts";
import { serviceView, tunnelView } from "../views.ts";

/** `/v1/tunnels` and below. */
export function tunnelRoutes(daemon: Daemon): Hono {
  const app = new Hono();

  app.get("/v1/tunnels", (c) => {
    const { registry } = daemon;
    const tunnels = registry.tunnels().sort((a, b) => a.createdAt - b.createdAt);
    return c.json({
      tunnels: tunnels.map((t) => tunnelView(t, registry.tunnelOwner(t.id)?.id ?? null)),
      services: registry.services().map(serviceView),
    });
  });

  // The owning session closes it (so its bookkeeping and events stay right) and tells the
  // client with `tunnel_closed`.
  app.delete("/v1/tunnels/:id", (c) => {
    const id = tunnelId(c.req.param("id"));
    const tunnel = daemon.registry.tunnel(id);
    if (!tunnel) throw new ApiError(404, "not_found", `no tunnel ${id}`);
    if (!daemon.registry.tunnelOwner(id)?.closeTunnel(id, "closed by an operator")) {
      tunnel.close(); // orphaned: no session claims it any more; at least stop it listening
      daemon.registry.removeTunnel(id);
    }
    return c.body(null, 204);
  });

  return app;
}
