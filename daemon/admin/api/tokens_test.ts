// Minted tokens: first the endpoints over small fakes (app.request on the sub-app, with a real
// token store kept in memory: every answer and error code), then over real HTTP against a daemon
// in this process, with real SDK clients: scopes enforced, revocation and expiry ending
// sessions, persistence across restarts, validation, name conflicts, reloads, and listings that
// never carry a secret.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { mkdtemp, readFile, rm, stat } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import process from "node:process";
import { Client } from "../../../client/client.ts";
import type { ClientError } from "../../../client/errors.ts";
import { ResetReason } from "../../../tunnel/stream/reset_reasons.ts";
import type { YamuxError } from "../../../protocol/errors.ts";
import type { TransportListener } from "../../../protocol/transport.ts";
import { pattern, roundTrip } from "../../../tools/echo_check.ts";
import { listenTcp } from "../../../transport/mod.ts";
import { Logger } from "../../../util/log.ts";
import { Daemon } from "../../daemon.ts";
import { validateConfig } from "../../config/mod.ts";
import { hashToken } from "../../config/token_hash.ts";
import { type AdminServer, startAdmin } from "../start.ts";
import { errorCode } from "../_admin_fixture.ts";
import { waitFor } from "../../../testing/wait.ts";
import { type DaemonEvent, EventFeed } from "../../events.ts";
import { fakeSession, memoryRegistry } from "../../registry/_fake_handles.ts";
import { assertError, call, json, served, testConfig } from "./_fake_deps.ts";
import { tokensApi } from "./tokens.ts";

const ADMIN_TOKEN = "tokens-admin-token-0123456789abcdef";
const ALICE_TOKEN = "tokens-alice-token-0123456789abcdef";

interface TokenJson {
  id: string;
  name: string;
  token?: string;
  scopes: Record<string, unknown>;
  createdAt: string;
  expiresAt: string | null;
  active: boolean;
  problem: string | null;
  sessions: string[];
}

/** A TCP echo server on 127.0.0.1. */
function echoServer(): Promise<TransportListener> {
  return listenTcp({ hostname: "127.0.0.1", port: 0 }, (t) => {
    t.start({
      data: (chunk) => {
        if (!t.write(chunk)) t.pause();
      },
      drain: () => t.resume(),
      end: () => t.end(),
      close: () => {},
    });
  });
}

/** The raw config document of the test daemons; `clients` may add to alice. */
function configDoc(dataDir: string, clients: Record<string, unknown>[] = []) {
  return {
    listen: { tcp: "127.0.0.1:0", websocket: null, admin: "127.0.0.1:0" },
    dataDir,
    adminToken: ADMIN_TOKEN,
    clients: [{ name: "alice", token: ALICE_TOKEN, services: { use: ["echo"] } }, ...clients],
  };
}

function config(dataDir: string, clients: Record<string, unknown>[] = []) {
  const result = validateConfig(configDoc(dataDir, clients));
  assert.deepEqual(result.errors, []);
  return result.config!;
}

/** A daemon with its admin API on `dataDir`, and helpers bound to it. */
async function startDaemon(dataDir: string) {
  const log = new Logger({ level: "error", format: "json", sink: () => {} });
  const daemon = new Daemon(config(dataDir), { log });
  await daemon.start();
  const admin: AdminServer = await startAdmin(daemon, {
    address: daemon.config.listen.admin!,
    log,
  });
  const clients: Client[] = [];
  const api = (path: string, init: RequestInit = {}) => {
    const headers = new Headers(init.headers);
    if (!headers.has("authorization")) headers.set("authorization", `Bearer ${ADMIN_TOKEN}`);
    return fetch(admin.url + path, { ...init, headers });
  };
  return {
    daemon,
    api,
    mint: (body: unknown) =>
      api("/v1/tokens", {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: typeof body === "string" ? body : JSON.stringify(body),
      }),
    /** A client with `token` (no reconnect); `ready` is its first session, or the refusal. */
    client(token: string) {
      const client = new Client(`tcp://${daemon.addresses.tcp}`, { token, reconnect: false });
      clients.push(client);
      const welcome = new Promise<{ session: string; client: string }>((resolve) =>
        client.on("ready", resolve)
      );
      return { client, welcome };
    },
    async stop() {
      await Promise.all(clients.map((c) => c.close()));
      daemon.stop();
      await admin.close();
    },
  };
}

type Daemonish = Awaited<ReturnType<typeof startDaemon>>;

/** The token endpoints over an in-memory registry and token store, with what they publish. */
function tokensOver() {
  const registry = memoryRegistry();
  const events = new EventFeed();
  const published: DaemonEvent[] = [];
  events.subscribe((event) => published.push(event));
  const app = served(tokensApi({ registry, events, config: testConfig() }));
  return { registry, app, published };
}

describe("token endpoints (over fakes)", () => {
  it("mints a token (201, no-store), shown once, and publishes it", async () => {
    const { registry, app, published } = tokensOver();
    try {
      const { status, headers, body } = await call(
        app,
        "/v1/tokens",
        json("POST", { name: "ci", services: { use: ["box"] }, expiresIn: 60 }),
      );
      assert.equal(status, 201, JSON.stringify(body));
      assert.equal(headers.get("cache-control"), "no-store");
      assert.match(body.id, /^tok_[0-9a-f]{16}$/);
      assert.equal(body.name, "ci");
      assert.equal(typeof body.token, "string");
      assert.deepEqual(body.scopes, { services: { use: ["box"] } });
      assert.ok(Date.parse(body.expiresAt) > Date.now());
      assert.equal(body.active, true);
      assert.deepEqual(body.sessions, []);
      assert.deepEqual(body.warnings, []);
      assert.equal(typeof body.limits, "object");
      assert.deepEqual(
        published.map((e) => [e.type, e.fields]),
        [["token_minted", { token: body.id, client: "ci" }]],
      );
      // Listed and shown afterwards, never with the token or its hash.
      const list = await call(app, "/v1/tokens");
      assert.deepEqual(list.body.tokens.map((t: { id: string }) => t.id), [body.id]);
      const shown = await call(app, `/v1/tokens/${body.id}`);
      assert.equal(shown.status, 200);
      for (const view of [list.body.tokens[0], shown.body]) {
        assert.equal(view.token, undefined);
        assert.equal(view.hash, undefined);
      }
    } finally {
      registry.tokens.close(); // its expiry timer
    }
  });

  it("answers 400 to a body that is not JSON or has a bad field, naming the field", async () => {
    const { app, published } = tokensOver();
    await assertError(app, "/v1/tokens", 400, "bad_request", json("POST", "{ nope"));
    const bad = await call(app, "/v1/tokens", json("POST", { name: "x1", expiresIn: 0 }));
    assert.equal(bad.status, 400);
    assert.equal(bad.body.error.code, "bad_request");
    assert.equal(bad.body.error.field, "expiresIn");
    assert.deepEqual(bad.body.error.issues.map((i: { field: string }) => i.field), ["expiresIn"]);
    const scopes = await call(app, "/v1/tokens", json("POST", { name: "x1", limits: { x: 1 } }));
    assert.equal(scopes.status, 400);
    assert.equal(scopes.body.error.field, "limits.x");
    assert.deepEqual(published, []);
  });

  it("answers 409 for a name a config client or another minted token has", async () => {
    const { app } = tokensOver();
    await assertError(app, "/v1/tokens", 409, "conflict", json("POST", { name: "alice" }));
    assert.equal((await call(app, "/v1/tokens", json("POST", { name: "twice" }))).status, 201);
    await assertError(app, "/v1/tokens", 409, "conflict", json("POST", { name: "twice" }));
  });

  it("revokes a token, naming its client's ready sessions; 404 afterwards, 400 for a bad id", async () => {
    const { registry, app, published } = tokensOver();
    const minted = (await call(app, "/v1/tokens", json("POST", { name: "ci" }))).body;
    registry.addSession(fakeSession("s1", { client: "ci" }));
    registry.addSession(fakeSession("s2", { client: "ci", state: "handshake" }));
    registry.addSession(fakeSession("s3", { client: "alice" }));
    assert.deepEqual((await call(app, `/v1/tokens/${minted.id}`)).body.sessions, ["s1"]);
    const revoked = await call(app, `/v1/tokens/${minted.id}`, { method: "DELETE" });
    assert.equal(revoked.status, 200);
    assert.deepEqual(revoked.body, {
      id: minted.id,
      name: "ci",
      revoked: true,
      sessionsClosed: ["s1"],
    });
    assert.deepEqual(published.map((e) => e.type), ["token_minted", "token_revoked"]);
    await assertError(app, `/v1/tokens/${minted.id}`, 404, "not_found");
    await assertError(app, `/v1/tokens/${minted.id}`, 404, "not_found", { method: "DELETE" });
    await assertError(app, "/v1/tokens/tok_123", 400, "bad_request");
    await assertError(app, "/v1/tokens/ci", 400, "bad_request", { method: "DELETE" });
  });
});

async function minted(response: Response): Promise<TokenJson & { token: string }> {
  assert.equal(response.status, 201, await response.clone().text());
  return await response.json() as TokenJson & { token: string };
}

async function listed(d: Daemonish): Promise<TokenJson[]> {
  const response = await d.api("/v1/tokens");
  assert.equal(response.status, 200);
  return (await response.json() as { tokens: TokenJson[] }).tokens;
}

/** Asserts that connecting with `token` is refused as unauthorized. */
async function refused(d: Daemonish, token: string): Promise<void> {
  const { client } = d.client(token);
  await assert.rejects(client.ready(), (error: ClientError) => {
    assert.equal(error.code, "unauthorized");
    return true;
  });
}

function sessionsOf(d: Daemonish, name: string): number {
  return d.daemon.registry.sessions().filter((s) => s.client === name).length;
}

describe("admin API: minted tokens", () => {
  let echo: TransportListener;
  let other: TransportListener;
  let dataDir: string;
  let d: Daemonish;

  before(async () => {
    echo = await echoServer();
    other = await echoServer();
    dataDir = await mkdtemp(join(tmpdir(), "tunnelmux-tokens-"));
    d = await startDaemon(dataDir);
  });
  after(async () => {
    await d.stop();
    echo.close();
    other.close();
    await rm(dataDir, { recursive: true, force: true });
  });

  it("mints a token whose client can do what its scopes allow and nothing else", async () => {
    const body = await minted(
      await d.mint({
        name: "ci-bot",
        forward: [`127.0.0.1:${echo.port}`],
        services: { use: ["echo"] },
        limits: { tunnels: 1 },
        expiresIn: 3600,
      }),
    );
    assert.match(body.id, /^tok_[0-9a-f]{16}$/);
    assert.equal(body.name, "ci-bot");
    assert.match(body.token, /^tmx_/);
    assert.ok(Date.parse(body.expiresAt!) > Date.now());
    assert.equal(body.active, true);

    const { client, welcome } = d.client(body.token);
    await client.ready();
    const { session, client: name } = await welcome;
    assert.equal(name, "ci-bot");
    // Allowed: the echo service and the one forward target.
    assert.deepEqual(await roundTrip(client.echo(), pattern(20_000, 1)), pattern(20_000, 1));
    const target = `127.0.0.1:${echo.port}`;
    assert.deepEqual(await roundTrip(client.open(target), pattern(5000, 2)), pattern(5000, 2));
    // Not allowed: another target, exposing a port, a service outside `use`.
    const notAllowed = (error: YamuxError) => {
      assert.equal(error.resetCode, ResetReason.NotAllowed);
      return true;
    };
    await assert.rejects(
      roundTrip(client.open(`127.0.0.1:${other.port}`), pattern(10, 3)),
      notAllowed,
    );
    await assert.rejects(roundTrip(client.openService("box"), pattern(10, 4)), notAllowed);
    await assert.rejects(
      client.expose({ local: target, remotePort: 0 }),
      (error: ClientError) => error.code === "not_allowed",
    );

    const [view] = (await listed(d)).filter((t) => t.id === body.id);
    assert.deepEqual(view.sessions, [session]);
    assert.equal(view.active, true);
    assert.deepEqual(view.scopes.forward, [target]);
  });

  it("never lists a token or its hash", async () => {
    const body = await minted(await d.mint({ name: "quiet", services: { use: ["echo"] } }));
    assert.equal(body.expiresAt, null);
    for (const path of ["/v1/tokens", `/v1/tokens/${body.id}`]) {
      const response = await d.api(path);
      assert.equal(response.status, 200);
      const text = await response.text();
      assert.ok(!text.includes(body.token), `${path} shows the token`);
      assert.ok(!text.includes(hashToken(body.token).slice(7)), `${path} shows the hash`);
      assert.ok(!text.includes("sha256:"), `${path} shows a hash`);
      assert.ok(!/"token"/.test(text), `${path} has a token field`);
    }
    assert.equal((await d.api(`/v1/tokens/${body.id}`, { method: "DELETE" })).status, 200);
  });

  it("revokes: the session ends at once and the token is refused from then on", async () => {
    const feed: string[] = [];
    const unsubscribe = d.daemon.events.subscribe((event) => {
      if (event.type.startsWith("token_")) feed.push(`${event.type}:${event.fields.client}`);
    });
    const body = await minted(await d.mint({ name: "revokee", services: { use: ["echo"] } }));
    const { client } = d.client(body.token);
    await client.ready();
    assert.equal(sessionsOf(d, "revokee"), 1);

    const response = await d.api(`/v1/tokens/${body.id}`, { method: "DELETE" });
    assert.equal(response.status, 200);
    const result = await response.json() as { revoked: boolean; sessionsClosed: string[] };
    assert.equal(result.revoked, true);
    assert.equal(result.sessionsClosed.length, 1);
    await waitFor(() => client.state === "closed", "the client to see its session end");
    await waitFor(() => sessionsOf(d, "revokee") === 0, "the daemon to drop the session");
    await refused(d, body.token);
    assert.ok(!(await listed(d)).some((t) => t.id === body.id));
    unsubscribe();
    assert.deepEqual(feed, ["token_minted:revokee", "token_revoked:revokee"]);

    const again = await d.api(`/v1/tokens/${body.id}`, { method: "DELETE" });
    assert.equal(again.status, 404);
    assert.equal(await errorCode(again), "not_found");
    const malformed = await d.api("/v1/tokens/nope", { method: "DELETE" });
    assert.equal(malformed.status, 400);
    assert.equal(await errorCode(malformed), "bad_request");
  });

  it("revokes: a reconnecting client is told its token was revoked, and stops", async () => {
    const body = await minted(await d.mint({ name: "told", services: { use: ["echo"] } }));
    // A client that would reconnect after a lost connection, at once.
    const client = new Client(`tcp://${d.daemon.addresses.tcp}`, {
      token: body.token,
      reconnect: { initialMs: 1, maxMs: 1 },
    });
    const errors: ClientError[] = [];
    client.on("error", (error) => errors.push(error));
    try {
      await client.ready();
      const failuresBefore = d.daemon.counters.get("auth_failure");
      const response = await d.api(`/v1/tokens/${body.id}`, { method: "DELETE" });
      assert.equal(response.status, 200);
      await waitFor(() => client.state === "closed", "the client to stop");
      // One error, the daemon's reason; not a lost connection, then a refused hello.
      assert.deepEqual(errors.map((e) => e.code), ["unauthorized"]);
      assert.match(errors[0].message, /the token of client "told" was revoked or has expired/);
      assert.equal(d.daemon.counters.get("auth_failure"), failuresBefore, "no hello again");
      await waitFor(() => sessionsOf(d, "told") === 0, "the daemon to drop the session");
    } finally {
      await client.close();
    }
  });

  it("expires: the session is closed when the token expires, and it is refused after", async () => {
    const body = await minted(
      await d.mint({ name: "brief", services: { use: ["echo"] }, expiresIn: 1 }),
    );
    const { client } = d.client(body.token);
    await client.ready();
    // Bounded poll (up to 10 s) for a 1 s lifetime; no claim about how close to 1 s it ends.
    await waitFor(() => client.state === "closed", {
      message: "the expired token's session to end",
      intervalMs: 10,
      tries: 1000,
    });
    // The client stops on being told; the daemon's side ends as its connection closes.
    await waitFor(() => sessionsOf(d, "brief") === 0, "the daemon to drop the session");
    await refused(d, body.token);
    assert.ok(!(await listed(d)).some((t) => t.id === body.id));
  });

  it("refuses invalid requests with 400 naming the field, and mints nothing", async () => {
    const before = (await listed(d)).length;
    const cases: [unknown, string][] = [
      [{}, "name"],
      [{ name: "bad name!" }, "name"],
      [{ name: "x1", forward: ["not a rule at all"] }, "forward[0]"],
      [{ name: "x1", forward: "127.0.0.1:80" }, "forward"],
      [{ name: "x1", expose: { ports: ["abc"] } }, "expose.ports[0]"],
      [{ name: "x1", expose: { prots: [80] } }, "expose.prots"],
      [{ name: "x1", services: { use: [5] } }, "services.use[0]"],
      [{ name: "x1", limits: { tunnels: 1_000_000 } }, "limits.tunnels"],
      [{ name: "x1", token: "tokens-chosen-by-caller-0123456789" }, "token"],
      [{ name: "x1", expiresIn: 0 }, "expiresIn"],
      [{ name: "x1", expiresIn: "60" }, "expiresIn"],
      [{ name: "x1", expiresAt: "2000-01-01T00:00:00Z" }, "expiresAt"],
      [{ name: "x1", expiresAt: "tomorrow" }, "expiresAt"],
      [{ name: "x1", expiresIn: 60, expiresAt: "2999-01-01T00:00:00Z" }, "expiresAt"],
      [[], ""],
    ];
    for (const [body, field] of cases) {
      const response = await d.mint(body);
      assert.equal(response.status, 400, JSON.stringify(body));
      const error = (await response.json() as { error: { code: string; field: string } }).error;
      assert.equal(error.code, "bad_request");
      assert.equal(error.field, field, JSON.stringify(body));
    }
    const notJson = await d.mint("{ nope");
    assert.equal(notJson.status, 400);
    assert.equal(await errorCode(notJson), "bad_request");
    assert.equal((await listed(d)).length, before);
  });

  it("answers 409 when the name is taken by a config client or another minted token", async () => {
    const clash = await d.mint({ name: "alice" });
    assert.equal(clash.status, 409);
    assert.equal(await errorCode(clash), "conflict");
    const first = await minted(await d.mint({ name: "twice" }));
    const second = await d.mint({ name: "twice" });
    assert.equal(second.status, 409);
    assert.equal(await errorCode(second), "conflict");
    assert.equal((await d.api(`/v1/tokens/${first.id}`, { method: "DELETE" })).status, 200);
  });

  it("keeps minted tokens across a reload; a config client taking the name wins", async () => {
    const body = await minted(await d.mint({ name: "reloaded", services: { use: ["echo"] } }));
    const { client } = d.client(body.token);
    await client.ready();
    d.daemon.reload(config(dataDir));
    assert.equal(client.state, "ready");
    assert.deepEqual(await roundTrip(client.echo(), pattern(100, 5)), pattern(100, 5));
    const second = d.client(body.token).client;
    await second.ready();

    // The config now names a client "reloaded": the minted token must not borrow its rights.
    d.daemon.reload(
      config(dataDir, [{ name: "reloaded", token: "tokens-configured-0123456789ab" }]),
    );
    await waitFor(() => client.state === "closed" && second.state === "closed", "sessions end");
    await refused(d, body.token);
    const [view] = (await listed(d)).filter((t) => t.id === body.id);
    assert.equal(view.active, false);
    assert.match(view.problem ?? "", /config/);

    d.daemon.reload(config(dataDir)); // gone from the config again: the token works again
    const third = d.client(body.token).client;
    await third.ready();
    assert.equal((await d.api(`/v1/tokens/${body.id}`, { method: "DELETE" })).status, 200);
    await waitFor(() => third.state === "closed", "the revoked session to end");
  });

  it("needs the admin token", async () => {
    const response = await d.api("/v1/tokens", { headers: { authorization: "Bearer wrong" } });
    assert.equal(response.status, 401);
  });
});

describe("admin API: minted tokens survive a restart", () => {
  let dataDir: string;
  before(async () => dataDir = await mkdtemp(join(tmpdir(), "tunnelmux-tokens-")));
  after(() => rm(dataDir, { recursive: true, force: true }));

  it("stores hashes only (0600), loads them at start, and remembers revocations", async () => {
    const first = await startDaemon(dataDir);
    let body: TokenJson & { token: string };
    try {
      body = await minted(
        await first.mint({ name: "survivor", services: { use: ["echo"] }, expiresIn: 3600 }),
      );
    } finally {
      await first.stop();
    }
    const path = join(dataDir, "tokens.json");
    const text = await readFile(path, "utf8");
    assert.ok(!text.includes(body.token), "the file holds no token");
    assert.ok(text.includes(hashToken(body.token)), "the file holds its hash");
    if (process.platform !== "win32") assert.equal((await stat(path)).mode & 0o777, 0o600);

    const second = await startDaemon(dataDir);
    try {
      const [view] = await listed(second);
      assert.equal(view.id, body.id);
      assert.equal(view.expiresAt, body.expiresAt);
      const { client, welcome } = second.client(body.token);
      await client.ready();
      assert.equal((await welcome).client, "survivor");
      assert.deepEqual(await roundTrip(client.echo(), pattern(100, 6)), pattern(100, 6));
      const response = await second.api(`/v1/tokens/${body.id}`, { method: "DELETE" });
      assert.equal(response.status, 200);
    } finally {
      await second.stop();
    }

    const third = await startDaemon(dataDir);
    try {
      assert.deepEqual(await listed(third), []);
      await refused(third, body.token);
    } finally {
      await third.stop();
    }
  });
});
