// HTTP tunnels by host name, end to end on one node: a daemon with a shared HTTP port
// and a base domain, SDK clients holding names, the client CLI's --http, curl and node:http as
// visitors. The daemon runs in this process; the local services are node:http servers.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { Agent, createServer, request, type Server } from "node:http";
import { createServer as createTcpServer, type Socket } from "node:net";
import { type Client, type ClientError, connect } from "../client/mod.ts";
import { validateConfig } from "../daemon/config/mod.ts";
import type { Daemon } from "../daemon/daemon.ts";
import { portOf, startDaemonInProcess } from "./_in_process_daemon.ts";
import { renderMetrics } from "../daemon/admin/api/metrics.ts";
import { tunnelList } from "../daemon/registry/views.ts";
import { startClient } from "../testing/mod.ts";
import { DEFAULT_TIMEOUT_MS, withTimeout } from "../testing/wait.ts";

const ALICE = "http-test-alice-0123456789abcdef";
const BOB = "http-test-bob-0123456789abcdefgh";
const DOMAIN = "tunnels.test";

/** A local web app that says who it is and what it was asked. */
function app(name: string): Promise<{ server: Server; address: string }> {
  const server = createServer((req, res) => {
    res.setHeader("content-type", "application/json");
    res.end(JSON.stringify({ name, url: req.url, forwardedHost: req.headers["x-forwarded-host"] }));
  });
  return new Promise((resolve) =>
    server.listen(
      0,
      "127.0.0.1",
      () =>
        resolve({ server, address: `127.0.0.1:${(server.address() as { port: number }).port}` }),
    )
  );
}

describe("HTTP tunnels by host name", () => {
  let daemon: Daemon;
  let url: string;
  let httpPort: number;
  const clients: Client[] = [];
  const apps: { server: Server; address: string }[] = [];

  const config = {
    listen: { tcp: "127.0.0.1:0", websocket: null, admin: null, http: "127.0.0.1:0" },
    http: { domain: DOMAIN },
    clients: [
      { name: "alice", token: ALICE, expose: { hosts: ["*", "shop.example.org"] } },
      { name: "bob", token: BOB, expose: { hosts: ["bob"] } },
    ],
  };

  before(async () => {
    daemon = await startDaemonInProcess(config);
    url = `tcp://${daemon.addresses.tcp}`;
    httpPort = portOf(daemon.addresses.http);
    apps.push(await app("one"), await app("two"));
    clients.push(
      await connect(url, { token: ALICE, reconnect: false }),
      await connect(url, { token: BOB, reconnect: false }),
    );
  });

  after(async () => {
    await Promise.all(clients.map((c) => c.close()));
    daemon.stop();
    for (const a of apps) a.server.close();
  });

  function get(
    agent: Agent,
    host: string,
    path = "/",
  ): Promise<{ status: number; body: string; reused: boolean }> {
    return new Promise((resolve, reject) => {
      const req = request(
        { host: "127.0.0.1", port: httpPort, path, agent, headers: { host } },
        (res) => {
          let body = "";
          res.setEncoding("utf8").on("data", (d: string) => (body += d));
          res.on("end", () => resolve({ status: res.statusCode!, body, reused: req.reusedSocket }));
        },
      );
      req.on("error", reject).end();
    });
  }

  it("a label under the base domain and an allowed full name, each reaching its app", async () => {
    const [alice, bob] = clients;
    const one = await alice.expose({ local: apps[0].address, http: "one" });
    const shop = await alice.expose({ local: apps[1].address, http: "Shop.Example.org" });
    const mine = await bob.expose({ local: apps[1].address, http: "bob" });
    assert.equal(one.remoteHost, `one.${DOMAIN}`);
    assert.equal(one.remotePort, httpPort);
    assert.equal(one.url, `http://one.${DOMAIN}:${httpPort}/`);
    assert.equal(shop.remoteHost, "shop.example.org");
    const agent = new Agent({ keepAlive: true, maxSockets: 1 });
    try {
      // One kept-alive connection, three hosts, three routes.
      assert.equal(JSON.parse((await get(agent, `one.${DOMAIN}`, "/a")).body).name, "one");
      assert.equal(JSON.parse((await get(agent, "shop.example.org", "/b")).body).name, "two");
      const third = JSON.parse((await get(agent, `bob.${DOMAIN}:${httpPort}`, "/c")).body);
      assert.deepEqual(third, {
        name: "two",
        url: "/c",
        forwardedHost: `bob.${DOMAIN}:${httpPort}`,
      });
      assert.equal((await get(agent, `nobody.${DOMAIN}`)).status, 404);
    } finally {
      agent.destroy();
    }
    // Metrics by host and status; made-up hosts count together, not one series each.
    const metrics = renderMetrics(daemon);
    assert.match(
      metrics,
      /tunnelmux_http_requests_total\{host="one\.tunnels\.test",code="200"\} 1\n/,
    );
    assert.match(metrics, /tunnelmux_http_requests_total\{host="\(unknown\)",code="404"\} \d+\n/);
    assert.doesNotMatch(metrics, /host="nobody/);
    // The tunnels count their requests' bytes, as listed to operators (the front pipes them,
    // not a splice): each way, at least what the app's answer held.
    const listed = tunnelList(daemon.registry, daemon.certificates).find((t) => t.id === one.id)!;
    assert.equal(listed.connections, 1);
    assert.ok(listed.bytesFromVisitors > "GET /a HTTP/1.1\r\n".length, "request bytes counted");
    assert.ok(listed.bytesToVisitors > '{"name":"one"}'.length, "response bytes counted");
    await Promise.all([one.close(), shop.close(), mine.close()]);
    // Closed: the name is free and unknown again.
    assert.equal((await get(new Agent(), `one.${DOMAIN}`)).status, 404);
  });

  it("refuses names the client may not hold, and names another tunnel holds", async () => {
    const [alice, bob] = clients;
    const refusal = async (client: Client, name: string) => {
      try {
        await client.expose({ local: apps[0].address, http: name });
        return "exposed";
      } catch (error) {
        return (error as ClientError).code;
      }
    };
    assert.equal(await refusal(bob, "other"), "not_allowed"); // bob may hold "bob" only
    assert.equal(await refusal(alice, "deep.one"), "not_allowed"); // not under the domain
    assert.equal(await refusal(alice, "bad_name"), "not_allowed");
    const held = await alice.expose({ local: apps[0].address, http: "taken" });
    try {
      assert.equal(await refusal(alice, "taken"), "conflict");
    } finally {
      await held.close();
    }
  });

  it("curl reaches an app through the client CLI's --http, by name with --resolve", async () => {
    const cli = await startClient({
      server: url,
      token: ALICE,
      args: ["--http", `cli=${apps[0].address}`],
    });
    try {
      const { entry } = await cli.waitForTunnel();
      assert.equal(entry.url, `http://cli.${DOMAIN}:${httpPort}/`);
      const out = await new Promise<string>((resolve, reject) =>
        execFile(
          "curl",
          [
            "-sS",
            "--resolve",
            `cli.${DOMAIN}:${httpPort}:127.0.0.1`,
            `http://cli.${DOMAIN}:${httpPort}/via-curl`,
          ],
          { timeout: 10_000 },
          (error, stdout) => error ? reject(error) : resolve(stdout),
        )
      );
      assert.deepEqual(JSON.parse(out), {
        name: "one",
        url: "/via-curl",
        forwardedHost: `cli.${DOMAIN}:${httpPort}`,
      });
    } finally {
      await cli.stop();
    }
  });

  it("answers 502 saying the local service refused, when nothing listens at its address", async () => {
    // A port that was just free: nothing listens there now.
    const gone = createTcpServer();
    await new Promise<void>((resolve) => gone.listen(0, "127.0.0.1", resolve));
    const address = `127.0.0.1:${(gone.address() as { port: number }).port}`;
    await new Promise((resolve) => gone.close(resolve));
    const [alice] = clients;
    const down = await alice.expose({ local: address, http: "down" });
    try {
      const answer = await withTimeout(
        get(new Agent(), `down.${DOMAIN}`),
        DEFAULT_TIMEOUT_MS,
        "502",
      );
      assert.equal(answer.status, 502);
      assert.equal(
        answer.body,
        "the tunnel's local service refused the connection (is it running?)\n",
      );
    } finally {
      await down.close();
    }
  });

  it("answers 504 for a service that never answers, after limits.httpResponseTimeoutMs as reloaded", async () => {
    // A local service that takes the connection and never says a word.
    const held: Socket[] = [];
    const frozen = createTcpServer((socket) => void held.push(socket));
    await new Promise<void>((resolve) => frozen.listen(0, "127.0.0.1", resolve));
    const address = `127.0.0.1:${(frozen.address() as { port: number }).port}`;
    const [alice] = clients;
    const one = await alice.expose({ local: apps[0].address, http: "one" });
    const stuck = await alice.expose({ local: address, http: "stuck" });
    const agent = new Agent({ keepAlive: true, maxSockets: 1 });
    try {
      assert.equal((await get(agent, `one.${DOMAIN}`)).status, 200);
      // A reload shortens the wait, for the next request of the connection already open.
      const short = validateConfig({ ...config, limits: { httpResponseTimeoutMs: 300 } });
      daemon.reload(short.config!);
      const answer = await withTimeout(get(agent, `stuck.${DOMAIN}`), DEFAULT_TIMEOUT_MS, "504");
      assert.deepEqual(answer, { status: 504, body: "no response in time\n", reused: true });
    } finally {
      daemon.reload(validateConfig(config).config!);
      agent.destroy();
      await Promise.all([one.close(), stuck.close()]);
      for (const socket of held) socket.destroy();
      frozen.close();
    }
  });
});
