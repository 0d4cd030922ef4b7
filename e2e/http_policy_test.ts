// A tunnel's policy.http end to end on one node: an SDK client exposes HTTP tunnels with basic
// auth, a bearer JWT (keys made here, the JWKS served here on 127.0.0.1), header rules and a Host
// rewrite; visitors are node:http requests and raw sockets on the daemon's HTTP port; the client
// CLI's --basic-auth and `tunnelmux hash-password` run as real processes.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { Agent, createServer, request, type Server } from "node:http";
import { exportJWK, generateKeyPair, SignJWT } from "jose";

/** A signing key as jose makes it. */
type Key = Awaited<ReturnType<typeof generateKeyPair>>["privateKey"];
import { type Client, type ClientError, connect, hashPassword } from "../client/mod.ts";
import type { Daemon } from "../daemon/daemon.ts";
import { validateConfig } from "../daemon/config/mod.ts";
import { portOf, startDaemonInProcess } from "./_in_process_daemon.ts";
import process from "node:process";
import { mkdtempSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Buffer } from "node:buffer";
import { runCommand, runtimeArgs, startClient } from "../testing/mod.ts";
import { tcpConnect } from "../testing/visitors.ts";
import { DEFAULT_TIMEOUT_MS, withTimeout } from "../testing/wait.ts";

const ALICE = "policy-test-alice-0123456789abcdef";
const BOB = "policy-test-bob-0123456789abcdefgh";
const DOMAIN = "tunnels.test";

interface Seen {
  url: string;
  headers: Record<string, string | string[] | undefined>;
}

/** A local app that answers what it was asked, with a header of its own to rewrite. */
function app(): Promise<{ server: Server; address: string; seen: Seen[] }> {
  const seen: Seen[] = [];
  const server = createServer((req, res) => {
    seen.push({ url: req.url!, headers: req.headers });
    res.setHeader("content-type", "application/json");
    res.setHeader("x-powered-by", "secret-stack");
    res.setHeader("x-app", "original");
    res.end(JSON.stringify({ url: req.url, headers: req.headers }));
  });
  return new Promise((resolve) =>
    server.listen(0, "127.0.0.1", () =>
      resolve({
        server,
        address: `127.0.0.1:${(server.address() as { port: number }).port}`,
        seen,
      }))
  );
}

interface Answer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: string;
  reused: boolean;
}

const CONFIG = {
  listen: { tcp: "127.0.0.1:0", websocket: null, admin: null, http: "127.0.0.1:0" },
  http: { domain: DOMAIN },
  clients: [
    { name: "alice", token: ALICE, expose: { hosts: ["*"] } },
    { name: "bob", token: BOB, expose: { hosts: ["*"] } },
  ],
};

describe("HTTP tunnels' policy.http", () => {
  let daemon: Daemon;
  let url: string;
  let httpPort: number;
  let client: Client;
  let web: Awaited<ReturnType<typeof app>>;
  let jwks: Server;
  let jwksUrl: string;
  /** Paths the JWKS server was asked for, in order. */
  const jwksAsked: string[] = [];
  let privateKey: Key;
  let otherKey: Key;

  before(async () => {
    const pair = await generateKeyPair("ES256");
    privateKey = pair.privateKey;
    otherKey = (await generateKeyPair("ES256")).privateKey;
    const jwk = { ...(await exportJWK(pair.publicKey)), kid: "k1", alg: "ES256", use: "sig" };
    jwks = createServer((req, res) => {
      jwksAsked.push(req.url!);
      res.setHeader("content-type", "application/json");
      res.end(JSON.stringify({ keys: [jwk] }));
    });
    await new Promise<void>((resolve) => jwks.listen(0, "127.0.0.1", resolve));
    jwksUrl = `http://127.0.0.1:${(jwks.address() as { port: number }).port}/jwks`;
    daemon = await startDaemonInProcess({
      listen: { tcp: "127.0.0.1:0", websocket: null, admin: null, http: "127.0.0.1:0" },
      http: { domain: DOMAIN },
      clients: [
        { name: "alice", token: ALICE, expose: { hosts: ["*"] } },
        { name: "bob", token: BOB, expose: { hosts: ["*"] } },
      ],
      // A client's own JWT rule may have the daemon fetch this JWKS, and no other URL.
      identityProviders: [jwksUrl],
    });
    url = `tcp://${daemon.addresses.tcp}`;
    httpPort = portOf(daemon.addresses.http);
    web = await app();
    client = await connect(url, { token: ALICE, reconnect: false });
  });

  after(async () => {
    await client.close();
    daemon.stop();
    web.server.close();
    jwks.close();
  });

  function get(
    host: string,
    headers: Record<string, string> = {},
    agent?: Agent,
    path = "/",
  ): Promise<Answer> {
    return withTimeout(
      new Promise((resolve, reject) => {
        const req = request(
          { host: "127.0.0.1", port: httpPort, path, agent, headers: { host, ...headers } },
          (res) => {
            let body = "";
            res.setEncoding("utf8").on("data", (d: string) => (body += d));
            res.on("end", () =>
              resolve({
                status: res.statusCode!,
                headers: res.headers,
                body,
                reused: req.reusedSocket,
              }));
          },
        );
        req.on("error", reject).end();
      }),
      DEFAULT_TIMEOUT_MS,
      `GET ${host}${path}`,
    );
  }

  const basic = (user: string, password: string) => `Basic ${btoa(`${user}:${password}`)}`;

  it("basic auth: 401 without or with wrong credentials, the app never sees them", async () => {
    const hash = await hashPassword("open sesame");
    const tunnel = await client.expose({
      local: web.address,
      http: "guarded",
      policy: { http: { basicAuth: [{ user: "alice", passwordHash: hash }] } },
    });
    const host = `guarded.${DOMAIN}`;
    const seenBefore = web.seen.length;
    const missing = await get(host);
    assert.equal(missing.status, 401);
    assert.equal(missing.headers["www-authenticate"], 'Basic realm="tunnelmux", charset="UTF-8"');
    assert.equal(missing.body, "unauthorized\n", "nothing about the rule or its users");
    const wrong = await get(host, { authorization: basic("alice", "open sesame!") });
    assert.equal(wrong.status, 401);
    assert.equal(wrong.body, "unauthorized\n");
    assert.equal((await get(host, { authorization: basic("mallory", "x") })).status, 401);
    assert.equal((await get(host, { authorization: "Basic !!!" })).status, 401);
    assert.equal(web.seen.length, seenBefore, "no refused request reached the app");

    const agent = new Agent({ keepAlive: true, maxSockets: 1 });
    try {
      const auth = { authorization: basic("alice", "open sesame") };
      const answers = [];
      for (let i = 0; i < 3; i++) answers.push(await get(host, auth, agent, `/ok${i}`));
      assert.deepEqual(answers.map((a) => a.status), [200, 200, 200]);
      assert.ok(answers[2].reused, "one kept-alive connection");
      for (const seen of web.seen.slice(seenBefore)) {
        assert.equal(seen.headers.authorization, undefined, "the credentials stop at the daemon");
      }
      // A wrong one on the same kept connection is refused, and the connection stays usable.
      assert.equal((await get(host, { authorization: basic("alice", "no") }, agent)).status, 401);
      assert.equal((await get(host, auth, agent, "/again")).status, 200);
    } finally {
      agent.destroy();
    }
    const gate = daemon.registry.hostRoute(host)!.gate!;
    // The right password hashed once (then taken from the cache), each wrong one of hers again.
    assert.equal(gate.hashed, 1 + 2, "alice's right password hashed once, her wrong ones each");
    // Mallory is refused without a hash (no such user), and counted with the wrong passwords.
    assert.equal(daemon.counters.get("http_policy_basic_wrong"), 3);
    assert.equal(daemon.counters.get("http_policy_basic_missing"), 2);
    await tunnel.close();
  });

  it("changes a tunnel's HTTP rules in place: same tunnel, same kept connection, the next request meets them", async () => {
    const [first, second] = [await hashPassword("first pw"), await hashPassword("second pw")];
    const tunnel = await client.expose({
      local: web.address,
      http: "changing",
      policy: { http: { basicAuth: [{ user: "ann", passwordHash: first }] } },
    });
    const host = `changing.${DOMAIN}`;
    const agent = new Agent({ keepAlive: true, maxSockets: 1 });
    try {
      const ann = { authorization: basic("ann", "first pw") };
      const ben = { authorization: basic("ben", "second pw") };
      assert.equal((await get(host, ann, agent, "/a")).status, 200);
      // The client's reload: other users, and a header for the app.
      await tunnel.setPolicy({
        http: {
          basicAuth: [{ user: "ben", passwordHash: second }],
          requestHeaders: { set: { "x-rules": "second" } },
        },
      });
      const refused = await get(host, ann, agent, "/b");
      assert.equal(refused.status, 401, "the old password no longer lets in");
      assert.ok(refused.reused, "on the connection kept alive from before");
      const let_in = await get(host, ben, agent, "/c");
      assert.equal(let_in.status, 200);
      assert.ok(let_in.reused);
      assert.equal(web.seen.at(-1)!.headers["x-rules"], "second");
      const held = daemon.registry.tunnels().find((t) => t.id === tunnel.id);
      assert.ok(held, "the same tunnel");
      assert.deepEqual(
        (held.policy.http?.basicAuth ?? []).map((u) => u.user),
        ["ben"],
        "its rules in force as the admin API shows them",
      );
      // A tunnel's path is its place: another one is refused, naming the field.
      await assert.rejects(
        tunnel.setPolicy({ http: { pathPrefix: "/elsewhere" } }),
        /policy\.http\.pathPrefix/,
      );
      // The operator's reload: its header rules join the client's, the tunnel kept.
      const reloaded = validateConfig({
        ...CONFIG,
        identityProviders: [jwksUrl],
        clients: [
          {
            ...CONFIG.clients[0],
            visitors: { http: { requestHeaders: { set: { "x-operator": "yes" } } } },
          },
          CONFIG.clients[1],
        ],
      });
      assert.deepEqual(reloaded.errors, []);
      daemon.reload(reloaded.config!);
      const operator = await withTimeout(
        (async () => {
          for (let i = 0; i < 50; i++) {
            const answer = await get(host, ben, agent, "/d");
            if (web.seen.at(-1)!.headers["x-operator"] === "yes") return answer;
            await new Promise((resolve) => setTimeout(resolve, 20));
          }
          throw new Error("the operator's rules never came into force");
        })(),
        DEFAULT_TIMEOUT_MS,
        "the operator's rules in force",
      );
      assert.equal(operator.status, 200);
      assert.ok(operator.reused);
      assert.equal(web.seen.at(-1)!.headers["x-rules"], "second", "the client's rules kept");
      assert.equal((await get(host, ann, agent, "/e")).status, 401);
      daemon.reload(validateConfig({ ...CONFIG, identityProviders: [jwksUrl] }).config!);
    } finally {
      agent.destroy();
      await tunnel.close();
    }
  });

  it("a request with a body refused by the policy closes the connection", async () => {
    const hash = await hashPassword("pw");
    const tunnel = await client.expose({
      local: web.address,
      http: "posted",
      policy: { http: { basicAuth: [{ user: "u", passwordHash: hash }] } },
    });
    const socket = await tcpConnect(httpPort);
    try {
      const chunks: Uint8Array[] = [];
      const closed = new Promise<void>((resolve) => {
        socket.on("data", (c: Uint8Array) => chunks.push(c));
        socket.on("end", () => resolve());
      });
      socket.write(
        `POST /x HTTP/1.1\r\nHost: posted.${DOMAIN}\r\nAuthorization: ${
          basic("u", "wrong")
        }\r\nContent-Length: 5\r\n\r\nhello`,
      );
      await withTimeout(closed, DEFAULT_TIMEOUT_MS, "the daemon ended the connection");
      const text = Buffer.concat(chunks).toString("latin1");
      assert.match(text, /^HTTP\/1\.1 401 /);
      assert.match(text, /\r\nconnection: close\r\n/);
    } finally {
      socket.destroy();
      await tunnel.close();
    }
  });

  it("pipelined requests wait for the password hash, and are answered in order", async () => {
    const hash = await hashPassword("pipe");
    const tunnel = await client.expose({
      local: web.address,
      http: "piped",
      policy: { http: { basicAuth: [{ user: "p", passwordHash: hash }] } },
    });
    const socket = await tcpConnect(httpPort);
    try {
      const chunks: Uint8Array[] = [];
      socket.on("data", (c: Uint8Array) => chunks.push(c));
      const head = (path: string, password: string, last = false) =>
        `GET ${path} HTTP/1.1\r\nHost: piped.${DOMAIN}\r\nAuthorization: ${
          basic("p", password)
        }\r\n${last ? "Connection: close\r\n" : ""}\r\n`;
      // In one write: a wrong password (hashed, refused), a right one (hashed), the right one
      // again (remembered), each waiting for the one before.
      socket.write(head("/1", "nope") + head("/2", "pipe") + head("/3", "pipe", true));
      await withTimeout(
        new Promise<void>((resolve) => socket.on("end", () => resolve())),
        DEFAULT_TIMEOUT_MS,
        "the three answers",
      );
      const text = Buffer.concat(chunks).toString("latin1");
      const statuses = [...text.matchAll(/HTTP\/1\.1 (\d{3}) /g)].map((m) => Number(m[1]));
      assert.deepEqual(statuses, [401, 200, 200]);
      const urls = [...text.matchAll(/"url":"([^"]+)"/g)].map((m) => m[1]);
      assert.deepEqual(urls, ["/2", "/3"]);
    } finally {
      socket.destroy();
      await tunnel.close();
    }
  });

  it("a JWKS or OIDC issuer outside the operator's identityProviders is refused", async () => {
    const internal = "http://127.0.0.1:1/secret";
    for (
      const policy of [
        { http: { jwt: { jwksUrl: internal, issuer: "https://idp.test", audience: "api" } } },
        { http: { jwt: { jwksUrl: `${jwksUrl}x`, issuer: "https://idp.test", audience: "api" } } },
        { http: { oidc: { issuer: internal, clientId: "c" } } },
      ]
    ) {
      await assert.rejects(
        client.expose({ local: web.address, http: "ssrf", policy }),
        /is not in the daemon's identityProviders/,
      );
    }
    // Nor may a tunnel's rules be changed to one afterwards.
    const tunnel = await client.expose({ local: web.address, http: "later" });
    try {
      await assert.rejects(
        tunnel.setPolicy({
          http: { jwt: { jwksUrl: internal, issuer: "https://idp.test", audience: "api" } },
        }),
        /is not in the daemon's identityProviders/,
      );
    } finally {
      await tunnel.close();
    }
  });

  it("an operator's reload dropping a client's identity provider: every request refused, nothing fetched; restored, served", async () => {
    // A path of its own on the JWKS server, fetched by nothing before: a fetch would show.
    const providerUrl = `${jwksUrl}/dropped`;
    const jwt = { jwksUrl: providerUrl, issuer: "https://idp.test", audience: "api" };
    const tunnel = await client.expose({
      local: web.address,
      http: "dropped",
      policy: { http: { jwt } },
    });
    const host = `dropped.${DOMAIN}`;
    const token = await new SignJWT({ sub: "alice" }).setProtectedHeader({
      alg: "ES256",
      kid: "k1",
    })
      .setIssuer("https://idp.test").setAudience("api").setExpirationTime("5m").sign(privateKey);
    const bearer = { authorization: `Bearer ${token}` };
    const events: { type: string; fields: Record<string, unknown> }[] = [];
    const unsubscribe = daemon.events.subscribe((event) => events.push(event));
    const refusedBefore = daemon.counters.get("policy_not_allowed");
    const seenBefore = web.seen.length;
    try {
      // The operator lists another provider only.
      const other = validateConfig({ ...CONFIG, identityProviders: ["https://idp.example.com/"] });
      assert.deepEqual(other.errors, []);
      daemon.reload(other.config!);
      for (const headers of [bearer, {}]) {
        const answer = await get(host, headers);
        assert.equal(answer.status, 403, "refused as a withheld rule, not asked for a token");
        assert.match(answer.body, /Forbidden/);
      }
      assert.deepEqual(
        jwksAsked.filter((path) => path === "/jwks/dropped"),
        [],
        "no request reached the provider the operator dropped",
      );
      assert.equal(web.seen.length, seenBefore, "nothing reached the app");
      assert.equal(daemon.counters.get("policy_not_allowed"), refusedBefore + 2);
      const withheld = events.filter((e) => e.type === "policy_withheld");
      assert.equal(withheld.length, 1);
      assert.equal(withheld[0].fields.tunnel, tunnel.id);
      assert.match(
        String(withheld[0].fields.reason),
        /policy\.http\.jwt\.jwksUrl: .* is not in the daemon's identityProviders/,
      );
      assert.ok(
        events.some((e) =>
          e.type === "visitor_refused" && e.fields.reason === "policy_not_allowed"
        ),
      );
      // The client asking for the same provider again is refused, as a new expose would be.
      await assert.rejects(
        tunnel.setPolicy({ http: { jwt } }),
        /is not in the daemon's identityProviders/,
      );
      assert.equal((await get(host, bearer)).status, 403, "still withheld");

      // The provider listed again: the client's rules are back in force, fetched and served.
      daemon.reload(validateConfig({ ...CONFIG, identityProviders: [jwksUrl] }).config!);
      const served = await get(host, bearer);
      assert.equal(served.status, 200);
      assert.deepEqual(jwksAsked.filter((path) => path === "/jwks/dropped"), ["/jwks/dropped"]);
      assert.equal((await get(host)).status, 401, "the JWT rule in force again");
    } finally {
      unsubscribe();
      daemon.reload(validateConfig({ ...CONFIG, identityProviders: [jwksUrl] }).config!);
      await tunnel.close();
    }
  });

  it("a bearer JWT: issuer, audience, expiry and signature checked against the JWKS", async () => {
    const tunnel = await client.expose({
      local: web.address,
      http: "api",
      policy: { http: { jwt: { jwksUrl, issuer: "https://idp.test", audience: "api" } } },
    });
    const host = `api.${DOMAIN}`;
    const token = (
      claims: Record<string, unknown>,
      { key = privateKey, expires = "5m" as string | number } = {},
    ) =>
      new SignJWT(claims).setProtectedHeader({ alg: "ES256", kid: "k1" })
        .setIssuer("https://idp.test").setAudience("api").setIssuedAt().setExpirationTime(expires)
        .sign(key);
    const good = await token({ sub: "alice" });
    const ok = await get(host, { authorization: `Bearer ${good}` });
    assert.equal(ok.status, 200);
    assert.equal(
      JSON.parse(ok.body).headers.authorization,
      `Bearer ${good}`,
      "the app may read the token's claims",
    );
    const missing = await get(host);
    assert.equal(missing.status, 401);
    assert.equal(missing.headers["www-authenticate"], 'Bearer realm="tunnelmux"');
    const refused = [
      await token({}, { expires: Math.floor(Date.now() / 1000) - 60 }),
      await token({}, { key: otherKey }),
      await new SignJWT({}).setProtectedHeader({ alg: "ES256", kid: "k1" }).setIssuer("other")
        .setAudience("api").setExpirationTime("5m").sign(privateKey),
      await new SignJWT({}).setProtectedHeader({ alg: "ES256", kid: "k1" })
        .setIssuer("https://idp.test").setAudience("web").setExpirationTime("5m").sign(privateKey),
      // No expiry: refused (a token must end).
      await new SignJWT({}).setProtectedHeader({ alg: "ES256", kid: "k1" })
        .setIssuer("https://idp.test").setAudience("api").sign(privateKey),
    ];
    for (const bad of refused) {
      const answer = await get(host, { authorization: `Bearer ${bad}` });
      assert.equal(answer.status, 401);
      assert.equal(
        answer.headers["www-authenticate"],
        'Bearer realm="tunnelmux", error="invalid_token"',
      );
      assert.equal(answer.body, "unauthorized\n");
    }
    assert.equal(daemon.counters.get("http_policy_jwt_invalid"), refused.length);
    await tunnel.close();
  });

  it("header rules both ways and the Host the app sees", async () => {
    const tunnel = await client.expose({
      local: web.address,
      http: "shaped",
      policy: {
        http: {
          requestHeaders: {
            add: { "x-added": "yes" },
            set: { "x-user": "nobody" },
            remove: ["x-secret"],
          },
          responseHeaders: {
            set: { "x-app": "rewritten" },
            add: { "x-frame-options": "DENY" },
            remove: ["x-powered-by"],
          },
          hostRewrite: "localhost:3000",
        },
      },
    });
    const answer = await get(`shaped.${DOMAIN}`, {
      "x-user": "admin",
      "x-secret": "s",
      "x-kept": "k",
    });
    assert.equal(answer.status, 200);
    const seen = JSON.parse(answer.body).headers;
    assert.equal(seen.host, "localhost:3000");
    assert.equal(seen["x-forwarded-host"], `shaped.${DOMAIN}`, "the visitor's host, forwarded");
    assert.equal(seen["x-user"], "nobody", "set replaces the visitor's own");
    assert.equal(seen["x-added"], "yes");
    assert.equal(seen["x-secret"], undefined);
    assert.equal(seen["x-kept"], "k");
    assert.equal(answer.headers["x-app"], "rewritten");
    assert.equal(answer.headers["x-frame-options"], "DENY");
    assert.equal(answer.headers["x-powered-by"], undefined);
    assert.equal(answer.headers["content-type"], "application/json");
    await tunnel.close();
  });

  it("several tunnels of one client under one name, by the longest path prefix", async () => {
    const apps = [await app(), await app(), await app()];
    const bob = await connect(url, { token: BOB, reconnect: false });
    const root = await client.expose({ local: apps[0].address, http: "shop" });
    const api = await client.expose({
      local: apps[1].address,
      http: "shop",
      policy: { http: { pathPrefix: "/api/" } },
    });
    const v1 = await client.expose({
      local: apps[2].address,
      http: "shop",
      policy: { http: { pathPrefix: "/api/v1" } },
    });
    try {
      assert.equal(api.url, `http://shop.${DOMAIN}:${httpPort}/api/`);
      const host = `shop.${DOMAIN}`;
      const agent = new Agent({ keepAlive: true, maxSockets: 1 });
      const expected: [string, number][] = [
        ["/", 0],
        ["/apix", 0],
        ["/api", 1],
        ["/api?q=1", 1],
        ["/api/x", 1],
        ["/api/v1", 2],
        ["/api/v1/orders/7", 2],
        ["/api/v10", 1],
        ["/", 0],
      ];
      try {
        for (const [path, index] of expected) {
          const counts = apps.map((a) => a.seen.length);
          const answer = await get(host, {}, agent, path);
          assert.equal(answer.status, 200, path);
          const grew = apps.map((a, i) => a.seen.length - counts[i]);
          assert.deepEqual(grew, apps.map((_, i) => i === index ? 1 : 0), `${path} → app ${index}`);
          assert.equal(apps[index].seen.at(-1)!.url, path, "the path goes on whole");
        }
      } finally {
        agent.destroy();
      }
      // Another client takes no path of alice's name, nor the same prefix twice.
      const taken = await bob.expose({
        local: apps[0].address,
        http: "shop",
        policy: { http: { pathPrefix: "/admin" } },
      }).then(() => "exposed", (error: ClientError) => error.code);
      assert.equal(taken, "conflict");
      const twice = await client.expose({
        local: apps[0].address,
        http: "shop",
        policy: { http: { pathPrefix: "/api" } },
      }).then(() => "exposed", (error: ClientError) => error.code);
      assert.equal(twice, "conflict");
      // A prefix let go: its paths go to the name's own tunnel again.
      await v1.close();
      const apiSeen = apps[1].seen.length;
      assert.equal((await get(host, {}, undefined, "/api/v1/x")).status, 200);
      assert.equal(apps[1].seen.length, apiSeen + 1, "now the /api tunnel's");
    } finally {
      await Promise.all([root.close(), api.close(), bob.close()]);
      for (const a of apps) a.server.close();
    }
  });

  it("refuses a policy it cannot take, naming the field", async () => {
    const refusal = async (policy: Record<string, unknown>, http: string | null = "p") => {
      try {
        await client.expose({
          local: web.address,
          ...(http ? { http } : { remotePort: 0 }),
          policy: policy as never,
        });
        return "exposed";
      } catch (error) {
        return `${(error as ClientError).code}: ${(error as Error).message}`;
      }
    };
    // The SDK checks a policy as the daemon would, before sending it.
    assert.match(
      await refusal({ http: { basicAuth: [{ user: "a", password: "plain" }] } }),
      /bad visitor policy: policy\.http\.basicAuth\[0\]\.password: unknown key/,
    );
    assert.match(
      await refusal({ http: { requestHeaders: { set: { "x-a": "1" } } } }, null),
      /not_allowed: .*policy\.http: only an HTTP tunnel/,
    );
    assert.deepEqual(daemon.registry.tunnels().map((t) => t.host), []);
  });

  it("the CLI: hash-password, and --basic-auth with the hash", async () => {
    const hashed = await runCommand(
      process.execPath,
      runtimeArgs("cli/main.ts", ["hash-password"]),
      { input: "p4ss\n" },
    );
    assert.equal(hashed.code, 0, hashed.stderr);
    const hash = hashed.stdout.trim();
    assert.match(hash, /^scrypt:32768:8:1:/);
    const cli = await startClient({
      server: url,
      token: ALICE,
      args: ["--http", `cli=${web.address}`, "--basic-auth", `bob:${hash}`],
    });
    try {
      await cli.waitForTunnel();
      const host = `cli.${DOMAIN}`;
      assert.equal((await get(host)).status, 401);
      assert.equal((await get(host, { authorization: basic("bob", "p4ss\n") })).status, 401);
      assert.equal((await get(host, { authorization: basic("bob", "p4ss") })).status, 200);
    } finally {
      await cli.stop();
    }
  });

  it("the client's config reload changes basic-auth users in place: the kept connection needs the new password", async () => {
    const dir = mkdtempSync(join(tmpdir(), "tunnelmux-http-reload-"));
    const file = join(dir, "client.jsonc");
    const [first, second] = [await hashPassword("first pw"), await hashPassword("second pw")];
    const write = (passwordHash: string, user: string) => {
      writeFileSync(
        `${file}.new`,
        JSON.stringify({
          http: [`reloaded=${web.address}`],
          httpPolicy: { basicAuth: [{ user, passwordHash }] },
        }),
      );
      renameSync(`${file}.new`, file);
    };
    write(first, "ann");
    const cli = await startClient({
      server: url,
      token: ALICE,
      args: ["--config", file, "--watch-config"],
    });
    const agent = new Agent({ keepAlive: true, maxSockets: 1 });
    try {
      await cli.waitForTunnel();
      const host = `reloaded.${DOMAIN}`;
      const [ann, ben] = [basic("ann", "first pw"), basic("ben", "second pw")];
      assert.equal((await get(host, { authorization: ann }, agent)).status, 200);
      const from = cli.logs().length;
      write(second, "ben");
      await cli.waitForLog((e) => e.msg === "visitor policy changed", DEFAULT_TIMEOUT_MS, from);
      const refused = await get(host, { authorization: ann }, agent);
      assert.equal(refused.status, 401, "the old user is gone");
      assert.ok(refused.reused, "on the connection kept from before the reload");
      const admitted = await get(host, { authorization: ben }, agent);
      assert.equal(admitted.status, 200);
      assert.ok(admitted.reused);
      assert.equal(cli.logs().filter((e) => e.msg === "tunnel up").length, 1, "never re-exposed");
    } finally {
      agent.destroy();
      await cli.stop();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
