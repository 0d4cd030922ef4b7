/**
 * The CI smoke runs of `bench` on the runtime running the test: the protocol suite
 * (`--quick --only tunnelmux,raw`) and the tunnel suite (`--quick`: tunnelmux over TCP and
 * WebSocket, the runtime's floor, and direct; the UDP scenarios through tunnelmux's UDP forward
 * and udp-direct), each checked for a number in every scenario for every implementation, and
 * argument errors. No timing thresholds.
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
import { TUNNEL_SCENARIOS } from "./tunnel/scenarios.ts";

const ROOT = dirname(dirname(fileURLToPath(import.meta.url)));
const RUNTIME = "Deno" in globalThis ? "deno" : "bun";
// iperf3's scenarios are left out of --quick runs.
const QUICK_TUNNEL = TUNNEL_SCENARIOS.filter((s) => !s.iperf3);
const TCP_SCENARIOS = QUICK_TUNNEL.filter((s) => !s.udp);
const UDP_SCENARIOS = QUICK_TUNNEL.filter((s) => s.udp);

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
    for (const s of [...SCENARIOS, ...TUNNEL_SCENARIOS]) {
      assert.match(stdout, new RegExp(`\\b${s.id}\\b`));
    }
    const options = [
      "--quick",
      "--only",
      "--runtime",
      "--json",
      "--rounds",
      "--suite",
      "--peers-dir",
    ];
    for (const option of options) {
      assert.ok(stdout.includes(option), option);
    }
  });

  it("rejects an unknown --runtime with exit 2", async () => {
    const { code, stderr } = await run(["--runtime", "node"]);
    assert.equal(code, 2);
    assert.match(stderr, /--runtime must be deno or bun/);
  });

  for (
    const [args, message] of [
      [["--suite", "nope"], /--suite must be protocol, tunnel, memory or all/],
      [["--soak", "0"], /--soak must be a positive number of minutes/],
      [["--suite", "protocol", "--scenarios", "T1"], /unknown scenario t1 in suite protocol/],
      [["--scenarios", "T9"], /unknown scenario t9/],
      [["--suite", "tunnel", "--only", "nothing-like-this"], /matches no implementation/],
      [["--rounds", "0"], /--rounds must be >= 1/],
    ] as const
  ) {
    it(`rejects ${args.join(" ")} with exit 2`, async () => {
      const { code, stderr } = await run([...args]);
      assert.equal(code, 2);
      assert.match(stderr, message);
    });
  }

  it(`--quick --only tunnelmux,raw on ${RUNTIME} gives a number in every scenario`, async () => {
    const dir = mkdtempSync(join(tmpdir(), "bench-test-"));
    try {
      const file = join(dir, "bench.json");
      const args = [
        "--suite",
        "protocol",
        "--quick",
        "--only",
        "tunnelmux,raw",
        "--runtime",
        RUNTIME,
        "--json",
        file,
      ];
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

  it(`--suite tunnel --quick on ${RUNTIME}: every tunnel scenario has a number`, async () => {
    const dir = mkdtempSync(join(tmpdir(), "bench-test-"));
    try {
      const file = join(dir, "bench.json");
      const svg = join(dir, "bench.svg");
      const args = ["--suite", "tunnel", "--quick", "--runtime", RUNTIME, "--json", file];
      const { code, stdout, stderr } = await run([...args, "--svg", svg, "--timeout", "60"]);
      assert.equal(code, 0, stderr);
      const chart = readFileSync(svg, "utf8");
      for (const s of QUICK_TUNNEL) assert.ok(chart.includes(`${s.id}:`), `${s.id} chart`);
      assert.match(stdout, /tunnelmux tunnel benchmark/);
      assert.match(stdout, /CPU s\/GiB/);
      const report = JSON.parse(readFileSync(file, "utf8")) as BenchReport;
      const tunnels = [
        `tunnelmux-${RUNTIME}-tcp`,
        `tunnelmux-${RUNTIME}-ws`,
        `tunnelmux-${RUNTIME}-relay`,
      ];
      // The HTTP family: the same load in HTTP/1.1 through an HTTP tunnel by name.
      const http = `http-tunnelmux-${RUNTIME}`;
      const floor = `jsrelay-${RUNTIME}`;
      const udp = `udp-tunnelmux-${RUNTIME}`;
      const udpForward = `udp-tunnelmux-${RUNTIME}-fwd`;
      assert.deepEqual(report.impls, [
        "direct",
        ...tunnels,
        floor,
        "http-direct",
        http,
        "udp-direct",
        udp,
        udpForward,
      ]);
      assert.deepEqual(report.scenarios.map((s) => s.id), QUICK_TUNNEL.map((s) => s.id));
      // UDP: datagrams through tunnelmux's UDP tunnel and forward and straight to the echo, and
      // only those.
      for (const s of UDP_SCENARIOS) {
        const ran = report.results.filter((r) => r.scenario === s.id).map((r) => r.impl);
        assert.deepEqual(ran, ["udp-direct", udp, udpForward], s.id);
        for (const impl of ran) {
          const row = report.results.find((r) => r.scenario === s.id && r.impl === impl)!;
          const ok = s.metric.higher ? row.median > 0 : row.median >= 0;
          assert.ok(ok && row.failures === 0, `${impl} ${s.id}: ${row.error ?? "no number"}`);
        }
        const tunnel = report.results.find((r) => r.scenario === s.id && r.impl === udp)!;
        assert.ok(tunnel.rssServerMiB!.median > 0 && tunnel.rssClientMiB!.median > 0, s.id);
        if (s.id === "U1") {
          const ratio = report.ratios.find((r) =>
            r.scenario === s.id && r.baseline === udp && r.versus === "udp-direct" && !r.metric
          );
          assert.ok(ratio && ratio.median > 0, "the UDP tunnel vs udp-direct in U1");
        }
      }
      for (const s of TCP_SCENARIOS) {
        const httpVsDirect = report.ratios.find((r) =>
          r.scenario === s.id && r.baseline === http && r.versus === "http-direct"
        );
        assert.ok(httpVsDirect && httpVsDirect.median > 0, `HTTP tunnel vs HTTP direct in ${s.id}`);
        for (const impl of ["direct", ...tunnels, floor, "http-direct", http]) {
          const row = report.results.find((r) => r.scenario === s.id && r.impl === impl);
          assert.ok(row, `${impl} ${s.id} missing`);
          assert.ok(row.median > 0, `${impl} ${s.id}: ${row.error ?? "no number"}`);
          if (s.metric.higher) continue;
          assert.ok(row.p99! >= row.median, `${impl} ${s.id}: p99 below p50`);
        }
        for (const impl of tunnels) {
          for (const versus of ["direct", floor]) {
            const ratio = report.ratios.find((r) =>
              r.scenario === s.id && r.baseline === impl && r.versus === versus && !r.metric
            );
            assert.ok(ratio && ratio.median > 0, `${impl} vs ${versus} in ${s.id}`);
          }
        }
        const wsVsTcp = report.ratios.find((r) =>
          r.scenario === s.id && r.baseline === tunnels[1] && r.versus === tunnels[0]
        );
        assert.ok(wsVsTcp && wsVsTcp.median > 0, `WebSocket vs TCP in ${s.id}`);
        const relayVsTcp = report.ratios.find((r) =>
          r.scenario === s.id && r.baseline === tunnels[2] && r.versus === tunnels[0]
        );
        assert.ok(relayVsTcp && relayVsTcp.median > 0, `the relay hop vs the owner in ${s.id}`);
      }
      for (const impl of tunnels) {
        const t2 = report.results.find((r) => r.scenario === "T2" && r.impl === impl)!;
        assert.ok(t2.cpu && t2.cpu.median > 0, `${impl}: CPU per 1000 connections`);
        assert.ok(t2.rssServerMiB && t2.rssServerMiB.median > 0, `${impl}: daemon RSS`);
        assert.ok(t2.rssClientMiB && t2.rssClientMiB.median > 0, `${impl}: client RSS`);
        const t1 = report.results.find((r) => r.scenario === "T1" && r.impl === impl)!;
        assert.ok(t1.cpu && t1.cpu.n === 1, `${impl}: CPU per GiB`);
      }
      // The floor's processes are measured as a tunnel's (its CPU may round to 0 at quick sizes).
      const floorT2 = report.results.find((r) => r.scenario === "T2" && r.impl === floor)!;
      assert.ok(floorT2.cpu && floorT2.cpu.n === 1, `${floor}: CPU per 1000 connections`);
      assert.ok(floorT2.rssServerMiB!.median > 0 && floorT2.rssClientMiB!.median > 0, floor);
      const direct = report.results.find((r) => r.scenario === "T2" && r.impl === "direct")!;
      assert.equal(direct.cpu, undefined, "direct has no tunnel processes to measure");
      assert.ok(report.targets.some((t) => t.scenario === "T1" && t.versus === "direct"));
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it(`--scenarios M1 --quick on ${RUNTIME}: the memory report goes to stdout and JSON`, async () => {
    const dir = mkdtempSync(join(tmpdir(), "bench-test-"));
    try {
      const file = join(dir, "bench.json");
      const args = ["--scenarios", "M1", "--quick", "--runtime", RUNTIME, "--json", file];
      const { code, stdout, stderr } = await run(args);
      assert.equal(code, 0, stderr);
      assert.match(stdout, /M1 memory \(quick sizes\)/);
      const report = JSON.parse(readFileSync(file, "utf8")) as BenchReport;
      assert.deepEqual(report.results, [], "M1 alone runs no protocol or tunnel scenario");
      const runs = report.memory!.runs;
      assert.deepEqual(runs.map((r) => [r.runtime, r.ok, r.error]), [[RUNTIME, true, undefined]]);
      assert.equal(runs[0].stall!.withinWindow, true);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
