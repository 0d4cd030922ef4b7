/**
 * Serves a fetch handler over HTTP: `Bun.serve` on Bun, our own HTTP/1.1 server
 * (`http/server.ts`) elsewhere. The admin API's listener, kept here with the other runtime
 * adapters.
 *
 * Both pull a streamed body only as fast as the peer takes it (`Bun.serve` stops pulling once the
 * socket pushes back, holding little beyond the kernel's buffer), so a peer that does not read
 * makes the body (an event feed) fall behind rather than pile up here. Event streams
 * (`text/event-stream`) get two more things on `Bun.serve`:
 * - no idle timeout: a feed is quiet between events and sends its heartbeats further apart than
 *   Bun's 10 s default, which would cut every quiet stream; the feed bounds itself (heartbeats,
 *   readers that fall behind are cut off).
 * - a body that fails closes the connection: `Bun.serve` learns of the failure only when it pulls
 *   again, which a peer that does not read never lets it do, so a feed's cut-off reader would
 *   otherwise keep its connection.
 *
 * @module
 */

import type { HostPort } from "../../util/address.ts";
import { currentRuntime } from "../../util/runtime.ts";
import { bunApi, type BunServer } from "../bun/types.ts";
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

/** `Bun.serve`'s server, with what is used here beyond `BunServer`. */
type TimedServer = BunServer & {
  /** Sets `request`'s idle timeout in seconds (0: none); the connection closes when it expires. */
  timeout(request: Request, seconds: number): void;
  /** Requests whose response is not finished. */
  readonly pendingRequests: number;
};

function isEventStream(response: Response): boolean {
  return response.body !== null &&
    /^text\/event-stream\b/i.test(response.headers.get("content-type") ?? "");
}

/**
 * `body`, passed on chunk by chunk as it is pulled, with `failed` called as soon as `body` fails,
 * whether or not anyone is pulling.
 */
function watchFailure(
  body: ReadableStream<Uint8Array>,
  failed: () => void,
): ReadableStream<Uint8Array> {
  const reader = body.getReader();
  reader.closed.catch(failed);
  return new ReadableStream<Uint8Array>({
    async pull(controller) {
      const { done, value } = await reader.read();
      if (done) controller.close();
      else controller.enqueue(value);
    },
    cancel(reason) {
      return reader.cancel(reason);
    },
  }, { highWaterMark: 0 });
}

/** Listens on `address` and serves `handler`; resolves once bound, rejects if it cannot bind. */
export async function serveHttp(address: HostPort, handler: FetchHandler): Promise<ServedHttp> {
  if (currentRuntime() === "bun") {
    // Bun.serve binds synchronously and throws (EADDRINUSE) right here.
    const server = bunApi("serveHttp").serve({
      hostname: address.hostname,
      port: address.port,
      fetch: async (request, server) => {
        const response = await handler(request);
        if (!isEventStream(response)) return response;
        const timed = server as TimedServer;
        timed.timeout(request, 0);
        // The shortest timeout Bun has: the connection closes at its next timer tick.
        const body = watchFailure(response.body!, () => timed.timeout(request, 1));
        return new Response(body, response);
      },
      error: internalError,
    }) as TimedServer;
    return {
      hostname: address.hostname,
      port: server.port,
      get pendingRequests() {
        return server.pendingRequests;
      },
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
  return {
    hostname: server.hostname,
    port: server.port,
    get pendingRequests() {
      return server.pendingRequests;
    },
    close: () => server.close(),
  };
}
