/**
 * The admin API as a hono app, the same on Deno and Bun (serving it is `start.ts`'s job).
 *
 * Every request passes, in this order: secure response headers (outermost, so even refusals get
 * them), the 405 check, the `Host` allowlist (421), the bearer token (401; not for the probes),
 * and the body limit (413, enforced while reading, so chunked bodies and Content-Length with
 * Transfer-Encoding are bounded too). The dashboard (`GET /` and its static files) sits between
 * the Host check and the token check. No CORS: browsers must not reach this API cross-origin.
 *
 * @module
 */

import { Hono } from "hono";
import { bodyLimit } from "hono/body-limit";
import { methodNotAllowed } from "hono/method-not-allowed";
import { secureHeaders } from "hono/secure-headers";
import type { AdminDeps } from "./api/deps.ts";
import type { Logger } from "../../util/log.ts";
import { errorResponse, onApiError, onNotFound } from "./api/errors.ts";
import { allowedHosts, bearerAuth, hostAllowlist } from "./guards.ts";
import { sessionsApi } from "./api/sessions.ts";
import { systemApi } from "./api/system.ts";
import { tunnelsApi } from "./api/tunnels.ts";
import { tokensApi } from "./api/tokens.ts";
import { metricsApi } from "./api/metrics.ts";
import { recentApi, type RecentHistory } from "./api/recent.ts";
import { eventsApi } from "./api/events.ts";
import { dashboardPages } from "./dashboard/pages.ts";
import { clusterApi } from "./api/cluster.ts";
import { openapiApi } from "./openapi.ts";
import { formatHostPort } from "../../util/net/address.ts";

/** Largest request body accepted; the biggest real one (a drain request) is a few bytes. */
export const MAX_BODY_BYTES = 8 * 1024;

/** How to build the admin app. */
export interface AdminAppOptions {
  /** The address the admin listener is bound to (its real port). */
  hostname: string;
  /** The bound port. */
  port: number;
  /** Further `Host` values to accept (a reverse proxy's name), with or without a port. */
  extraHosts?: readonly string[];
  /** Where unexpected errors are logged. */
  log: Logger;
  /** The admin token's hash; default: the daemon's `config.adminTokenHash`, read per request. */
  tokenHash?: () => string | null;
  /** The recent history `/v1/metrics/recent` serves (the admin server samples it); default none. */
  recent?: RecentHistory;
}

/** Builds the admin API for `daemon` (the daemon itself, or anything shaped like it). */
export function createAdminApp(daemon: AdminDeps, options: AdminAppOptions): Hono {
  const app = new Hono();
  const admin = formatHostPort(options.hostname, options.port);
  app.onError(onApiError(options.log));
  app.notFound(onNotFound);
  app.use(secureHeaders());
  app.use(methodNotAllowed({
    app,
    onMethodNotAllowed: (c, methods) =>
      errorResponse(c, 405, "method_not_allowed", `${c.req.method} is not allowed here`, {
        Allow: methods.join(", "),
      }),
  }));
  app.use(hostAllowlist(allowedHosts(options.hostname, options.port, options.extraHosts)));
  // The dashboard's page and static files: after the Host check, before the token check (hono
  // runs handlers in registration order, and these answer without calling next), because a
  // browser cannot send a bearer token for a page load. The page sends it on its API calls.
  app.route("/", dashboardPages());
  app.use(bearerAuth(options.tokenHash ?? (() => daemon.config.adminTokenHash)));
  app.use(bodyLimit({
    maxSize: MAX_BODY_BYTES,
    onError: (c) =>
      errorResponse(
        c,
        413,
        "payload_too_large",
        `request bodies are limited to ${MAX_BODY_BYTES} bytes`,
      ),
  }));
  app.route("/", systemApi(daemon, { admin }));
  app.route("/", sessionsApi(daemon));
  app.route("/", tunnelsApi(daemon));
  app.route("/", tokensApi(daemon));
  app.route("/", clusterApi(daemon));
  // Metrics and the event feed (their own modules), behind the same guards.
  app.route("/", metricsApi(daemon));
  app.route("/", recentApi(options.recent));
  app.route("/", eventsApi(daemon));
  app.route("/", openapiApi());
  return app;
}
