/**
 * Test support for the endpoint modules: what they are built on (`deps.ts`), small and in
 * memory, and the way the admin app serves them. An endpoint's test builds its sub-app over these
 * and calls `app.request(path, init)`, as hono's own tests do: no listener, no daemon.
 *
 * @module
 */

import assert from "node:assert/strict";
import { Hono } from "hono";
import type { Config } from "../../config/mod.ts";
import { validateConfig } from "../../config/mod.ts";
import { EventFeed } from "../../events.ts";
import type { PortClaim } from "../../registry/registry.ts";
import type { ServedCertificate } from "../../tls/certificates.ts";
import { Logger } from "../../../util/log.ts";
import type { AdminCluster, ClusterAnswers, ClusterFacts } from "./deps.ts";
import { onApiError, onNotFound } from "./errors.ts";

/** The token of client `alice` in {@linkcode testConfig}. */
export const ALICE_TOKEN = "fake-deps-alice-token-0123456789abcdef";

/** A validated config: client `alice` (who may offer and use `box`), and `more` on top. */
export function testConfig(more: Record<string, unknown> = {}): Config {
  const result = validateConfig({
    listen: { tcp: "127.0.0.1:0", websocket: null, admin: null },
    clients: [{ name: "alice", token: ALICE_TOKEN, services: { offer: ["box"], use: ["box"] } }],
    ...more,
  });
  assert.deepEqual(result.errors, []);
  return result.config!;
}

/** Serves `api` as the admin app does: its errors and unknown paths as the API's JSON errors. */
export function served(api: Hono): Hono {
  const app = new Hono();
  app.onError(onApiError(new Logger({ level: "error", format: "json", sink: () => {} })));
  app.notFound(onNotFound);
  app.route("/", api);
  return app;
}

/** `app`'s answer to `path`, with its JSON body (undefined for an empty one). */
export async function call(
  app: Hono,
  path: string,
  init: RequestInit = {},
  // deno-lint-ignore no-explicit-any
): Promise<{ status: number; headers: Headers; body: any }> {
  const response = await app.request(path, init);
  const text = await response.text();
  return {
    status: response.status,
    headers: response.headers,
    body: text === "" ? undefined : JSON.parse(text),
  };
}

/** A JSON request of `method` with `body` (a string is sent as it is). */
export function json(method: string, body: unknown): RequestInit {
  return {
    method,
    headers: { "content-type": "application/json" },
    body: typeof body === "string" ? body : JSON.stringify(body),
  };
}

/** Asserts that `app` answers `path` with `status` and the API's error shape with `code`. */
export async function assertError(
  app: Hono,
  path: string,
  status: number,
  code: string,
  init: RequestInit = {},
): Promise<string> {
  const { status: got, body } = await call(app, path, init);
  const where = `${init.method ?? "GET"} ${path}: ${JSON.stringify(body)}`;
  assert.equal(got, status, where);
  assert.equal(body?.error?.code, code, where);
  assert.equal(typeof body.error.message, "string", where);
  return body.error.message;
}

/** A query the fake cluster was asked. */
export interface AskedQuery {
  /** Its kind (`sessions`, `kick`, …). */
  kind: string;
  /** What was sent with it. */
  data: unknown;
  /** The node it was asked of, when only one. */
  node?: string;
}

/** A stand-in for the cluster: a fixed view, canned answers, and the queries it was asked. */
export interface FakeCluster extends AdminCluster {
  /** Every query asked, in order. */
  readonly asked: AskedQuery[];
}

/** What a {@linkcode fakeCluster} holds. */
export interface FakeClusterOptions {
  /** This node's name; default `n1`. */
  node?: string;
  /** The answers to each kind of query; a kind not listed gets none and nobody missing. */
  answers?: Record<string, ClusterAnswers | ((query: AskedQuery) => ClusterAnswers)>;
  /** The cluster's port claims; default none. */
  claims?: PortClaim[];
  /** Each route's health as its record says; default healthy. */
  routeHealthy?: (port: number, node: string, tunnel: string) => boolean;
  /** What view() returns besides the node; default no nodes, peers or relays. */
  view?: Partial<ClusterFacts>;
}

/** A cluster that answers from `options`. */
export function fakeCluster(options: FakeClusterOptions = {}): FakeCluster {
  const node = options.node ?? "n1";
  const asked: AskedQuery[] = [];
  return {
    node,
    asked,
    events: new EventFeed(),
    view: () => ({
      node,
      nats: { state: "connected", server: "nats://127.0.0.1:4222" },
      nodes: [],
      peers: [],
      relays: [],
      ...options.view,
    }),
    ask(kind, data, askOptions = {}) {
      const query = { kind, data, ...(askOptions.node ? { node: askOptions.node } : {}) };
      asked.push(query);
      const answer = options.answers?.[kind] ?? { answers: [], missing: [] };
      return Promise.resolve(typeof answer === "function" ? answer(query) : answer);
    },
    registry: {
      claims: () => options.claims ?? [],
      routeHealthy: (port, owner, tunnel) => options.routeHealthy?.(port, owner, tunnel) ?? true,
    },
  };
}

/** A certificate of the HTTPS port as the store lists it (no key material: never shown). */
export function servedCertificate(names: string[], notAfter: number): ServedCertificate {
  return {
    identity: { cert: "", key: "" },
    names,
    notBefore: 0,
    notAfter,
    source: "file",
  };
}

/** The HTTPS port's certificates: `list` as given, `find` by exact name. */
export function fakeCertificates(list: ServedCertificate[] = []) {
  return {
    list: () => list,
    find: (host: string) => list.find((c) => c.names.includes(host)),
  };
}
