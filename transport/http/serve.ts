/**
 * Serves a fetch handler over HTTP with our own HTTP/1.1 server (`http/server.ts`) over the
 * runtime's TCP adapter, on Deno and Bun alike: the admin API's listener, kept here with the other
 * runtime adapters. One server, so both runtimes keep the same request deadline (`Deno.serve` has
 * none against a slow request head; `Bun.serve`'s was its own 10–12 s), and a streamed body (an
 * event feed) is pulled only as fast as the peer takes it.
 *
 * @module
 */

import type { HostPort } from "../../util/net/address.ts";
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

/** The server {@linkcode serveHttp} returns: an {@linkcode HttpServer} with its load. */
export interface ServedHttp extends HttpServer {
  /**
   * Requests whose response is not finished; an event stream counts until it ends or its
   * connection closes.
   */
  readonly pendingRequests: number;
}

/** A request handler, as `app.fetch` of a hono app. */
export type FetchHandler = (request: Request) => Response | Promise<Response>;

/** Listens on `address` and serves `handler`; resolves once bound, rejects if it cannot bind. */
export function serveHttp(address: HostPort, handler: FetchHandler): Promise<ServedHttp> {
  return serveHttp1(address, handler);
}
