import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { createServer, type Server } from "node:http";
import { gzipSync } from "node:zlib";
import { createInspectorApp } from "./app.ts";
import { Inspector } from "./inspector.ts";
import type { ExchangeDetail, ExchangeSummary } from "./views.ts";

const text = new TextEncoder();
const HOST = "127.0.0.1:4040";
const TOKEN = "inspector-token-0123456789";

/** A local service that says what it was asked, as JSON. */
function echoService(): Promise<{ server: Server; local: string; seen: string[] }> {
  const seen: string[] = [];
  const server = createServer((req, res) => {
    let body = "";
    req.setEncoding("utf8").on("data", (d: string) => (body += d));
    req.on("end", () => {
      seen.push(`${req.method} ${req.url} ${body}`);
      res.setHeader("content-type", "application/json");
      res.end(
        JSON.stringify({
          method: req.method,
          url: req.url,
          body,
          auth: req.headers.authorization ?? null,
        }),
      );
    });
  });
  return new Promise((resolve) =>
    server.listen(
      0,
      "127.0.0.1",
      () =>
        resolve({
          server,
          seen,
          local: `127.0.0.1:${(server.address() as { port: number }).port}`,
        }),
    )
  );
}

/** Feeds one exchange through an observer, as the client would from a visitor's stream. */
function record(
  inspector: Inspector,
  local: string,
  request: string,
  response: string | Uint8Array,
) {
  const o = inspector.observe({ tunnel: "app", local, remote: "203.0.113.9:4711" });
  o.aToB(text.encode(request));
  o.bToA(typeof response === "string" ? text.encode(response) : response);
  o.close();
}

describe("inspector app", () => {
  let service: Awaited<ReturnType<typeof echoService>>;
  before(async () => (service = await echoService()));
  after(() => service.server.close());

  const setup = (token?: string) => {
    const inspector = new Inspector();
    const app = createInspectorApp(inspector, { hostname: "127.0.0.1", port: 4040, token });
    const call = (path: string, init: RequestInit = {}) =>
      app.request(`http://${HOST}${path}`, {
        ...init,
        headers: {
          host: HOST,
          ...(token ? { authorization: `Bearer ${token}` } : {}),
          ...init.headers,
        },
      });
    return { inspector, app, call };
  };

  it("lists exchanges newest first and filters them by status, method, path and text", async () => {
    const { inspector, call } = setup();
    record(
      inspector,
      service.local,
      "GET /a HTTP/1.1\r\nHost: app\r\n\r\n",
      "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n",
    );
    record(
      inspector,
      service.local,
      "POST /b HTTP/1.1\r\nHost: app\r\nContent-Length: 6\r\n\r\nneedle",
      "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n",
    );
    record(
      inspector,
      service.local,
      "GET /c/a HTTP/1.1\r\nHost: app\r\n\r\n",
      "HTTP/1.1 503 Busy\r\nContent-Length: 0\r\n\r\n",
    );
    const ids = async (query: string) => {
      const response = await call(`/api/requests${query}`);
      assert.equal(response.status, 200);
      return ((await response.json()).requests as ExchangeSummary[]).map((r) => r.target);
    };
    assert.deepEqual(await ids(""), ["/c/a", "/b", "/a"]);
    assert.deepEqual(await ids("?status=4xx,5xx"), ["/c/a", "/b"]);
    assert.deepEqual(await ids("?status=200"), ["/a"]);
    assert.deepEqual(await ids("?method=post"), ["/b"]);
    assert.deepEqual(await ids("?path=/a"), ["/c/a", "/a"]);
    assert.deepEqual(await ids("?q=NEEDLE"), ["/b"]);
    assert.deepEqual(await ids("?limit=1"), ["/c/a"]);
    assert.equal((await call("/api/requests?limit=0")).status, 400);
  });

  it("shows an exchange's detail: JSON pretty, gzip decoded, binary as hex, a cut body said so", async () => {
    const { inspector, call } = setup();
    const gz = gzipSync(text.encode("hello from gzip"));
    const head =
      `HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Encoding: gzip\r\nContent-Length: ${gz.length}\r\n\r\n`;
    record(
      inspector,
      service.local,
      'POST /j HTTP/1.1\r\nContent-Type: application/json\r\nContent-Length: 7\r\n\r\n{"a":1}',
      new Uint8Array([...text.encode(head), ...gz]),
    );
    record(
      inspector,
      service.local,
      "GET /bin HTTP/1.1\r\n\r\n",
      new Uint8Array([
        ...text.encode("HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\n"),
        0,
        1,
        2,
        255,
      ]),
    );
    const big = "x".repeat(70 * 1024);
    record(
      inspector,
      service.local,
      `PUT /big HTTP/1.1\r\nContent-Length: ${big.length}\r\n\r\n${big}`,
      "HTTP/1.1 204 No Content\r\n\r\n",
    );
    const [json, bin, cut] = inspector.recorder.list().map((e) => e.id);
    const one = async (id: number) =>
      (await (await call(`/api/requests/${id}`)).json()) as ExchangeDetail;
    const j = await one(json);
    assert.equal(j.requestBody.kind, "json");
    assert.equal(j.requestBody.text, '{\n  "a": 1\n}');
    assert.equal(j.responseBody.encoding, "gzip");
    assert.equal(j.responseBody.text, "hello from gzip");
    assert.equal(j.remote, "203.0.113.9:4711");
    const b = await one(bin);
    assert.equal(b.responseBody.kind, "hex");
    assert.match(b.responseBody.text, /^00000000 {2}00 01 02 ff/);
    const c = await one(cut);
    assert.equal(c.requestBody.truncated, true);
    assert.equal(c.requestBody.size, big.length);
    assert.equal(c.requestBody.captured, inspector.recorder.bodyLimit);
    assert.equal(c.truncated, true);
    assert.equal((await call("/api/requests/999")).status, 404);
    assert.equal((await call("/api/requests/abc")).status, 404);
  });

  it("replays a request as it was and edited, recorded as a replay of the old one", async () => {
    const { inspector, call } = setup();
    record(
      inspector,
      service.local,
      "POST /orig?x=1 HTTP/1.1\r\nHost: app\r\nAuthorization: Bearer s3cret\r\nContent-Length: 5\r\n\r\nhello",
      "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n",
    );
    const id = inspector.recorder.list()[0].id;
    const post = (body: unknown) =>
      call(`/api/requests/${id}/replay`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify(body),
      });
    const same = await post({});
    assert.equal(same.status, 201);
    const replay = (await same.json()) as ExchangeDetail;
    assert.equal(replay.replayOf, id);
    assert.equal(replay.status, 200);
    assert.equal(replay.remote, "replay");
    assert.equal(replay.state, "done");
    assert.deepEqual(JSON.parse(replay.responseBody.text), {
      method: "POST",
      url: "/orig?x=1",
      body: "hello",
      auth: null, // a redacted value is not sent as "[redacted]"
    });
    const edited = (await (await post({
      method: "PUT",
      path: "/edited",
      headers: [["Host", "app"], ["Authorization", "Bearer new"]],
      body: "changed",
    })).json()) as ExchangeDetail;
    assert.deepEqual(JSON.parse(edited.responseBody.text), {
      method: "PUT",
      url: "/edited",
      body: "changed",
      auth: "Bearer new",
    });
    assert.deepEqual(service.seen.slice(-2), ["POST /orig?x=1 hello", "PUT /edited changed"]);
    const list = (await (await call("/api/requests")).json()).requests as ExchangeSummary[];
    assert.deepEqual(list.map((r) => r.replayOf), [id, id, undefined]);
  });

  it("refuses bad replays with a clear error", async () => {
    const { inspector, call } = setup();
    record(
      inspector,
      service.local,
      "GET / HTTP/1.1\r\n\r\n",
      "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n",
    );
    record(
      inspector,
      "127.0.0.1:1",
      "GET / HTTP/1.1\r\n\r\n",
      "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n",
    );
    const [ok, unreachable] = inspector.recorder.list().map((e) => e.id);
    const post = (id: number, body: string, type = "application/json") =>
      call(`/api/requests/${id}/replay`, {
        method: "POST",
        headers: { "content-type": type },
        body,
      });
    const code = async (r: Response) => [r.status, (await r.json()).error.message];
    assert.deepEqual((await code(await post(ok, "{nope")))[0], 400);
    assert.match((await code(await post(ok, '{"path":"no slash"}')))[1], /path must start with \//);
    assert.match((await code(await post(ok, '{"headers":[["bad name","x"]]}')))[1], /bad header/);
    assert.match((await code(await post(ok, '{"extra":1}')))[1], /unknown field "extra"/);
    assert.equal((await post(ok, "{}", "text/plain")).status, 415);
    const refused = await post(unreachable, "{}");
    assert.equal(refused.status, 201, "a replay that cannot connect is recorded, failed");
    const failed = (await refused.json()) as ExchangeDetail;
    assert.equal(failed.state, "failed");
    assert.match(failed.error!, /cannot reach 127\.0\.0\.1:1/);
    const foreign = await call(`/api/requests/${ok}/replay`, {
      method: "POST",
      headers: { "content-type": "application/json", origin: "http://evil.example" },
      body: "{}",
    });
    assert.equal(foreign.status, 403);
  });

  it("guards: a foreign Host gets 421, the API wants the token when there is one", async () => {
    const { app } = setup(TOKEN);
    const get = (path: string, headers: Record<string, string>) =>
      app.request(`http://${HOST}${path}`, { headers });
    assert.equal((await get("/", { host: "evil.example:4040" })).status, 421);
    assert.equal((await get("/api/requests", { host: HOST })).status, 401);
    assert.equal(
      (await get("/api/requests", { host: HOST, authorization: "Bearer wrong" })).status,
      401,
    );
    assert.equal(
      (await get("/api/requests", { host: HOST, authorization: `Bearer ${TOKEN}` })).status,
      200,
    );
    const page = await get("/", { host: "localhost:4040" });
    assert.equal(page.status, 200, "the page itself holds nothing secret");
    assert.match(page.headers.get("content-security-policy")!, /script-src 'self'/);
    assert.equal((await get("/inspector.js", { host: HOST })).status, 200);
  });

  it("exports HAR 1.2 and feeds live events over SSE", async () => {
    const { inspector, call } = setup();
    const events = await call("/api/events");
    assert.match(events.headers.get("content-type")!, /^text\/event-stream/);
    const reader = events.body!.getReader();
    record(
      inspector,
      service.local,
      "GET /live HTTP/1.1\r\nHost: app.tunnels.test\r\nX-Forwarded-Proto: https\r\n\r\n",
      "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 2\r\n\r\nhi",
    );
    let received = "";
    for (let i = 0; i < 20 && !received.includes("event: updated"); i++) {
      const { value, done } = await reader.read();
      if (done) break;
      received += new TextDecoder().decode(value);
    }
    await reader.cancel();
    assert.match(received, /event: added\ndata: \{"id":1,/);
    assert.match(received, /event: updated\ndata: .*"status":200/);
    assert.equal(inspector.recorder.subscribers, 0, "a closed feed stops listening");

    const har = await call("/api/har");
    assert.match(har.headers.get("content-disposition")!, /attachment/);
    const log = (await har.json()).log;
    assert.equal(log.version, "1.2");
    const [entry] = log.entries;
    assert.equal(entry.request.url, "https://app.tunnels.test/live");
    assert.equal(entry.response.status, 200);
    assert.equal(entry.response.content.text, "hi");
    assert.ok(entry.timings.wait >= 0);
  });
});
