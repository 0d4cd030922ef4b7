/**
 * Serves a fetch handler over HTTP: `Bun.serve` on Bun, our own HTTP/1.1 server
 * (`http/server.ts`) elsewhere. The admin API's listener, kept here with the other runtime
 * adapters.
 *
 * @module
 */

import type { HostPort } from "../../util/address.ts";
import { currentRuntime } from "../../util/runtime.ts";
import { bunApi } from "../bun/types.ts";
import { serveHttp1 } from "./server.ts";

/** A bound HTTP server. */
export interface HttpServer {
  /** The bound address. */
  readonly hostname: string;
  /** The bound port (the real one when 0 was asked for). */
  readonly port: number;
  /** Stops listening and ends open connections. */
  close(): Promise<void>;
}

/** A request handler, as `app.fetch` of a hono app. */
export type FetchHandler = (request: Request) => Response | Promise<Response>;

/** How long close() waits for a graceful shutdown (long-lived responses keep it waiting). */
const SHUTDOWN_WAIT_MS = 2_000;

/** Waits for `promise`, but no longer than SHUTDOWN_WAIT_MS. */
async function boundedWait(promise: Promise<unknown>): Promise<void> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const waited = new Promise<void>((resolve) => timer = setTimeout(resolve, SHUTDOWN_WAIT_MS));
  await Promise.race([promise, waited]);
  clearTimeout(timer);
}

/** The answer when the handler throws past hono's own error handling (it should not). */
function internalError(): Response {
  return Response.json({ error: { code: "internal", message: "internal error" } }, {
    status: 500,
  });
}

/** Listens on `address` and serves `handler`; resolves once bound, rejects if it cannot bind. */
export async function serveHttp(address: HostPort, handler: FetchHandler): Promise<HttpServer> {
  if (currentRuntime() === "bun") {
    // Bun.serve binds synchronously and throws (EADDRINUSE) right here.
    const server = bunApi("serveHttp").serve({
      hostname: address.hostname,
      port: address.port,
      fetch: handler,
      error: internalError,
    });
    return {
      hostname: address.hostname,
      port: server.port,
      close: async () => {
        // Graceful first, so a response being written (e.g. to the drain that stopped us) is
        // delivered; then force, since long-lived responses would otherwise hold us open.
        await boundedWait(Promise.resolve(server.stop(false)));
        await server.stop(true);
      },
    };
  }
  // Deno: our own HTTP/1.1 server, with the request deadline Deno.serve lacks (slowloris).
  const server = await serveHttp1(address, handler);
  return { hostname: server.hostname, port: server.port, close: () => server.close() };
}
