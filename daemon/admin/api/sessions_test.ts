// Session endpoints, first over small fakes (app.request on the sub-app: every answer and error
// code, the cluster's part included), then over real HTTP against real SDK sessions: listings
// and paging, counters that move, kicking a session (with and without reconnect), and resetting
// one stream of two.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { pattern, roundTrip } from "../../../tools/echo_check.ts";
import { errorCode, type Fixture, startFixture } from "../_admin_fixture.ts";
import { waitFor } from "../../../testing/wait.ts";
import { type DaemonEvent, EventFeed } from "../../events.ts";
import { fakeSession, memoryRegistry } from "../../registry/_fake_handles.ts";
import { assertError, call, type FakeCluster, fakeCluster, served } from "./_fake_deps.ts";
import { sessionsApi } from "./sessions.ts";

/** The session endpoints over an in-memory registry, with what they publish. */
function sessionsOver(cluster?: FakeCluster) {
  const registry = memoryRegistry();
  const events = new EventFeed();
  const published: DaemonEvent[] = [];
  events.subscribe((event) => published.push(event));
  const app = served(sessionsApi({ registry, events, cluster }));
  return { registry, app, published };
}

describe("session endpoints (over fakes)", () => {
  it("lists sessions by the number in their id, paged with a cursor", async () => {
    const { registry, app } = sessionsOver();
    for (const id of ["s10", "s2", "s9", "s1"]) registry.addSession(fakeSession(id));
    const first = await call(app, "/v1/sessions?limit=3");
    assert.equal(first.status, 200);
    assert.deepEqual(first.body.sessions.map((s: { id: string }) => s.id), ["s1", "s2", "s9"]);
    assert.equal(first.body.nextCursor, "s9");
    const rest = await call(app, "/v1/sessions?limit=3&cursor=s9");
    assert.deepEqual(rest.body.sessions.map((s: { id: string }) => s.id), ["s10"]);
    assert.equal(rest.body.nextCursor, null);
    assert.deepEqual(Object.keys(rest.body.sessions[0]), [
      "id",
      "client",
      "state",
      "transport",
      "remoteAddress",
      "since",
      "rttMs",
      "bytesIn",
      "bytesOut",
      "streamCount",
      "tunnelCount",
      "ha",
    ]);
  });

  it("answers 400 to a bad limit, cursor or scope, and to scope=cluster on a single node", async () => {
    const { app } = sessionsOver();
    for (const query of ["limit=0", "limit=1001", "limit=x", "cursor=s0", "cursor=abc"]) {
      await assertError(app, `/v1/sessions?${query}`, 400, "bad_request");
    }
    await assertError(app, "/v1/sessions?scope=world", 400, "bad_request");
    const message = await assertError(app, "/v1/sessions?scope=cluster", 400, "bad_request");
    assert.match(message, /not in a cluster/);
  });

  it("lists every node's sessions with scope=cluster, naming the nodes that did not answer", async () => {
    const cluster = fakeCluster({
      answers: {
        sessions: {
          answers: [{ node: "n2", data: [{ id: "s4" }] }, { node: "n1", data: [{ id: "s1" }] }],
          missing: ["n3"],
        },
      },
    });
    const { app } = sessionsOver(cluster);
    const { status, body } = await call(app, "/v1/sessions?scope=cluster");
    assert.equal(status, 200);
    assert.deepEqual(body, {
      sessions: [{ node: "n1", id: "s1" }, { node: "n2", id: "s4" }],
      nextCursor: null,
      missing: ["n3"],
    });
    assert.deepEqual(cluster.asked.map((q) => q.kind), ["sessions"]);
  });

  it("shows one session with its streams in id order; 400 for a bad id, 404 for an unknown one", async () => {
    const { registry, app } = sessionsOver();
    registry.addSession(fakeSession("s1", {
      streams: [
        { id: 5, state: "established", bytesIn: 7, bytesOut: 0, createdAt: 0 },
        { id: 1, state: "established", bytesIn: 0, bytesOut: 0, createdAt: 0 },
      ],
      tunnels: ["t-2", "t-1"],
    }));
    const { status, body } = await call(app, "/v1/sessions/s1");
    assert.equal(status, 200);
    assert.equal(body.id, "s1");
    assert.deepEqual(body.streams.map((s: { id: number }) => s.id), [1, 5]);
    assert.equal(body.streams[1].bytesIn, 7);
    assert.deepEqual(body.tunnels, ["t-1", "t-2"]);
    await assertError(app, "/v1/sessions/abc", 400, "bad_request");
    await assertError(app, "/v1/sessions/s2", 404, "not_found");
  });

  it("kicks a session (202), and answers 404 for an unknown one", async () => {
    const { registry, app } = sessionsOver();
    const session = fakeSession("s1");
    registry.addSession(session);
    const kicked = await call(app, "/v1/sessions/s1", { method: "DELETE" });
    assert.equal(kicked.status, 202);
    assert.deepEqual(kicked.body, { session: "s1", state: "closing" });
    assert.deepEqual(session.calls, ["close"]);
    await assertError(app, "/v1/sessions/s7", 404, "not_found", { method: "DELETE" });
    await assertError(app, "/v1/sessions/s-1", 400, "bad_request", { method: "DELETE" });
  });

  it("kicks a session on another node through the cluster: 202, 404 or 504", async () => {
    const found = new Map([["s3", true], ["s4", false]]);
    const cluster = fakeCluster({
      answers: {
        kick: ({ data, node }) =>
          node === "n3" ? { answers: [], missing: ["n3"] } : {
            answers: [{ node: node!, data: { found: found.get((data as { id: string }).id) } }],
            missing: [],
          },
      },
    });
    const { registry, app } = sessionsOver(cluster);
    const local = fakeSession("s3");
    registry.addSession(local);
    const kicked = await call(app, "/v1/sessions/s3?node=n2", { method: "DELETE" });
    assert.equal(kicked.status, 202);
    assert.deepEqual(kicked.body, { session: "s3", node: "n2", state: "closing" });
    assert.deepEqual(cluster.asked, [{ kind: "kick", data: { id: "s3" }, node: "n2" }]);
    assert.deepEqual(local.calls, [], "this node's s3 is left alone");
    const del = { method: "DELETE" };
    await assertError(app, "/v1/sessions/s4?node=n2", 404, "not_found", del);
    await assertError(app, "/v1/sessions/s4?node=n3", 504, "node_unreachable", del);
    // ?node= naming this node is an ordinary, local kick.
    assert.equal((await call(app, "/v1/sessions/s3?node=n1", del)).status, 202);
    assert.deepEqual(local.calls, ["close"]);
    assert.equal(cluster.asked.length, 3);
  });

  it("resets one stream (204) and publishes it; 404, 409 and 400 otherwise", async () => {
    const { registry, app, published } = sessionsOver();
    const session = fakeSession("s1", {
      controlStreamId: 1,
      streams: [
        { id: 1, state: "established", bytesIn: 0, bytesOut: 0, createdAt: 0 },
        { id: 3, state: "established", bytesIn: 0, bytesOut: 0, createdAt: 0 },
      ],
    });
    registry.addSession(session);
    const del = { method: "DELETE" };
    const reset = await call(app, "/v1/sessions/s1/streams/3", del);
    assert.equal(reset.status, 204);
    assert.equal(reset.body, undefined);
    assert.deepEqual(
      published.map((e) => [e.type, e.fields]),
      [["stream_reset", { session: "s1", client: "alice", stream: 3, reason: "admin" }]],
    );
    await assertError(app, "/v1/sessions/s1/streams/5", 404, "not_found", del);
    await assertError(app, "/v1/sessions/s1/streams/1", 409, "conflict", del);
    await assertError(app, "/v1/sessions/s2/streams/3", 404, "not_found", del);
    // A malformed stream id is a 400 even when the session is unknown too.
    await assertError(app, "/v1/sessions/s2/streams/0", 400, "bad_request", del);
    assert.deepEqual(session.calls, ["resetStream 3", "resetStream 5", "resetStream 1"]);
    assert.equal(published.length, 1, "only the reset that happened is published");
  });
});

interface StreamJson {
  id: number;
  state: string;
  bytesIn: number;
  bytesOut: number;
  sendWindow: number;
  receiveWindow: number;
  bufferedBytes: number;
  queuedBytes: number;
  ageMs: number;
}

interface SessionJson {
  id: string;
  client: string;
  transport: string;
  remoteAddress: string;
  since: string;
  bytesIn: number;
  bytesOut: number;
  streams: StreamJson[];
}

describe("admin API: sessions", () => {
  let f: Fixture;
  before(async () => f = await startFixture());
  after(() => f.stop());

  const detail = async (id: string): Promise<SessionJson> => {
    const response = await f.api(`/v1/sessions/${id}`);
    assert.equal(response.status, 200);
    return await response.json() as SessionJson;
  };

  it("lists real sessions in id order, paged with a cursor", async () => {
    const clients = [await f.client(), await f.client(), await f.client()];
    const ids = clients.map((c) => f.sessionId(c));
    const all = f.daemon.registry.sessions().map((s) => s.id).sort((a, b) =>
      Number(a.slice(1)) - Number(b.slice(1))
    );
    const seen: string[] = [];
    let cursor: string | null = null;
    for (let page = 0; page < 10; page++) {
      const query: string = `limit=2${cursor ? `&cursor=${cursor}` : ""}`;
      const response = await f.api(`/v1/sessions?${query}`);
      assert.equal(response.status, 200);
      const body = await response.json() as { sessions: SessionJson[]; nextCursor: string | null };
      assert.ok(body.sessions.length <= 2);
      seen.push(...body.sessions.map((s) => s.id));
      for (const s of body.sessions) {
        assert.equal(s.client, "alice");
        assert.equal(s.transport, "tcp");
        assert.match(s.remoteAddress, /^127\.0\.0\.1:\d+$/);
        assert.ok(!Number.isNaN(Date.parse(s.since)));
      }
      cursor = body.nextCursor;
      if (cursor === null) break;
    }
    assert.deepEqual(seen, all);
    for (const id of ids) assert.ok(seen.includes(id), `${id} listed`);
    await Promise.all(clients.map((c) => c.close()));
  });

  it("shows a session's streams with counters that grow after a transfer", async () => {
    const client = await f.client();
    const id = f.sessionId(client);
    const stream = client.echo();
    const first = await roundTrip(stream, pattern(100_000, 1)).then(() => detail(id));
    // The echo stream ended after its round trip; a second one stays open while we look.
    const open = client.echo();
    open.write(pattern(5000, 2));
    await waitFor(async () => {
      const now = await detail(id);
      return now.streams.some((s) => s.id === open.id && s.bytesIn >= 5000);
    }, "the open stream's bytes to show");
    const now = await detail(id);
    assert.ok(now.bytesIn >= first.bytesIn + 5000, "session bytes in grew");
    assert.ok(first.bytesIn >= 100_000 && first.bytesOut >= 100_000, "the round trip counted");
    const view = now.streams.find((s) => s.id === open.id)!;
    assert.equal(view.state, "established");
    assert.ok(view.bytesOut >= 0 && view.sendWindow > 0 && view.receiveWindow > 0);
    assert.equal(typeof view.bufferedBytes, "number");
    assert.equal(typeof view.queuedBytes, "number");
    assert.ok(view.ageMs >= 0);
    assert.ok(now.streams.length >= 2, "the control stream is listed too");
    open.reset();
    await client.close();
  });

  it("resets one stream and leaves its sibling flowing; the control stream is refused", async () => {
    const client = await f.client();
    const id = f.sessionId(client);
    const victim = client.echo();
    const sibling = client.echo();
    const victimClosed = new Promise<Error | undefined>((resolve) => victim.onClose = resolve);
    victim.onData = () => {};
    victim.write(pattern(10, 3));
    await waitFor(async () => {
      const d = await detail(id);
      return d.streams.some((s) => s.id === victim.id);
    }, "the stream to reach the daemon");
    const response = await f.api(`/v1/sessions/${id}/streams/${victim.id}`, { method: "DELETE" });
    assert.equal(response.status, 204);
    assert.ok((await victimClosed) instanceof Error, "the client saw a reset");
    assert.deepEqual(await roundTrip(sibling, pattern(50_000, 4)), pattern(50_000, 4));
    const again = await f.api(`/v1/sessions/${id}/streams/${victim.id}`, { method: "DELETE" });
    assert.equal(again.status, 404);
    assert.equal(await errorCode(again), "not_found");
    const control = Math.min(...(await detail(id)).streams.map((s) => s.id));
    const refused = await f.api(`/v1/sessions/${id}/streams/${control}`, { method: "DELETE" });
    assert.equal(refused.status, 409);
    assert.equal(await errorCode(refused), "conflict");
    assert.equal(client.state, "ready");
    await client.close();
  });

  it("kicks a session: the client sees it close, and with reconnect it comes back", async () => {
    const once = await f.client();
    const onceId = f.sessionId(once);
    const kicked = await f.api(`/v1/sessions/${onceId}`, { method: "DELETE" });
    assert.equal(kicked.status, 202);
    await waitFor(
      () => once.state === "closed" || once.state === "backoff",
      "the client to notice",
    );
    await waitFor(() => !(f.daemon.registry.session(onceId) !== undefined), "the session to go");
    const gone = await f.api(`/v1/sessions/${onceId}`);
    assert.equal(gone.status, 404);

    const back = await f.client({ reconnect: { initialMs: 20, maxMs: 50 } });
    const firstId = f.sessionId(back);
    const ready = new Promise<{ session: string }>((resolve) => back.on("ready", resolve));
    assert.equal((await f.api(`/v1/sessions/${firstId}`, { method: "DELETE" })).status, 202);
    const { session } = await ready;
    assert.notEqual(session, firstId);
    assert.equal((await f.api(`/v1/sessions/${session}`)).status, 200);
    await back.close();
  });
});
