import { describe, it } from "node:test";
import assert from "node:assert/strict";
import process from "node:process";
import { admissionNs, cpuNanoseconds, summarizeRatios } from "./policy_paired.ts";
import { ALLOW_ALL } from "./policy_client.ts";

describe("bench:policy's paired parts", () => {
  it("summarizes paired ratios as percent: median, quartiles, range", () => {
    const pairs = [100, 101, 99, 104, 97].map((allowAll) => ({ none: 100, allowAll }));
    const summary = summarizeRatios(pairs);
    const logs = [100, 101, 99, 104, 97].map((r) => Math.log(r / 100));
    const mean = logs.reduce((a, b) => a + b) / 5;
    const within = 1.96 * Math.sqrt(logs.reduce((a, b) => a + (b - mean) ** 2, 0) / 4 / 5);
    assert.ok(Math.abs(summary.mean - Math.exp(mean) * 100) < 1e-9);
    assert.ok(summary.mean < 100.2, "below the plain mean, which leans up");
    assert.ok(Math.abs(summary.low - Math.exp(mean - within) * 100) < 1e-9);
    assert.ok(Math.abs(summary.high - Math.exp(mean + within) * 100) < 1e-9);
    assert.deepEqual({ ...summary, mean: 0, low: 0, high: 0 }, {
      median: 100,
      mean: 0,
      low: 0,
      high: 0,
      p25: 99,
      p75: 101,
      min: 97,
      max: 104,
      pairs: 5,
    });
    // A pair with nothing measured (a zero) is left out, not counted as infinite.
    assert.equal(summarizeRatios([...pairs, { none: 0, allowAll: 5 }]).pairs, 5);
  });

  it("reads a process's CPU time in ns, growing as it works", {
    skip: process.platform !== "linux",
  }, () => {
    const before = cpuNanoseconds(process.pid);
    assert.ok(before > 0);
    let x = 0;
    for (let i = 0; i < 5_000_000; i++) x += Math.sqrt(i);
    assert.ok(x > 0);
    assert.ok(cpuNanoseconds(process.pid) > before);
    assert.ok(Number.isNaN(cpuNanoseconds(-1)) || cpuNanoseconds(-1) === 0);
  });

  it("times the admission with every rule, and says so when a visitor is refused", () => {
    assert.ok(admissionNs(ALLOW_ALL, 1000, 1) > 0);
    assert.throws(
      () => admissionNs({ connectionsPerSecond: 1 }, 1000, 1),
      /a visitor was refused: policy_rate/,
    );
  });
});
