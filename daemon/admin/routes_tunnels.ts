/**
 * Reverse tunnel and named service routes: list them, and close a tunnel.
 *
 * @module
 */

import { Hono } from "hono";
import type { ClientSession } from "../client_session.ts";
import type { Daemon } from "../daemon.ts";
import { ApiError } from "./errors.ts";
import { tunnelId } from "./params.ts";
import { serviceView, tunnelView } from "./views.ts";

/** The session holding tunnel `id`; tunnels only know their client's name, not the session. */
function owner(daemon: Daemon, id: string): ClientSession | undefined {
  for (const session of daemon.sessions.values()) {
    for (const tunnel of session.tunnels()) if (tunnel.id === id) return session;
  }
  return undefined;
}

/** `/v1/tunnels` and below. */
export function tunnelRoutes(daemon: Daemon): Hono {
  const app = new Hono();

  app.get("/v1/tunnels", (c) => {
    const tunnels = [...daemon.tunnels.values()].sort((a, b) => a.createdAt - b.createdAt);
    return c.json({
      tunnels: tunnels.map((t) => tunnelView(t, owner(daemon, t.id)?.id ?? null)),
      services: daemon.services.list().sort((a, b) => a.name.localeCompare(b.name)).map(
        serviceView,
      ),
    });
  });

  // The owning session closes it (so its bookkeeping and events stay right) and tells the
  // client with `tunnel_closed`.
  app.delete("/v1/tunnels/:id", (c) => {
    const id = tunnelId(c.req.param("id"));
    const tunnel = daemon.tunnels.get(id);
    if (!tunnel) throw new ApiError(404, "not_found", `no tunnel ${id}`);
    const session = owner(daemon, id);
    if (!session?.closeTunnel(id, "closed by an operator")) {
      tunnel.close(); // orphaned: no session claims it any more; at least stop it listening
      daemon.tunnels.delete(id);
    }
    return c.body(null, 204);
  });

  return app;
}
