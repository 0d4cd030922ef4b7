// The daemon-wide endpoints over a small stand-in for the daemon (app.request on the sub-app, no
// listener): the probes, /v1/info, and /v1/drain with its body checks and its 409.
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { fakeSession, fakeTunnel, memoryRegistry } from "../../registry/_fake_handles.ts";
import { VERSION } from "../../../util/host/version.ts";
import { ALICE_TOKEN, assertError, call, json, served, testConfig } from "./_fake_deps.ts";
import type { DaemonState, SystemApiDeps } from "./deps.ts";
import { systemApi } from "./system.ts";

/** A daemon that only records its drains (and starts draining, as the real one does). */
function systemOver(state: DaemonState = "running") {
  const drains: number[] = [];
  const daemon: SystemApiDeps & { state: DaemonState } = {
    state,
    startedAt: Date.UTC(2020, 0, 1),
    config: testConfig({ shutdownGraceMs: 4_000 }),
    addresses: { tcp: "127.0.0.1:7000" },
    registry: memoryRegistry(),
    drain(graceMs) {
      drains.push(graceMs);
      daemon.state = "draining";
      return Promise.resolve();
    },
  };
  return { daemon, drains, app: served(systemApi(daemon, { admin: "127.0.0.1:7081" })) };
}

describe("system endpoints (over fakes)", () => {
  it("answers /healthz in any state, /readyz only while running", async () => {
    for (const state of ["starting", "running", "draining", "stopped"] as const) {
      const { app } = systemOver(state);
      const health = await call(app, "/healthz");
      assert.deepEqual([health.status, health.body], [200, { status: "ok" }], state);
      if (state === "running") {
        assert.deepEqual((await call(app, "/readyz")).body, { status: "ready" });
      } else {
        const message = await assertError(app, "/readyz", 503, "not_ready");
        assert.match(message, new RegExp(state));
      }
    }
  });

  it("describes the daemon in /v1/info: listeners, clients and counts, never a secret", async () => {
    const { daemon, app } = systemOver();
    daemon.registry.addSession(fakeSession("s1", { client: "alice" }));
    daemon.registry.addTunnel(fakeTunnel("t-1", { client: "alice" }), "s1");
    const { status, body } = await call(app, "/v1/info");
    assert.equal(status, 200);
    assert.equal(body.version, VERSION);
    assert.equal(body.state, "running");
    assert.equal(body.startedAt, "2020-01-01T00:00:00.000Z");
    assert.deepEqual(body.listeners, { tcp: "127.0.0.1:7000", admin: "127.0.0.1:7081" });
    assert.equal(body.tls, false);
    assert.equal(body.shutdownGraceMs, 4_000);
    assert.deepEqual(body.clients, [{
      name: "alice",
      forwardRules: 0,
      exposePortRanges: 0,
      servicesOffered: 1,
      servicesUsed: 1,
      sessions: 1,
      tunnels: 1,
    }]);
    assert.deepEqual(body.counts, { mintedTokens: 0, sessions: 1, tunnels: 1, services: 0 });
    assert.ok(body.uptimeMs >= Date.now() - Date.UTC(2020, 0, 2));
    const text = JSON.stringify(body);
    assert.ok(!text.includes(ALICE_TOKEN) && !text.includes(daemon.config.clients[0].tokenHash));
  });

  it("drains (202) with the configured grace period, or the one asked for", async () => {
    const plain = systemOver();
    const answer = await call(plain.app, "/v1/drain", { method: "POST" });
    assert.deepEqual([answer.status, answer.body], [202, { state: "draining", graceMs: 4_000 }]);
    assert.deepEqual(plain.drains, [4_000]);
    const asked = systemOver();
    const chosen = await call(asked.app, "/v1/drain", json("POST", { graceMs: 0 }));
    assert.deepEqual([chosen.status, chosen.body], [202, { state: "draining", graceMs: 0 }]);
    assert.deepEqual(asked.drains, [0]);
  });

  it("answers 400 to a bad drain body and 409 when not running, draining nothing", async () => {
    const { app, drains } = systemOver();
    for (
      const body of ["{ nope", "[]", "7", { grace: 1 }, { graceMs: -1 }, { graceMs: 3_600_001 }, {
        graceMs: 1.5,
      }]
    ) {
      await assertError(app, "/v1/drain", 400, "bad_request", json("POST", body));
    }
    assert.deepEqual(drains, []);
    for (const state of ["starting", "draining", "stopped"] as const) {
      const over = systemOver(state);
      const message = await assertError(over.app, "/v1/drain", 409, "conflict", {
        method: "POST",
      });
      assert.match(message, new RegExp(`already ${state}`));
      assert.deepEqual(over.drains, []);
    }
  });
});
