// The recent history: rates from running totals, a fixed ring that keeps the newest samples, and
// `GET /v1/metrics/recent` (app.request on the sub-app); then sampled from a daemon in this
// process while a real client moves bytes.
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { recentApi, RecentHistory, type RecentTotals } from "./recent.ts";
import { served } from "./_fake_deps.ts";
import { startFixture } from "../_admin_fixture.ts";

describe("RecentHistory", () => {
  it("gives rates per second between samples, the first one a baseline only", () => {
    const totals: RecentTotals = { bytesIn: 1000, bytesOut: 0, sessions: 1, streams: 2 };
    const history = new RecentHistory(() => totals, 10);
    history.sample(10_000);
    assert.deepEqual(history.samples(), []);
    totals.bytesIn = 5000;
    totals.bytesOut = 2000;
    totals.sessions = 3;
    history.sample(12_000);
    assert.deepEqual(history.samples(), [{
      at: new Date(12_000).toISOString(),
      bytesIn: 2000,
      bytesOut: 1000,
      sessions: 3,
      streams: 2,
    }]);
  });

  it("keeps the newest samples only, oldest first, in bounded memory", () => {
    let n = 0;
    const history = new RecentHistory(
      () => ({ bytesIn: n * 2, bytesOut: 0, sessions: n, streams: 0 }),
      3,
    );
    for (n = 0; n < 10; n++) history.sample(n * 1000);
    assert.deepEqual(history.samples().map((s) => s.sessions), [7, 8, 9]);
    assert.deepEqual(history.samples().map((s) => s.bytesIn), [2, 2, 2]);
  });

  it("never reports a negative rate, nor one for a clock that did not move", () => {
    const totals: RecentTotals = { bytesIn: 100, bytesOut: 100, sessions: 0, streams: 0 };
    const history = new RecentHistory(() => totals, 5);
    history.sample(1000);
    history.sample(1000);
    totals.bytesIn = 50;
    history.sample(2000);
    assert.deepEqual(history.samples().map((s) => [s.bytesIn, s.bytesOut]), [[0, 0]]);
  });

  it("refuses a capacity that is not a positive integer", () => {
    const source = () => ({ bytesIn: 0, bytesOut: 0, sessions: 0, streams: 0 });
    assert.throws(() => new RecentHistory(source, 0), RangeError);
    assert.throws(() => new RecentHistory(source, 1.5), RangeError);
  });
});

describe("GET /v1/metrics/recent", () => {
  it("serves the samples with their period, and none without a history", async () => {
    let bytes = 0;
    const history = new RecentHistory(
      () => ({ bytesIn: bytes, bytesOut: bytes, sessions: 1, streams: 1 }),
    );
    history.sample(0);
    bytes = 4096;
    history.sample(2000);
    const response = await served(recentApi(history)).request("/v1/metrics/recent");
    assert.equal(response.status, 200);
    assert.equal(response.headers.get("cache-control"), "no-store");
    assert.deepEqual(await response.json(), {
      intervalMs: 2000,
      samples: [{
        at: new Date(2000).toISOString(),
        bytesIn: 2048,
        bytesOut: 2048,
        sessions: 1,
        streams: 1,
      }],
    });
    const none = await served(recentApi(undefined)).request("/v1/metrics/recent");
    assert.deepEqual(await none.json(), { intervalMs: 2000, samples: [] });
  });
});

describe("recent history of a daemon in this process", () => {
  it("samples its sessions and their bytes, and serves them behind the token", async () => {
    const f = await startFixture();
    try {
      const start = Date.now();
      f.admin.recent.sample(start);
      await f.client(); // a hello and its welcome: bytes each way, one session
      f.admin.recent.sample(start + 1000);
      const response = await f.api("/v1/metrics/recent");
      assert.equal(response.status, 200);
      const body = await response.json() as { samples: { sessions: number; bytesIn: number }[] };
      const last = body.samples.at(-1)!;
      assert.equal(last.sessions, 1);
      assert.ok(last.bytesIn > 0, "the hello's bytes were counted");
      const anonymous = await fetch(f.admin.url + "/v1/metrics/recent");
      assert.equal(anonymous.status, 401);
      await anonymous.body?.cancel();
    } finally {
      await f.stop();
    }
  });
});
