/**
 * Daemon-wide endpoints: liveness and readiness probes, `/v1/info`, and `POST /v1/drain`.
 *
 * @module
 */

import { Hono } from "hono";
import { ApiError, errorResponse } from "./errors.ts";
import { drainRequest } from "./params.ts";
import type { SystemApiDeps } from "./deps.ts";
import { runtimeVersion } from "../../../util/host/runtime.ts";
import { VERSION } from "../../../util/host/version.ts";

/** What `/v1/info` reports about the admin listener itself. */
export interface InfoOptions {
  /** The admin listener's address, `host:port`. */
  admin: string;
}

/** `/healthz`, `/readyz`, `/v1/info` and `/v1/drain`. */
export function systemApi(deps: SystemApiDeps, options: InfoOptions): Hono {
  const app = new Hono();

  // Liveness: the process answers, whatever the lifecycle state.
  app.get("/healthz", (c) => c.json({ status: "ok" }));

  // Readiness: only a running daemon takes new sessions; a draining one must leave the pool.
  app.get("/readyz", (c) => {
    if (deps.state === "running") return c.json({ status: "ready" });
    return errorResponse(c, 503, "not_ready", `the daemon is ${deps.state}`);
  });

  app.get("/v1/info", (c) => {
    const { config, registry } = deps;
    const tunnels = registry.tunnels();
    const sessions = registry.sessions();
    return c.json({
      version: VERSION,
      runtime: runtimeVersion(),
      state: deps.state,
      startedAt: new Date(deps.startedAt).toISOString(),
      uptimeMs: Date.now() - deps.startedAt,
      listeners: { ...deps.addresses, admin: options.admin },
      tls: config.tls !== null,
      limits: config.limits,
      shutdownGraceMs: config.shutdownGraceMs,
      // Names and counts only: tokenHash and the rules themselves stay out of the API.
      clients: config.clients.map((client) => ({
        name: client.name,
        forwardRules: client.forward.length,
        exposePortRanges: client.expose.ports.length,
        servicesOffered: client.services.offer.length,
        servicesUsed: client.services.use.length,
        sessions: sessions.filter((s) => s.client === client.name).length,
        tunnels: tunnels.filter((t) => t.client === client.name).length,
      })),
      counts: {
        mintedTokens: registry.tokens.list().length,
        sessions: sessions.length,
        tunnels: tunnels.length,
        services: registry.services().length,
      },
    });
  });

  app.post("/v1/drain", async (c) => {
    const text = await c.req.text();
    let body: unknown;
    if (text.trim() !== "") {
      try {
        body = JSON.parse(text);
      } catch {
        throw new ApiError(400, "bad_request", "the body is not valid JSON");
      }
    }
    const { graceMs } = drainRequest(body);
    if (deps.state !== "running") {
      throw new ApiError(409, "conflict", `the daemon is already ${deps.state}`);
    }
    // Not awaited: the drain lasts up to the grace period, and /readyz reports it meanwhile.
    const effective = graceMs ?? deps.config.shutdownGraceMs;
    void deps.drain(effective);
    return c.json({ state: deps.state, graceMs: effective }, 202);
  });

  return app;
}
