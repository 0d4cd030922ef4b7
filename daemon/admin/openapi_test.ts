// The OpenAPI document stays true to the app: its operations are exactly the registered endpoints
// (both ways), every path parameter is declared with a pattern, and real responses validate
// against the documented schemas (with a small JSON Schema subset checker: no new dependency).
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { tmpdir } from "node:os";
import { resolve, sep } from "node:path";
import { createAdminApp } from "./app.ts";
import { Logger } from "../../util/log.ts";
import { type Fixture, startFixture } from "./_admin_fixture.ts";

type Json = Record<string, unknown>;
type Doc = {
  openapi: string;
  paths: Record<string, Record<string, Json>>;
  components: { schemas: Record<string, Json>; responses: Record<string, Json> };
  security: unknown[];
};

const METHODS = ["get", "put", "post", "delete", "patch", "head", "options", "trace"];

/**
 * The token endpoints were written by someone else at the same time as the document. Should
 * `api/tokens.ts` be missing (a partial checkout or a revert), the document still describes
 * them; only then are they tolerated as documented-but-unregistered.
 */
const TOKENS_PRESENT = existsSync(fileURLToPath(new URL("./api/tokens.ts", import.meta.url)));

/** Resolves a local `$ref` (`#/components/...`). */
function deref(doc: Doc, node: Json): Json {
  let current = node;
  for (let i = 0; i < 16 && typeof current.$ref === "string"; i++) {
    let target: unknown = doc;
    for (const part of (current.$ref as string).replace(/^#\//, "").split("/")) {
      target = (target as Json)[part];
    }
    assert.ok(target && typeof target === "object", `dangling $ref ${current.$ref}`);
    current = target as Json;
  }
  return current;
}

/** The JSON type names `value` has (an integer is also a number). */
function typesOf(value: unknown): string[] {
  if (value === null) return ["null"];
  if (Array.isArray(value)) return ["array"];
  if (typeof value === "number") {
    return Number.isInteger(value) ? ["integer", "number"] : ["number"];
  }
  return [typeof value];
}

/**
 * Checks `value` against `schema` (type, required, properties, items, enum, pattern, $ref) and
 * returns the problems found, each with its JSON path; empty when it validates.
 */
function validate(doc: Doc, schema: Json, value: unknown, path = "$"): string[] {
  const s = deref(doc, schema);
  const problems: string[] = [];
  if (s.type !== undefined) {
    const allowed = Array.isArray(s.type) ? s.type as string[] : [s.type as string];
    if (!typesOf(value).some((t) => allowed.includes(t))) {
      return [`${path}: expected ${allowed.join("|")}, got ${JSON.stringify(value)}`];
    }
  }
  if (Array.isArray(s.enum) && !s.enum.includes(value)) {
    problems.push(`${path}: ${JSON.stringify(value)} is not one of ${JSON.stringify(s.enum)}`);
  }
  if (typeof s.pattern === "string" && typeof value === "string") {
    if (!new RegExp(s.pattern).test(value)) problems.push(`${path}: ${value} !~ ${s.pattern}`);
  }
  if (value !== null && typeof value === "object" && !Array.isArray(value)) {
    const object = value as Json;
    for (const key of (s.required as string[] | undefined) ?? []) {
      if (!(key in object)) problems.push(`${path}: missing ${key}`);
    }
    const properties = (s.properties ?? {}) as Record<string, Json>;
    for (const [key, sub] of Object.entries(properties)) {
      if (key in object) problems.push(...validate(doc, sub, object[key], `${path}.${key}`));
    }
  }
  if (Array.isArray(value) && s.items) {
    value.forEach((item, i) =>
      problems.push(...validate(doc, s.items as Json, item, `${path}[${i}]`))
    );
  }
  return problems;
}

/** `METHOD /path/{param}` for every operation in the document. */
function documented(doc: Doc): Set<string> {
  const operations = new Set<string>();
  for (const [path, item] of Object.entries(doc.paths)) {
    for (const method of Object.keys(item)) {
      if (METHODS.includes(method)) operations.add(`${method.toUpperCase()} ${path}`);
    }
  }
  return operations;
}

/** The schema of `status`'s JSON body for `method path` (following a response $ref). */
function responseSchema(doc: Doc, method: string, path: string, status: number): Json {
  const operation = doc.paths[path]?.[method.toLowerCase()];
  assert.ok(operation, `${method} ${path} is documented`);
  const responses = operation.responses as Record<string, Json>;
  const entry = responses[String(status)];
  assert.ok(entry, `${method} ${path} documents status ${status}`);
  const content = deref(doc, entry).content as Record<string, { schema: Json }> | undefined;
  assert.ok(content?.["application/json"], `${method} ${path} ${status} has a JSON body`);
  return content["application/json"].schema;
}

describe("OpenAPI document", () => {
  let f: Fixture;
  let doc: Doc;

  before(async () => {
    f = await startFixture();
    const client = await f.client();
    await client.expose({ local: `127.0.0.1:${f.echo.port}`, label: "web" });
    // A UDP tunnel too, so its `udp` counters are checked against the schema.
    await client.expose({ protocol: "udp", local: "127.0.0.1:9", label: "dns" });
    const response = await f.api("/v1/openapi.json");
    assert.equal(response.status, 200);
    assert.match(response.headers.get("content-type") ?? "", /^application\/json/);
    doc = JSON.parse(await response.text());
  });
  after(() => f.stop());

  it("is OpenAPI 3.1 JSON, behind the token, with a bearer scheme", async () => {
    assert.match(doc.openapi, /^3\.1\.\d+$/);
    const anonymous = await fetch(f.admin.url + "/v1/openapi.json");
    assert.equal(anonymous.status, 401);
    await anonymous.body?.cancel();
    const schemes = (doc.components as unknown as Json).securitySchemes as Record<string, Json>;
    assert.deepEqual(schemes.bearer, {
      type: "http",
      scheme: "bearer",
      description: schemes.bearer.description,
    });
    assert.deepEqual(doc.security, [{ bearer: [] }]);
    // The probes and the dashboard are public; nothing else is.
    const open = [...documented(doc)].filter((op) => {
      const [method, path] = op.split(" ");
      const security = doc.paths[path][method.toLowerCase()].security as unknown[] | undefined;
      return security !== undefined && security.length === 0;
    });
    assert.deepEqual(open.sort(), [
      "GET /",
      "GET /dashboard.css",
      "GET /dashboard.js",
      "GET /healthz",
      "GET /readyz",
    ]);
  });

  it("documents exactly the endpoints the app registers", () => {
    const log = new Logger({ level: "error", format: "json", sink: () => {} });
    const app = createAdminApp(f.daemon, { hostname: "127.0.0.1", port: 1, log });
    const registered = new Set(
      app.routes
        .filter((r) => r.method !== "ALL" && !r.path.endsWith("*"))
        .map((r) => `${r.method} ${r.path.replace(/:([A-Za-z_]\w*)/g, "{$1}")}`),
    );
    const expected = new Set(documented(doc));
    if (!TOKENS_PRESENT) {
      for (const op of expected) if (/ \/v1\/tokens(\/|$)/.test(op)) expected.delete(op);
    }
    const undocumented = [...registered].filter((op) => !expected.has(op));
    const unserved = [...expected].filter((op) => !registered.has(op));
    assert.deepEqual(undocumented, [], "registered but not documented");
    assert.deepEqual(unserved, [], "documented but not registered");
    for (const op of ["GET /healthz", "DELETE /v1/sessions/{id}/streams/{sid}", "GET /"]) {
      assert.ok(registered.has(op), op);
    }
  });

  it("names every operation once (operationId) and the server it is reached at", () => {
    const ids: string[] = [];
    for (const item of Object.values(doc.paths) as Record<string, unknown>[]) {
      for (const [method, operation] of Object.entries(item)) {
        if (method === "parameters") continue;
        const id = (operation as { operationId?: unknown }).operationId;
        assert.equal(typeof id, "string", `${method}: an operationId`);
        assert.match(id as string, /^[a-z][A-Za-z]*$/);
        ids.push(id as string);
      }
    }
    assert.equal(new Set(ids).size, ids.length, "operationIds are unique");
    assert.equal(ids.length, new Set(documented(doc)).size);
    const servers = (doc as unknown as { servers: { url: string }[] }).servers;
    assert.equal(servers[0].url, "http://127.0.0.1:7081");
  });

  it("declares every path parameter with a pattern, and every guarded endpoint's errors", () => {
    for (const [path, item] of Object.entries(doc.paths)) {
      const names = [...path.matchAll(/\{(\w+)\}/g)].map((m) => m[1]);
      for (const method of Object.keys(item).filter((m) => METHODS.includes(m))) {
        const operation = item[method];
        const params = [
          ...(item.parameters as unknown as Json[] ?? []),
          ...(operation.parameters as Json[] ?? []),
        ]
          .map((p) => deref(doc, p));
        const declared = params.filter((p) => p.in === "path");
        assert.deepEqual(
          declared.map((p) => p.name).sort(),
          [...names].sort(),
          `${method} ${path}`,
        );
        for (const p of declared) {
          assert.equal(p.required, true);
          assert.equal(typeof (p.schema as Json).pattern, "string", `${path} ${p.name} pattern`);
        }
        const statuses = Object.keys(operation.responses as Json);
        assert.ok(statuses.some((s) => s.startsWith("2")), `${method} ${path} has a success`);
        if (operation.security === undefined) {
          assert.ok(statuses.includes("401"), `${method} ${path} documents 401`);
        }
        if (names.length > 0) {
          assert.ok(statuses.includes("400") && statuses.includes("404"), `${method} ${path}`);
        }
      }
    }
  });

  it("documents request bodies for POST endpoints", () => {
    for (const [path, item] of Object.entries(doc.paths)) {
      if (!item.post) continue;
      const body = item.post.requestBody as Json | undefined;
      assert.ok(body, `POST ${path} has a requestBody`);
      assert.ok((body.content as Json)["application/json"], `POST ${path} takes JSON`);
      assert.ok((item.post.responses as Json)["413"], `POST ${path} documents 413`);
    }
  });

  it("matches real GET responses", async () => {
    const sessionId = f.daemon.registry.sessions().map((s) => s.id)[0];
    const cases: [string, string][] = [
      ["/healthz", "/healthz"],
      ["/readyz", "/readyz"],
      ["/v1/info", "/v1/info"],
      ["/v1/sessions", "/v1/sessions"],
      ["/v1/sessions/{id}", `/v1/sessions/${sessionId}`],
      ["/v1/tunnels", "/v1/tunnels"],
    ];
    if (TOKENS_PRESENT) cases.push(["/v1/tokens", "/v1/tokens"]);
    for (const [template, url] of cases) {
      const response = await f.api(url);
      assert.equal(response.status, 200, url);
      const body = await response.json();
      assert.deepEqual(validate(doc, responseSchema(doc, "GET", template, 200), body), [], url);
    }
    // The listing really had something in it, so the item schemas were exercised.
    const tunnels = await (await f.api("/v1/tunnels")).json() as {
      tunnels: { protocol: string; udp: unknown }[];
    };
    assert.deepEqual(tunnels.tunnels.map((t) => t.protocol).sort(), ["tcp", "udp"]);
    assert.ok(tunnels.tunnels.some((t) => t.udp !== null));
    const session = await (await f.api(`/v1/sessions/${sessionId}`)).json();
    assert.equal(session.udpForwards.flows, 0, "a session's UDP forwards, none yet");
  });

  it("matches real error responses", async () => {
    const cases: [string, string, number, RequestInit?][] = [
      ["/v1/info", "/v1/info", 401, { headers: { authorization: "Bearer nope" } }],
      ["/v1/sessions/{id}", "/v1/sessions/s999999", 404],
      ["/v1/sessions/{id}", "/v1/sessions/bogus", 400],
      ["/v1/sessions", "/v1/sessions?limit=0", 400],
      ["/v1/events", "/v1/events?lastEventId=x", 400],
    ];
    for (const [template, url, status, init] of cases) {
      const response = await f.api(url, init);
      assert.equal(response.status, status, url);
      const body = await response.json();
      assert.deepEqual(validate(doc, responseSchema(doc, "GET", template, status), body), [], url);
    }
  });

  it("matches real token responses: mint, show, revoke", { skip: !TOKENS_PRESENT }, async () => {
    // Whatever the status, it must be documented, and the body must match its schema.
    const check = async (method: string, template: string, response: Response) => {
      const body = await response.json();
      const schema = responseSchema(doc, method, template, response.status);
      assert.deepEqual(validate(doc, schema, body), [], `${method} ${template} ${response.status}`);
      return body as { id: string };
    };
    const invalid = await f.api("/v1/tokens", { method: "POST", body: '{"nope":1}' });
    assert.equal(invalid.status, 400);
    await check("POST", "/v1/tokens", invalid);
    await check("GET", "/v1/tokens", await f.api("/v1/tokens"));
    await check("GET", "/v1/tokens/{id}", await f.api("/v1/tokens/tok_0000000000000000"));
    await check("DELETE", "/v1/tokens/{id}", await f.api("/v1/tokens/x", { method: "DELETE" }));
    // Minting writes <dataDir>/tokens.json: only when the fixture keeps its data in a temporary
    // directory, never in the working tree (the default dataDir is ./data).
    const dataDir = resolve(f.daemon.config.dataDir);
    if (!dataDir.startsWith(resolve(tmpdir()) + sep)) return;
    const minted = await f.api("/v1/tokens", {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ name: "openapi-probe", expiresIn: 600 }),
    });
    assert.equal(minted.status, 201);
    const { id } = await check("POST", "/v1/tokens", minted);
    await check("GET", "/v1/tokens/{id}", await f.api(`/v1/tokens/${id}`));
    await check("GET", "/v1/tokens", await f.api("/v1/tokens"));
    await check("DELETE", "/v1/tokens/{id}", await f.api(`/v1/tokens/${id}`, { method: "DELETE" }));
    await check("GET", "/v1/tokens/{id}", await f.api(`/v1/tokens/${id}`));
  });

  it("the checker does catch mismatches", () => {
    const schema = { $ref: "#/components/schemas/SessionSummary" };
    assert.notDeepEqual(validate(doc, schema, { id: "s1" }), []);
    assert.notDeepEqual(validate(doc, schema, []), []);
    const error = { $ref: "#/components/schemas/Error" };
    assert.deepEqual(validate(doc, error, { error: { code: "not_found", message: "x" } }), []);
    assert.notDeepEqual(validate(doc, error, { error: { code: "nope", message: "x" } }), []);
    assert.notDeepEqual(validate(doc, { type: "integer" }, 1.5), []);
  });
});
