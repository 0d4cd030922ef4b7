// Session endpoints over real HTTP against real SDK sessions: listings and paging, counters that
// move, kicking a session (with and without reconnect), and resetting one stream of two.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { pattern, roundTrip } from "../../../tools/echo_check.ts";
import { errorCode, type Fixture, startFixture } from "../_admin_fixture.ts";
import { waitFor } from "../../../testing/wait.ts";

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
