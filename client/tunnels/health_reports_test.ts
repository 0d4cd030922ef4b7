import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { type HealthHolder, type HealthListener, watchHealth } from "./health_reports.ts";
import { HealthMonitor } from "./health_check.ts";
import { listenTcp } from "../../transport/mod.ts";

/** A listener that records every call. */
function recorder(): HealthListener & { calls: string[] } {
  const calls: string[] = [];
  return {
    calls,
    changed: (healthy, detail) => void calls.push(`changed ${healthy} ${detail}`),
    report: (healthy, detail) => void calls.push(`report ${healthy} ${detail}`),
  };
}

/** A port on 127.0.0.1 that nothing listens on. */
async function closedPort(): Promise<number> {
  const listener = await listenTcp({ hostname: "127.0.0.1", port: 0 }, (t) => t.close());
  const port = listener.port;
  await listener.close();
  return port;
}

describe("watchHealth", () => {
  it("without health options, starts nothing and reports nothing", () => {
    const holder: HealthHolder = {};
    const listener = recorder();
    watchHealth(holder, "127.0.0.1:1", undefined, listener);
    assert.equal(holder.monitor, undefined);
    assert.deepEqual(listener.calls, []);
  });

  it("a failing check tells the script, then the daemon, why", async () => {
    const port = await closedPort();
    const holder: HealthHolder = {};
    const calls: string[] = [];
    let down!: () => void;
    const wentDown = new Promise<void>((resolve) => down = resolve);
    const listener: HealthListener = {
      changed: (healthy) => {
        calls.push(`changed ${healthy}`);
        down();
      },
      report: (healthy, detail) => void calls.push(`report ${healthy} ${detail !== undefined}`),
    };
    // One failure counts; the next check would come a minute later, after the test stops it.
    const options = { check: { kind: "tcp" as const }, fall: 1, intervalMs: 60_000 };
    watchHealth(holder, `127.0.0.1:${port}`, options, listener);
    try {
      await wentDown;
      assert.deepEqual(calls, ["changed false", "report false true"]);
      assert.equal(holder.monitor?.healthy, false);
    } finally {
      holder.monitor?.stop();
    }
  });

  it("on a new session, re-reports a service that is down, without a second monitor", () => {
    const monitor = new HealthMonitor("127.0.0.1:1", { check: { kind: "tcp" } }, () => {});
    monitor.healthy = false;
    monitor.detail = "connect: refused";
    const holder: HealthHolder = { monitor };
    const listener = recorder();
    watchHealth(holder, "127.0.0.1:1", { check: { kind: "tcp" } }, listener);
    assert.equal(holder.monitor, monitor);
    assert.deepEqual(listener.calls, ["report false connect: refused"]);
  });

  it("on a new session, says nothing of a service that is up", () => {
    const monitor = new HealthMonitor("127.0.0.1:1", { check: { kind: "tcp" } }, () => {});
    const listener = recorder();
    watchHealth({ monitor }, "127.0.0.1:1", { check: { kind: "tcp" } }, listener);
    assert.deepEqual(listener.calls, []);
  });
});
