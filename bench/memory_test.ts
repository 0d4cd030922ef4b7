/**
 * M1 at quick sizes on the runtime running the test (its workers run on the same pinned runtime),
 * with a six-second soak: every number present and sane, the stalled stream within its window,
 * a second stream flowing meanwhile. Memory is reported, never judged, here: no thresholds.
 */

import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { formatMemory, type MemoryReport, runMemory, slopePerMinute } from "./memory.ts";

const RUNTIME = "Deno" in globalThis ? "deno" : "bun";

function assertFinite(value: unknown, what: string): void {
  assert.ok(typeof value === "number" && Number.isFinite(value), `${what}: ${value}`);
}

describe("slopePerMinute", () => {
  it("fits a line and scales it to a minute", () => {
    assert.equal(slopePerMinute([{ t: 0, y: 10 }, { t: 10, y: 20 }, { t: 20, y: 30 }]), 60);
    assert.equal(slopePerMinute([{ t: 0, y: 5 }, { t: 10, y: 5 }]), 0);
    assert.equal(slopePerMinute([{ t: 0, y: 5 }]), null);
  });
});

describe(`M1 --quick on ${RUNTIME}`, () => {
  let report: MemoryReport;
  const lines: string[] = [];

  it("runs idle streams, a stalled reader and a short soak", async () => {
    report = await runMemory({
      runtimes: [RUNTIME],
      quick: true,
      soakMinutes: 0.1,
      soakSampleSeconds: 1,
      log: (line) => lines.push(line),
    });
    assert.equal(report.runs.length, 1);
    const run = report.runs[0];
    assert.equal(run.runtime, RUNTIME);
    assert.equal(run.error, undefined);
    assert.ok(run.ok);
  });

  it("opens every idle stream and reads memory on both sides", () => {
    const idle = report.runs[0].idle!;
    assert.equal(idle.streams, report.workload.streams);
    // The server's own count: the streams really are open on the other end.
    assert.equal(idle.serverStreams, report.workload.streams);
    for (const side of ["server", "client"] as const) {
      for (const when of ["before", "after"] as const) {
        for (const [key, value] of Object.entries(idle[when][side])) {
          assertFinite(value, `${side} ${when} ${key}`);
          assert.ok(value > 0, `${side} ${when} ${key}`);
        }
      }
      assertFinite(idle.perStream[side].rss, `${side} rss/stream`);
      // Hundreds of live Stream objects cannot take no heap (GC forced before both readings).
      assert.ok(idle.perStream[side].heap > 0, `${side} heap/stream ${idle.perStream[side].heap}`);
    }
  });

  it("keeps the stalled stream's buffer within its window while another stream flows", () => {
    const stall = report.runs[0].stall!;
    assert.ok(stall.bufferedBytes > 0, "the stalled stream buffered nothing");
    assert.ok(stall.receiveWindow >= 256 * 1024, `window ${stall.receiveWindow}`);
    assert.ok(
      stall.bufferedBytes <= stall.receiveWindow,
      `${stall.bufferedBytes} > ${stall.receiveWindow}`,
    );
    assert.equal(stall.withinWindow, true);
    assert.ok(stall.readBeforePause >= report.workload.stallReadFirst);
    assert.ok(stall.readBeforePause < stall.offered, "the reader never paused");
    // The sender was held back by flow control, not by running out of data.
    assert.ok(stall.sender.sent < stall.offered, `sent ${stall.sender.sent}`);
    assertFinite(stall.clientGrowth.rss, "client rss growth");
    assert.deepEqual(
      { ok: stall.echo.ok, bytes: stall.echo.bytes },
      { ok: true, bytes: report.workload.echoBytes },
    );
    assert.equal(stall.delivered, stall.offered);
  });

  it("samples both sides through the soak", () => {
    const soak = report.runs[0].soak!;
    for (const side of ["server", "client"] as const) {
      assert.ok(soak.samples[side].length >= 3, `${side}: ${soak.samples[side].length} samples`);
      for (const s of soak.samples[side]) assert.ok(s.rss > 0 && s.heapUsed > 0);
      assert.ok(soak.rss[side].max >= soak.rss[side].first);
      assertFinite(soak.rss[side].slopePerMin, `${side} rss slope`);
    }
    assert.ok(soak.streams.completed > 0);
    assert.equal(soak.streams.failed, 0, soak.streams.error ?? "");
    assert.ok(soak.stalled.bufferedBytes <= soak.stalled.receiveWindow);
  });

  it("formats a table with every part", () => {
    const text = formatMemory(report);
    assert.match(text, new RegExp(`${RUNTIME} server\\s+-?\\d+ B`));
    assert.match(text, new RegExp(`${RUNTIME} client\\s+-?\\d+ B`));
    assert.match(text, /stalled reader/);
    assert.match(text, /soak: 0\.1 min/);
    assert.doesNotMatch(text, /NaN|undefined|failures:/);
    assert.ok(lines.some((l) => l.startsWith("M1 stall")));
  });
});
