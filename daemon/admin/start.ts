/**
 * Starts the admin API for a daemon: binds the listener, then builds the app for the address it
 * got (the `Host` allowlist needs the real port when port 0 was asked for).
 *
 * @module
 */

import type { AdminDeps } from "./api/deps.ts";
import { formatHostPort, type HostPort } from "../../util/net/address.ts";
import type { Logger } from "../../util/log.ts";
import { createAdminApp } from "./app.ts";
import { daemonTotals, RECENT_SAMPLE_MS, RecentHistory } from "./api/recent.ts";
import { type FetchHandler, type HttpServer, serveHttp } from "../../transport/http/serve.ts";

/** A running admin API. */
export interface AdminServer extends HttpServer {
  /** Its base URL, e.g. `http://127.0.0.1:7081`. */
  readonly url: string;
  /** The daemon's recent history it samples while it runs (`/v1/metrics/recent`). */
  readonly recent: RecentHistory;
}

/** How to start the admin API. */
export interface StartAdminOptions {
  /** Where to listen. */
  address: HostPort;
  /** Where unexpected errors are logged. */
  log: Logger;
  /** Further `Host` values to accept. */
  extraHosts?: readonly string[];
}

/** Binds the admin listener and serves the admin app on it. */
export async function startAdmin(
  daemon: AdminDeps,
  options: StartAdminOptions,
): Promise<AdminServer> {
  // The app is built after binding; until then (no request can be handled before the listener
  // resolves in practice) the handler answers 503 rather than guess at the allowlist.
  let handler: FetchHandler = () =>
    Response.json({ error: { code: "not_ready", message: "starting" } }, { status: 503 });
  const server = await serveHttp(options.address, (request) => handler(request));
  // Sampled from now on, so that a dashboard opened later starts with the last minutes.
  const recent = new RecentHistory(() => daemonTotals(daemon));
  recent.sample();
  const sampler = setInterval(() => recent.sample(), RECENT_SAMPLE_MS);
  const app = createAdminApp(daemon, {
    hostname: server.hostname,
    port: server.port,
    extraHosts: options.extraHosts,
    log: options.log,
    recent,
  });
  handler = (request) => app.fetch(request);
  return {
    hostname: server.hostname,
    port: server.port,
    url: `http://${formatHostPort(server.hostname, server.port)}`,
    recent,
    close: () => {
      clearInterval(sampler);
      return server.close();
    },
  };
}
