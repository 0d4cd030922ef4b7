/**
 * The CI smoke run of `bench`: `--quick --only tunnelmux,raw` on the runtime running the test,
 * checked for a number in every scenario for every implementation. No timing thresholds.
 */

import { spawn } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import process from "node:process";
import { fileURLToPath } from "node:url";
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import type { BenchReport } from "./main.ts";
import { SCENARIOS } from "./scenarios.ts";

const ROOT = dirname(dirname(fileURLToPath(import.meta.url)));
const RUNTIME = "Deno" in globalThis ? "deno" : "bun";

function run(args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const bin = join(ROOT, "node_modules", ".bin", RUNTIME);
  const main = join(ROOT, "bench", "main.ts");
  const argv = RUNTIME === "deno" ? ["run", "-A", main, ...args] : [main, ...args];
  return new Promise((resolve, reject) => {
    const child = spawn(bin, argv, { cwd: ROOT, env: process.env });
    let stdout = "";
    let stderr = "";
    child.stdout.setEncoding("utf8").on("data", (d: string) => (stdout += d));
    child.stderr.setEncoding("utf8").on("data", (d: string) => (stderr += d));
    child.on("error", reject);
    child.on("close", (code) => resolve({ code, stdout, stderr }));
  });
}

describe("bench", () => {
  it("--help lists every scenario and option", async () => {
    const { code, stdout } = await run(["--help"]);
    assert.equal(code, 0);
    for (const s of SCENARIOS) assert.match(stdout, new RegExp(`\\b${s.id}\\b`));
    for (const option of ["--quick", "--only", "--runtime", "--json", "--rounds"]) {
      assert.ok(stdout.includes(option), option);
    }
  });

  it("rejects an unknown --runtime with exit 2", async () => {
    const { code, stderr } = await run(["--runtime", "node"]);
    assert.equal(code, 2);
    assert.match(stderr, /--runtime must be deno or bun/);
  });

  it(`--quick --only tunnelmux,raw on ${RUNTIME} gives a number in every scenario`, async () => {
    const dir = mkdtempSync(join(tmpdir(), "bench-test-"));
    try {
      const file = join(dir, "bench.json");
      const args = ["--quick", "--only", "tunnelmux,raw", "--runtime", RUNTIME, "--json", file];
      const { code, stdout, stderr } = await run([...args, "--timeout", "60"]);
      assert.equal(code, 0, stderr);
      assert.match(stdout, /tunnelmux protocol benchmark/);
      const report = JSON.parse(readFileSync(file, "utf8")) as BenchReport;
      const impls = [`tunnelmux-${RUNTIME}`, `raw-native-${RUNTIME}`, `raw-node-${RUNTIME}`];
      assert.deepEqual(report.impls, impls);
      assert.deepEqual(report.scenarios.map((s) => s.id), SCENARIOS.map((s) => s.id));
      assert.equal(typeof report.env.cpus, "number");
      for (const s of SCENARIOS) {
        for (const impl of impls) {
          const row = report.results.find((r) => r.scenario === s.id && r.impl === impl);
          assert.ok(row, `${impl} ${s.id} missing`);
          assert.ok(
            typeof row.median === "number" && row.median > 0,
            `${impl} ${s.id}: ${row.error ?? "no number"}`,
          );
        }
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
