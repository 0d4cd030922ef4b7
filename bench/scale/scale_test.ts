/**
 * The scale bench: its table and plots from hand-made runs (well-formed SVG, a line per
 * implementation, escaped names, points ordered by N on a log axis), and a small real run of every
 * curve on the runtime running the test, each step measured. No timing thresholds.
 */

import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { buildLoadgen } from "../tunnel/loadgen.ts";
import { Child } from "./child.ts";
import { type CurveRun, runCurve } from "./curves.ts";
import { curveTable } from "./main.ts";
import { renderCurves } from "./plot.ts";

const RUNTIME = "Deno" in globalThis ? "deno" : "bun";

const RUNS: CurveRun[] = [
  {
    curve: "sessions",
    impl: "tunnelmux-deno",
    points: [
      { n: 1, values: { rssMiB: 55, rssPerKiB: 900 } },
      { n: 100, values: { rssMiB: 60, rssPerKiB: 50 } },
      { n: 10_000, values: { rssMiB: 300, rssPerKiB: 25 } },
    ],
  },
  {
    curve: "sessions",
    impl: "rat<hole>",
    points: [{ n: 1, values: { rssMiB: 7 } }],
    error: "stopped & gone",
  },
];

describe("bench:scale", () => {
  it("tables a column per N and a row per implementation and measure", () => {
    const table = curveTable("sessions", RUNS);
    const lines = table.split("\n");
    assert.equal(lines[0], "| sessions | N=1 | N=100 | N=10,000 |");
    assert.ok(lines.includes("| tunnelmux-deno: daemon RSS per session, KiB | 900 | 50 | 25 |"));
    assert.ok(lines.includes("| rat<hole>: daemon RSS, MiB | 7 |  |  |"));
    assert.ok(lines.includes("rat<hole> stopped: stopped & gone"));
  });

  it("plots a line per implementation, x on a log scale, names escaped", () => {
    const svg = renderCurves("Cost & growth", [{
      title: "daemon RSS, MiB",
      series: RUNS.map((run) => ({
        name: run.impl,
        points: run.points.map((p) => ({ x: p.n, y: p.values.rssMiB })),
      })),
    }, { title: "empty", series: [] }]);
    assert.match(svg, /^<svg [^>]*xmlns="http:\/\/www\.w3\.org\/2000\/svg"/);
    assert.ok(svg.includes("Cost &#38; growth") && svg.includes("rat&#60;hole&#62;"));
    assert.ok(!svg.includes("rat<hole>"));
    assert.equal(svg.match(/<polyline /g)?.length, 2);
    assert.ok(svg.includes(">no data</text>"));
    // Decades 1, 10, 100, 1000, 10000 evenly spaced: x of N=100 halfway between N=1 and N=10,000.
    const xs = [...svg.matchAll(/<circle cx="([\d.]+)"/g)].map((m) => Number(m[1]));
    assert.ok(Math.abs(xs[1] - (xs[0] + xs[2]) / 2) < 1, `${xs}`);
  });

  it("runs every curve for a few steps on this runtime", { timeout: 240_000 }, async () => {
    const loadgen = await buildLoadgen();
    const backendChild = new Child([loadgen, "serve", "-listen", "127.0.0.1:0"]);
    try {
      const backend = (await backendChild.waitFor(/listening on (\S+)/, 10_000))[1];
      const context = { loadgen, backend, log: () => {}, settleMs: 200, cpuWindowMs: 500 };
      const plans = [
        { curve: "sessions", steps: [1, 8], measure: ["rssMiB", "keepaliveCpuMs", "acceptUs"] },
        { curve: "tunnels", steps: [1, 3], measure: ["rssMiB", "clientRssMiB", "t4P50Us"] },
        { curve: "streams", steps: [1, 200], measure: ["serverRssMiB", "openUs"] },
      ] as const;
      for (const plan of plans) {
        const run = await runCurve(
          { curve: plan.curve, impl: RUNTIME, steps: plan.steps },
          context,
        );
        assert.equal(run.error, undefined, `${plan.curve}: ${run.error}`);
        assert.deepEqual(run.points.map((p) => p.n), plan.steps);
        for (const point of run.points) {
          for (const key of plan.measure) {
            assert.ok(point.values[key] >= 0, `${plan.curve} N=${point.n} ${key}`);
          }
        }
        if (plan.curve === "streams") assert.ok(run.points[1].values.closeUs > 0);
      }
    } finally {
      await backendChild.stop();
    }
  });
});
