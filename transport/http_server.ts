/**
 * Serves a fetch handler over HTTP with the runtime's own server: `Deno.serve` on Deno,
 * `Bun.serve` on Bun. The admin API's listener, kept here with the other runtime adapters.
 *
 * @module
 */

import type { HostPort } from "../util/address.ts";
import { currentRuntime } from "../util/runtime.ts";
import { bunApi } from "./bun_types.ts";

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
export function serveHttp(address: HostPort, handler: FetchHandler): Promise<HttpServer> {
  if (currentRuntime() === "bun") {
    // Bun.serve binds synchronously and throws (EADDRINUSE) right here.
    const server = bunApi("serveHttp").serve({
      hostname: address.hostname,
      port: address.port,
      fetch: handler,
      error: internalError,
    });
    return Promise.resolve({
      hostname: address.hostname,
      port: server.port,
      close: async () => {
        // Graceful first, so a response being written (e.g. to the drain that stopped us) is
        // delivered; then force, since long-lived responses would otherwise hold us open.
        await boundedWait(Promise.resolve(server.stop(false)));
        await server.stop(true);
      },
    });
  }
  return new Promise((resolve, reject) => {
    try {
      const server = Deno.serve({
        hostname: address.hostname,
        port: address.port,
        onError: internalError,
        onListen: (addr) => {
          resolve({
            hostname: address.hostname,
            port: addr.port,
            // Graceful: responses in flight are delivered. Deno has no forced close, so a
            // long-lived response is only waited for so long.
            close: () => boundedWait(server.shutdown()),
          });
        },
      }, handler);
    } catch (error) {
      reject(error);
    }
  });
}
