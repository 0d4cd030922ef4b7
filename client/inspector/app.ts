/**
 * The request inspector's web app (hono, the same on Deno, Bun and Node): the page with its
 * script and style sheet, and the JSON API under `/api/` — the list with its filters, one
 * exchange, a replay, the live feed (SSE) and a HAR export.
 *
 * Every request passes the `Host` allowlist first (a page on another site that rebinds its name
 * to 127.0.0.1 still sends its own name, and gets 421). With a token, the API wants it as a
 * bearer token (the page asks for it; the page itself is public, as it holds nothing). A replay
 * must be a JSON POST without a foreign `Origin`: a form on another site cannot send one, so no
 * page the user visits can make the inspector send requests to the local service.
 *
 * @module
 */

import { Hono } from "hono";
import { bodyLimit } from "hono/body-limit";
import { secureHeaders } from "hono/secure-headers";
import { formatHostPort } from "../../util/net/address.ts";
import INSPECTOR_HTML from "./page/index.html" with { type: "text" };
import INSPECTOR_JS from "./page/inspector.js" with { type: "text" };
import INSPECTOR_CSS from "./page/inspector.css" with { type: "text" };
import { type Inspector, type ReplayEdits, ReplayError } from "./inspector.ts";
import type { RecorderEvent } from "./recorder.ts";
import { detail, type ExchangeFilter, harLog, matches, summary } from "./views.ts";

/** The page's Content-Security-Policy: nothing inline, nothing from elsewhere, no framing. */
export const INSPECTOR_CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "connect-src 'self'",
  "img-src 'self' data:",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join("; ");

/** Largest replay request accepted (edits with a body). */
export const MAX_REPLAY_BYTES = 2 * 1024 * 1024;

/** How the app is built. */
export interface InspectorAppOptions {
  /** The bound address and port (for the `Host` allowlist). */
  hostname: string;
  port: number;
  /** The API's bearer token; none: the API is open to whoever reaches the address. */
  token?: string;
  /** Between two heartbeats of the live feed (default 15 s). */
  heartbeatMs?: number;
  /** Events a feed's reader may fall behind by before it is cut off (default 1000). */
  maxLag?: number;
}

/** The `Host` values the inspector answers to: its address, localhost and the loopbacks. */
function allowedHosts(hostname: string, port: number): Set<string> {
  const hosts = new Set<string>();
  for (const name of [hostname, "localhost", "127.0.0.1", "::1"]) {
    hosts.add(formatHostPort(name, port).toLowerCase());
  }
  return hosts;
}

const apiError = (status: number, code: string, message: string, headers = {}) =>
  Response.json({ error: { code, message } }, { status, headers });

/** The same-length comparison of two strings, in time that does not depend on where they differ. */
function sameToken(a: string, b: string): boolean {
  const x = new TextEncoder().encode(a);
  const y = new TextEncoder().encode(b);
  let diff = x.length ^ y.length;
  for (let i = 0; i < Math.max(x.length, y.length); i++) diff |= (x[i] ?? 0) ^ (y[i] ?? 0);
  return diff === 0;
}

/** Builds the inspector's app for `inspector`. */
export function createInspectorApp(inspector: Inspector, options: InspectorAppOptions): Hono {
  const app = new Hono();
  const recorder = inspector.recorder;
  const hosts = allowedHosts(options.hostname, options.port);
  app.onError((error) => apiError(500, "internal", error.message));
  app.notFound(() => apiError(404, "not_found", "no such page or endpoint"));
  app.use(secureHeaders());
  app.use(async (c, next) => {
    if (!hosts.has((c.req.header("host") ?? "").toLowerCase())) {
      return apiError(421, "misdirected", "this Host is not served here");
    }
    await next();
  });
  const page = (body: string, type: string, csp = false) =>
    new Response(body, {
      headers: {
        "content-type": `${type}; charset=utf-8`,
        "cache-control": "no-cache",
        ...(csp ? { "content-security-policy": INSPECTOR_CSP } : {}),
      },
    });
  app.get("/", () => page(INSPECTOR_HTML, "text/html", true));
  app.get("/inspector.js", () => page(INSPECTOR_JS, "text/javascript"));
  app.get("/inspector.css", () => page(INSPECTOR_CSS, "text/css"));
  app.use("/api/*", async (c, next) => {
    if (options.token !== undefined) {
      const match = /^Bearer\s+(\S+)$/i.exec(c.req.header("authorization") ?? "");
      if (!match || !sameToken(match[1], options.token)) {
        return apiError(401, "unauthorized", "this inspector wants its token", {
          "WWW-Authenticate": 'Bearer realm="tunnelmux inspector"',
        });
      }
    }
    if (c.req.method !== "GET" && c.req.method !== "HEAD") {
      const origin = c.req.header("origin");
      if (origin !== undefined && !hosts.has(origin.replace(/^https?:\/\//i, "").toLowerCase())) {
        return apiError(403, "forbidden", "requests from other sites are refused");
      }
      if (
        c.req.method === "POST" && !/^application\/json\b/i.test(c.req.header("content-type") ?? "")
      ) {
        return apiError(415, "unsupported_media_type", "send the edits as application/json");
      }
    }
    await next();
  });
  app.use(
    "/api/*",
    bodyLimit({
      maxSize: MAX_REPLAY_BYTES,
      onError: () =>
        apiError(
          413,
          "payload_too_large",
          `request bodies are limited to ${MAX_REPLAY_BYTES} bytes`,
        ),
    }),
  );

  app.get("/api/requests", (c) => {
    const filter: ExchangeFilter = {
      status: c.req.query("status") || undefined,
      method: c.req.query("method") || undefined,
      path: c.req.query("path") || undefined,
      q: c.req.query("q") || undefined,
    };
    const limitText = c.req.query("limit");
    const limit = limitText === undefined ? 1000 : Number(limitText);
    if (!Number.isSafeInteger(limit) || limit < 1) {
      return apiError(400, "bad_request", "limit must be a positive integer");
    }
    const list = recorder.list().filter((e) => matches(e, filter)).reverse().slice(0, limit);
    return c.json({ requests: list.map(summary), total: recorder.size, bytes: recorder.bytes });
  });
  app.delete("/api/requests", (c) => {
    recorder.clear();
    return c.body(null, 204);
  });
  const byId = (text: string) => (/^\d{1,15}$/.test(text) ? recorder.get(Number(text)) : undefined);
  app.get("/api/requests/:id", (c) => {
    const exchange = byId(c.req.param("id"));
    if (!exchange) return apiError(404, "not_found", "no such request (it may have left the ring)");
    return c.json(detail(exchange));
  });
  app.post("/api/requests/:id/replay", async (c) => {
    const exchange = byId(c.req.param("id"));
    if (!exchange) return apiError(404, "not_found", "no such request (it may have left the ring)");
    let edits: unknown;
    const text = await c.req.text();
    try {
      edits = text.trim() === "" ? {} : JSON.parse(text);
    } catch {
      return apiError(400, "bad_request", "the body is not JSON");
    }
    const problem = editsProblem(edits);
    if (problem) return apiError(400, "bad_request", problem);
    try {
      const replayed = await inspector.replay(exchange, edits as ReplayEdits);
      return c.json(detail(replayed), 201);
    } catch (error) {
      if (error instanceof ReplayError) {
        return apiError(
          error.status,
          error.status === 409 ? "conflict" : error.status === 400 ? "bad_request" : "bad_gateway",
          error.message,
        );
      }
      throw error;
    }
  });
  app.get("/api/har", () => {
    const body = JSON.stringify(harLog(recorder.list()), null, 2);
    return new Response(body, {
      headers: {
        "content-type": "application/json; charset=utf-8",
        "content-disposition": 'attachment; filename="tunnelmux-inspector.har"',
        "cache-control": "no-store",
      },
    });
  });
  app.get("/api/events", () => {
    const body = eventStream(inspector, options.heartbeatMs ?? 15_000, options.maxLag ?? 1000);
    return new Response(body, {
      headers: {
        "content-type": "text/event-stream; charset=utf-8",
        "cache-control": "no-store",
        "x-accel-buffering": "no",
      },
    });
  });
  return app;
}

/** Why `edits` is not a replay's edits, or undefined. */
function editsProblem(edits: unknown): string | undefined {
  if (typeof edits !== "object" || edits === null || Array.isArray(edits)) {
    return "the edits must be a JSON object";
  }
  const known = new Set(["method", "path", "headers", "body", "bodyBase64"]);
  for (const [key, value] of Object.entries(edits)) {
    if (!known.has(key)) return `unknown field "${key}" (known: ${[...known].join(", ")})`;
    if (key !== "headers" && typeof value !== "string") return `"${key}" must be a string`;
  }
  const { body, bodyBase64 } = edits as ReplayEdits;
  if (body !== undefined && bodyBase64 !== undefined) return "give body or bodyBase64, not both";
  return undefined;
}

/**
 * The live feed: an `added`, `updated` or `evicted` event with the exchange's summary for each
 * change, a comment as heartbeat. A reader that falls `maxLag` events behind is cut off (the page
 * reconnects and reloads the list), so a stalled reader holds a bounded backlog.
 */
function eventStream(inspector: Inspector, heartbeatMs: number, maxLag: number) {
  const encoder = new TextEncoder();
  let stop = () => {};
  return new ReadableStream<Uint8Array>({
    start(controller) {
      const send = (text: string) => {
        if ((controller.desiredSize ?? 0) < -maxLag) {
          stop();
          controller.error(new Error("the reader fell behind"));
          return;
        }
        controller.enqueue(encoder.encode(text));
      };
      const unsubscribe = inspector.recorder.subscribe((event: RecorderEvent) => {
        const data = event.type === "evicted" ? { id: event.exchange.id } : summary(event.exchange);
        send(`event: ${event.type}\ndata: ${JSON.stringify(data)}\n\n`);
      });
      const heartbeat = setInterval(() => send(": heartbeat\n\n"), heartbeatMs);
      stop = () => {
        unsubscribe();
        clearInterval(heartbeat);
      };
      send(": connected\n\n");
    },
    cancel() {
      stop();
    },
  }, { highWaterMark: 1 });
}
