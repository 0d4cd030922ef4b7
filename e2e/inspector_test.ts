// The request inspector end to end: a daemon with an HTTP port (in this process), a client
// holding an HTTP tunnel with the inspector on (the SDK, then the `tunnelmux client --inspect`
// process), a local node:http app, and visitors on 127.0.0.1: what they send and get is listed
// by the inspector's API, bodies decoded, a WebSocket's frames counted, a replay reaching the app.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { createServer, request, type Server } from "node:http";
import { connect as connectTcp, type Socket } from "node:net";
import { gzipSync } from "node:zlib";
import { type Client, connect } from "../client/mod.ts";
import { type InspectorServer, startInspector } from "../client/inspector/start.ts";
import type { ExchangeDetail, ExchangeSummary } from "../client/inspector/views.ts";
import type { Daemon } from "../daemon/daemon.ts";
import { portOf, startDaemonInProcess } from "./_in_process_daemon.ts";
import { cleanup, startClient } from "../testing/mod.ts";
import { waitFor, withTimeout } from "../testing/wait.ts";

const TOKEN = "inspector-e2e-0123456789abcdef";
const DOMAIN = "tunnels.test";

/** The local app: echoes JSON, serves gzip and a long chunked body, echoes a WebSocket's bytes. */
function localApp(): Promise<{ server: Server; local: string; seen: string[] }> {
  const seen: string[] = [];
  const server = createServer((req, res) => {
    let body = "";
    req.setEncoding("utf8").on("data", (d: string) => (body += d));
    req.on("end", () => {
      seen.push(`${req.method} ${req.url} ${body}`);
      if (req.url === "/gz") {
        res.setHeader("content-type", "text/plain");
        res.setHeader("content-encoding", "gzip");
        res.end(gzipSync("a gzipped hello"));
      } else if (req.url === "/big") {
        res.setHeader("content-type", "text/plain");
        for (let i = 0; i < 10; i++) res.write("y".repeat(10 * 1024)); // chunked, 100 KiB
        res.end();
      } else {
        res.setHeader("content-type", "application/json");
        res.end(JSON.stringify({ method: req.method, url: req.url, body }));
      }
    });
  });
  server.on("upgrade", (_req, socket: Socket) => {
    socket.write(
      "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n",
    );
    socket.on("data", (chunk) => socket.write(chunk));
    socket.on("end", () => socket.end());
    socket.on("error", () => {});
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

/** One request through the daemon's HTTP port, as a visitor. */
function visit(port: number, host: string, method: string, path: string, body = "") {
  return new Promise<{ status: number; body: string }>((resolve, reject) => {
    const req = request({ host: "127.0.0.1", port, method, path, headers: { host } }, (res) => {
      let text = "";
      res.setEncoding("latin1").on("data", (d: string) => (text += d));
      res.on("end", () => resolve({ status: res.statusCode!, body: text }));
    });
    req.on("error", reject).end(body);
  });
}

async function api<T>(inspector: string, path: string, init?: RequestInit): Promise<T> {
  const response = await fetch(inspector + path, init);
  assert.ok(response.ok, `${path}: ${response.status}`);
  return await response.json() as T;
}

describe("request inspector, end to end", () => {
  let daemon: Daemon;
  let httpPort: number;
  let app: Awaited<ReturnType<typeof localApp>>;
  let inspector: InspectorServer;
  let client: Client;

  before(async () => {
    daemon = await startDaemonInProcess({
      listen: { tcp: "127.0.0.1:0", websocket: null, admin: null, http: "127.0.0.1:0" },
      http: { domain: DOMAIN },
      clients: [{ name: "dev", token: TOKEN, expose: { hosts: ["*"] } }],
    });
    httpPort = portOf(daemon.addresses.http);
    app = await localApp();
    inspector = await startInspector({ address: "127.0.0.1:0" });
    client = await connect(`tcp://${daemon.addresses.tcp}`, {
      token: TOKEN,
      reconnect: false,
      inspector,
    });
    await client.expose({ http: "app", local: app.local });
  });

  after(async () => {
    await client?.close();
    await inspector?.close();
    daemon?.stop();
    app?.server.close();
    await cleanup();
  });

  it("lists each request with its visitor, headers, bodies and timings", async () => {
    const answer = await visit(httpPort, `app.${DOMAIN}`, "POST", "/echo?x=1", '{"hello":"world"}');
    assert.equal(answer.status, 200);
    const list = await waitFor(async () => {
      const { requests } = await api<{ requests: ExchangeSummary[] }>(
        inspector.url,
        "/api/requests",
      );
      return requests.length === 1 && requests[0].state === "done" ? requests : undefined;
    }, "the request listed as done");
    const [summary] = list;
    assert.equal(summary.method, "POST");
    assert.equal(summary.target, "/echo?x=1");
    assert.equal(summary.status, 200);
    assert.equal(summary.tunnel, "app");
    assert.match(
      summary.remote,
      /^127\.0\.0\.1:\d+$/,
      "the visitor's address from the stream header",
    );
    const detail = await api<ExchangeDetail>(inspector.url, `/api/requests/${summary.id}`);
    assert.equal(detail.requestBody.kind, "text");
    assert.equal(detail.requestBody.text, '{"hello":"world"}');
    assert.deepEqual(JSON.parse(detail.responseBody.text), {
      method: "POST",
      url: "/echo?x=1",
      body: '{"hello":"world"}',
    });
    const xff = detail.requestHeaders.find(([n]) => n.toLowerCase() === "x-forwarded-for");
    assert.equal(xff?.[1], "127.0.0.1");
    assert.ok(detail.firstByteMs! >= 0 && detail.endMs! >= detail.firstByteMs!);
  });

  it("decodes gzip for display, and records a body over the limit cut with its size", async () => {
    assert.equal((await fetch(inspector.url + "/api/requests", { method: "DELETE" })).status, 204);
    assert.equal((await visit(httpPort, `app.${DOMAIN}`, "GET", "/gz")).status, 200);
    const big = await visit(httpPort, `app.${DOMAIN}`, "GET", "/big");
    assert.equal(big.body.length, 100 * 1024, "the visitor got every byte");
    const done = await waitFor(async () => {
      const { requests } = await api<{ requests: ExchangeSummary[] }>(
        inspector.url,
        "/api/requests",
      );
      return requests.filter((r) => r.state === "done").length === 2 ? requests : undefined;
    }, "both listed as done");
    const byPath = new Map(done.map((r) => [r.target, r.id]));
    const gz = await api<ExchangeDetail>(inspector.url, `/api/requests/${byPath.get("/gz")}`);
    assert.equal(gz.responseBody.encoding, "gzip");
    assert.equal(gz.responseBody.text, "a gzipped hello");
    const cut = await api<ExchangeDetail>(inspector.url, `/api/requests/${byPath.get("/big")}`);
    assert.equal(cut.responseBody.size, 100 * 1024);
    assert.equal(cut.responseBody.truncated, true);
    assert.equal(cut.responseBody.captured, 64 * 1024);
  });

  it("lists a WebSocket upgrade with its frames counted per direction", async () => {
    const socket = connectTcp(httpPort, "127.0.0.1");
    let received = Buffer.alloc(0);
    socket.on("data", (chunk: Buffer) => (received = Buffer.concat([received, chunk])));
    socket.write(
      `GET /ws HTTP/1.1\r\nHost: app.${DOMAIN}\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n` +
        "Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n",
    );
    await waitFor(() => received.includes("\r\n\r\n"), "the 101");
    assert.match(received.toString("latin1"), /^HTTP\/1\.1 101/);
    const headLength = received.indexOf("\r\n\r\n") + 4;
    // Three masked text frames of 2 bytes each.
    const frame = [0x81, 0x82, 1, 2, 3, 4, 0x69 ^ 1, 0x21 ^ 2];
    socket.write(Uint8Array.from([...frame, ...frame, ...frame]));
    await waitFor(() => received.length >= headLength + 3 * frame.length, "the echo");
    socket.end();
    const ws = await waitFor(async () => {
      const { requests } = await api<{ requests: ExchangeSummary[] }>(
        inspector.url,
        "/api/requests?path=/ws",
      );
      return requests[0]?.state === "done" ? requests[0] : undefined;
    }, "the upgrade listed as done");
    assert.equal(ws.status, 101);
    assert.deepEqual(ws.upgrade, {
      framesIn: 3,
      framesOut: 3,
      bytesIn: 3 * frame.length,
      bytesOut: 3 * frame.length,
    });
  });

  it("replays a request to the local app, as it was and edited, beside the original", async () => {
    await visit(httpPort, `app.${DOMAIN}`, "PUT", "/item/1", "first");
    const original = await waitFor(async () => {
      const { requests } = await api<{ requests: ExchangeSummary[] }>(
        inspector.url,
        "/api/requests?path=/item/1",
      );
      return requests[0]?.state === "done" ? requests[0] : undefined;
    }, "the original listed");
    const replay = (edits: unknown) =>
      api<ExchangeDetail>(inspector.url, `/api/requests/${original.id}/replay`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify(edits),
      });
    const same = await replay({});
    assert.equal(same.replayOf, original.id);
    assert.equal(same.status, 200);
    const edited = await replay({ path: "/item/2", body: "second" });
    assert.deepEqual(JSON.parse(edited.responseBody.text), {
      method: "PUT",
      url: "/item/2",
      body: "second",
    });
    assert.deepEqual(app.seen.slice(-3), [
      "PUT /item/1 first",
      "PUT /item/1 first",
      "PUT /item/2 second",
    ]);
  });

  it("tunnelmux client --inspect: the command's inspector lists what its tunnel served", async () => {
    const cli = await startClient({
      server: `tcp://${daemon.addresses.tcp}`,
      token: TOKEN,
      args: ["--http", `cli=${app.local}`, "--inspect", "127.0.0.1:0"],
    });
    const listening = await cli.waitForLog((e) => e.msg === "inspector listening");
    const url = String(listening.url);
    assert.match(url, /^http:\/\/127\.0\.0\.1:\d+$/);
    await cli.waitForTunnel();
    assert.equal((await visit(httpPort, `cli.${DOMAIN}`, "GET", "/from-cli")).status, 200);
    const listed = await waitFor(async () => {
      const { requests } = await api<{ requests: ExchangeSummary[] }>(url, "/api/requests");
      return requests[0]?.state === "done" ? requests[0] : undefined;
    }, "the CLI's inspector lists the request");
    assert.equal(listed.target, "/from-cli");
    const page = await fetch(url + "/");
    assert.match(await page.text(), /tunnelmux inspector/);
    assert.equal(await withTimeout(cli.stop(), 15_000, "the client stops"), 0);
  });

  it("tunnelmux client refuses an inspector other machines could reach without a token", async () => {
    const cli = await startClient({
      server: `tcp://${daemon.addresses.tcp}`,
      token: TOKEN,
      args: ["--http", `open=${app.local}`, "--inspect", "0.0.0.0:0"],
    });
    const { code } = await withTimeout(cli.exited, 30_000, "the client exits");
    assert.equal(code, 1);
    assert.match(cli.stderr(), /--inspect: .*TUNNELMUX_INSPECT_TOKEN/);
  });
});
