/**
 * Starts the request inspector: an {@linkcode Inspector} and its web app on an address of this
 * machine (127.0.0.1:4040 by default). Give the result to `connect()` as its `inspector`, and
 * every exchange of the client's HTTP tunnels is listed at its URL.
 *
 * The inspector shows requests, their headers and bodies, and replays them against the local
 * service, so it listens on a loopback address unless it has a token: an address other machines
 * can reach is refused without one.
 *
 * @example
 * ```ts ignore
 * import { connect } from "../client.ts";
 * import { startInspector } from "./start.ts";
 * const inspector = await startInspector();
 * const client = await connect("tcp://127.0.0.1:7000", { token: "…", inspector });
 * await client.expose({ http: "myapp", local: "127.0.0.1:3000" });
 * console.log(`requests at ${inspector.url}`);
 * ```
 *
 * @module
 */

import { formatHostPort, parseHostPort } from "../../util/net/address.ts";
import { isLoopbackName } from "../settings.ts";
import { serveHttp } from "../../transport/http/serve.ts";
import type { VisitorInspector, VisitorObserver } from "../tunnels/visitors.ts";
import { createInspectorApp } from "./app.ts";
import { Inspector, type InspectorOptions } from "./inspector.ts";

/** Where the inspector listens unless told otherwise. */
export const DEFAULT_INSPECT_ADDRESS = "127.0.0.1:4040";

/** How to start the inspector. */
export interface StartInspectorOptions extends InspectorOptions {
  /** `host:port` or a bare port (on 127.0.0.1); default 127.0.0.1:4040. */
  address?: string;
  /** The API's bearer token; required for an address that is not a loopback one. */
  token?: string;
}

/** A running inspector: give it to `connect()` as `inspector`. */
export interface InspectorServer extends VisitorInspector {
  /** Its page, e.g. `http://127.0.0.1:4040`. */
  readonly url: string;
  /** The bound address. */
  readonly hostname: string;
  /** The bound port. */
  readonly port: number;
  /** Stops listening (the client's tunnels keep running, unobserved from then on). */
  close(): Promise<void>;
}

/** Whether `hostname` is a loopback address (or `localhost`). */
export const isLoopback: (hostname: string) => boolean = isLoopbackName;

/** The inspector's address from `text` (`host:port`, a bare port, or empty for the default). */
export function inspectAddress(text: string | undefined): { hostname: string; port: number } {
  const value = text === undefined || text === "" ? DEFAULT_INSPECT_ADDRESS : text;
  return parseHostPort(/^\d+$/.test(value) ? `127.0.0.1:${value}` : value);
}

/** Binds the inspector's listener and serves its app; refuses a reachable address without a token. */
export async function startInspector(
  options: StartInspectorOptions = {},
): Promise<InspectorServer> {
  const address = inspectAddress(options.address);
  if (!isLoopback(address.hostname) && (options.token === undefined || options.token === "")) {
    throw new Error(
      `the inspector would listen on ${formatHostPort(address.hostname, address.port)}, ` +
        "which other machines may reach, and shows requests with their bodies: give it a token " +
        "(TUNNELMUX_INSPECT_TOKEN) or a loopback address",
    );
  }
  if (options.token !== undefined && options.token.length < 16) {
    throw new Error("the inspector's token must have at least 16 characters");
  }
  const inspector = new Inspector(options);
  let handler: (request: Request) => Response | Promise<Response> = () =>
    Response.json({ error: { code: "not_ready", message: "starting" } }, { status: 503 });
  const server = await serveHttp(address, (request) => handler(request));
  const app = createInspectorApp(inspector, {
    hostname: server.hostname,
    port: server.port,
    token: options.token,
  });
  handler = (request) => app.fetch(request);
  return {
    url: `http://${formatHostPort(server.hostname, server.port)}`,
    hostname: server.hostname,
    port: server.port,
    observe: (visit): VisitorObserver => inspector.observe(visit),
    close: () => server.close(),
  };
}
