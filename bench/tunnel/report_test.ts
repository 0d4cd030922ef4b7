/**
 * The tunnel suite's side of `buildReport`, on made-up samples (no processes): which ratios are
 * paired, the CPU and RSS extras, and the targets, including against foreign tunnels that the
 * `--quick` run in `main_test.ts` never starts.
 */

import { describe, it } from "node:test";
import assert from "node:assert/strict";
import type { BenchEnv } from "../env.ts";
import { buildReport, formatReport, type SampleRecord } from "../report.ts";
import { TUNNEL_SCENARIOS } from "./scenarios.ts";

const ENV: BenchEnv = {
  date: "2026-01-01T00:00:00Z",
  cpus: 2,
  cpuModel: "test",
  os: "test",
  deno: "deno test",
  bun: "test",
  go: "go test",
};
const IMPLS = ["direct", "tunnelmux-deno-tcp", "tunnelmux-deno-ws", "jsrelay-deno", "frp", "bore"];
const T1 = TUNNEL_SCENARIOS[0];
const T2 = TUNNEL_SCENARIOS[1];

/** Two rounds of T1 and T2; tunnels carry CPU (and in T2, RSS) figures. */
function samples(): SampleRecord[] {
  const value: Record<string, [number, number]> = {
    direct: [1000, 2000],
    "tunnelmux-deno-tcp": [400, 600],
    "tunnelmux-deno-ws": [200, 600],
    "jsrelay-deno": [800, 1200],
    frp: [100, 200],
    bore: [500, 500],
  };
  const out: SampleRecord[] = [];
  for (const round of [0, 1]) {
    for (const impl of IMPLS) {
      for (const scenario of [T1, T2]) {
        const tunnel = impl !== "direct";
        const floor = impl === "jsrelay-deno";
        out.push({
          round,
          scenario: scenario.id,
          impl,
          ok: true,
          value: value[impl][round],
          ...(tunnel ? { cpu: impl === "bore" ? 2 : floor ? 0.5 : 1 } : {}),
          ...(tunnel && scenario.rss
            ? { rssServerMiB: impl === "frp" ? 10 : floor ? 20 : 40 }
            : {}),
          ...(tunnel && scenario.rss ? { rssClientMiB: floor ? 4 : 5 } : {}),
        });
      }
    }
  }
  return out;
}

describe("tunnel report", () => {
  const report = buildReport(
    ENV,
    { rounds: 2 },
    [T1, T2].map((scenario) => ({ scenario, workload: scenario.full, suite: "tunnel" as const })),
    IMPLS,
    samples(),
    2,
    [{ impl: "rathole", reason: "rathole not on PATH or in --peers-dir" }],
  );
  const ratio = (scenario: string, baseline: string, versus: string, metric?: string) =>
    report.ratios.find((r) =>
      r.scenario === scenario && r.baseline === baseline && r.versus === versus &&
      r.metric === metric
    );

  it("pairs every tunnel with direct per round, and WebSocket with TCP", () => {
    assert.equal(ratio("T1", "tunnelmux-deno-tcp", "direct")?.median, (0.4 + 0.3) / 2);
    assert.equal(ratio("T1", "frp", "direct")?.median, (0.1 + 0.1) / 2);
    assert.equal(ratio("T1", "tunnelmux-deno-ws", "tunnelmux-deno-tcp")?.median, (0.5 + 1) / 2);
    assert.equal(ratio("T1", "direct", "tunnelmux-deno-tcp"), undefined);
  });

  it("compares tunnelmux's CPU with bore's and its daemon's RSS with frp's", () => {
    assert.equal(ratio("T1", "tunnelmux-deno-tcp", "bore", "cpu")?.median, 0.5);
    assert.equal(ratio("T2", "tunnelmux-deno-tcp", "frp", "rss")?.median, 4);
    assert.equal(ratio("T1", "tunnelmux-deno-tcp", "frp", "rss"), undefined, "no RSS in T1");
    assert.equal(ratio("T1", "frp", "bore", "cpu"), undefined, "costs are tunnelmux's only");
  });

  it("pairs each tunnelmux tunnel with its runtime's floor in every figure it has", () => {
    for (const tunnel of ["tunnelmux-deno-tcp", "tunnelmux-deno-ws"]) {
      assert.ok(ratio("T1", tunnel, "jsrelay-deno"), tunnel);
    }
    assert.equal(ratio("T1", "tunnelmux-deno-tcp", "jsrelay-deno")?.median, 0.5);
    assert.equal(ratio("T1", "tunnelmux-deno-tcp", "jsrelay-deno", "cpu")?.median, 2);
    assert.equal(ratio("T2", "tunnelmux-deno-tcp", "jsrelay-deno", "rss")?.median, 2);
    assert.equal(ratio("T2", "tunnelmux-deno-tcp", "jsrelay-deno", "rss-client")?.median, 1.25);
    assert.equal(ratio("T1", "tunnelmux-deno-tcp", "jsrelay-deno", "rss"), undefined, "no RSS");
    assert.equal(ratio("T1", "tunnelmux-deno-tcp", "jsrelay-deno", "p99"), undefined, "no p99");
    assert.equal(ratio("T1", "jsrelay-deno", "direct")?.median, (0.8 + 0.6) / 2);
    assert.equal(ratio("T1", "frp", "jsrelay-deno"), undefined, "the floor is tunnelmux's");
    assert.equal(ratio("T1", "jsrelay-deno", "best-peer"), undefined);
  });

  it("summarizes the extras per row and leaves them out for direct", () => {
    const row = report.results.find((r) => r.scenario === "T2" && r.impl === "frp")!;
    assert.equal(row.cpu?.median, 1);
    assert.equal(row.cpuUnit, "CPU s/1000 conn");
    assert.equal(row.rssServerMiB?.median, 10);
    assert.equal(row.rssClientMiB?.median, 5);
    const direct = report.results.find((r) => r.scenario === "T2" && r.impl === "direct")!;
    assert.equal(direct.cpu, undefined);
  });

  it("checks the targets", () => {
    const target = (scenario: string, baseline: string, versus: string, metric?: string) =>
      report.targets.find((t) =>
        t.scenario === scenario && t.baseline === baseline && t.versus === versus &&
        t.metric === metric
      );
    assert.equal(target("T1", "tunnelmux-deno-tcp", "direct")?.met, true); // 0.35 >= 0.3
    assert.equal(target("T2", "tunnelmux-deno-tcp", "direct")?.met, false); // 0.3 < 0.4
    assert.equal(target("T1", "tunnelmux-deno-ws", "tunnelmux-deno-tcp")?.met, false); // 0.75
    assert.equal(target("T1", "tunnelmux-deno-tcp", "bore", "cpu")?.met, true);
    assert.equal(target("T2", "tunnelmux-deno-tcp", "frp", "rss")?.met, false);
    assert.equal(target("T1", "frp", "direct"), undefined, "targets are tunnelmux's");
  });

  it("compares tunnelmux with the best foreign tunnel of each round", () => {
    // T1 (a rate): best peer per round is bore (500, 500); tunnelmux-deno-tcp 400, 600.
    assert.equal(ratio("T1", "tunnelmux-deno-tcp", "best-peer")?.median, (0.8 + 1.2) / 2);
    // CPU (a cost): the best is the lowest, frp's 1 (bore's is 2).
    assert.equal(ratio("T1", "tunnelmux-deno-tcp", "best-peer", "cpu")?.median, 1);
    assert.equal(ratio("T1", "frp", "best-peer"), undefined, "only tunnelmux against the best");
    const target = report.targets.find((t) =>
      t.scenario === "T1" && t.baseline === "tunnelmux-deno-tcp" && t.versus === "best-peer" &&
      t.metric === undefined
    );
    assert.equal(target?.goal, ">= 1.1x");
    assert.equal(target?.met, false); // 1.0 < 1.1
  });

  it("prints the resources table, the cost ratios and the skipped tunnels", () => {
    const text = formatReport(report);
    assert.match(text, /tunnelmux tunnel benchmark/);
    assert.match(text, /T1 CPU s\/GiB/);
    assert.match(text, /server RSS MiB after T2/);
    assert.match(text, /tunnelmux-deno-tcp vs frp \(rss\)/);
    assert.match(text, /tunnelmux-deno-tcp vs jsrelay-deno \(cpu\)/);
    assert.match(text, /jsrelay-deno\s+\S+ \[/, "the floor's row in the resources table");
    assert.match(text, /rathole: rathole not on PATH/);
    assert.doesNotMatch(text, /protocol benchmark/);
  });
});

describe("tunnel report: the request inspector's row", () => {
  it("pairs the inspector-on HTTP row with the same runtime's plain one", () => {
    const impls = ["http-direct", "http-tunnelmux-deno", "http-tunnelmux-deno-inspect"];
    const values: Record<string, [number, number]> = {
      "http-direct": [1000, 1000],
      "http-tunnelmux-deno": [500, 400],
      "http-tunnelmux-deno-inspect": [450, 400],
    };
    const samples: SampleRecord[] = [0, 1].flatMap((round) =>
      impls.map((impl) => ({
        round,
        scenario: T1.id,
        impl,
        ok: true,
        value: values[impl][round],
        ...(impl === "http-direct" ? {} : { cpu: impl.endsWith("-inspect") ? 1.5 : 1 }),
      }))
    );
    const report = buildReport(
      ENV,
      { rounds: 2 },
      [{ scenario: T1, workload: T1.full, suite: "tunnel" as const }],
      impls,
      samples,
      2,
      [],
    );
    const ratio = (metric?: string) =>
      report.ratios.find((r) =>
        r.baseline === "http-tunnelmux-deno-inspect" && r.versus === "http-tunnelmux-deno" &&
        r.metric === metric
      );
    assert.equal(ratio()?.median, (0.9 + 1) / 2);
    assert.equal(ratio("cpu")?.median, 1.5);
  });
});

describe("tunnel report: the UDP family", () => {
  it("pairs UDP tunnels with udp-direct and tunnelmux's with frp's and rathole's, never with TCP rows", () => {
    const U1 = TUNNEL_SCENARIOS.find((s) => s.id === "U1")!;
    const impls = ["direct", "udp-direct", "udp-tunnelmux-deno-fwd", "udp-frp", "udp-rathole"];
    const values: Record<string, number> = {
      "udp-direct": 100_000,
      "udp-tunnelmux-deno-fwd": 10_000,
      "udp-frp": 20_000,
      "udp-rathole": 5_000,
    };
    const samples: SampleRecord[] = Object.entries(values).map(([impl, value]) => ({
      round: 0,
      scenario: U1.id,
      impl,
      ok: true,
      value,
      ...(impl === "udp-direct" ? {} : { cpu: impl === "udp-frp" ? 4 : 2, rssServerMiB: 10 }),
    }));
    const report = buildReport(
      ENV,
      { rounds: 1 },
      [{ scenario: U1, workload: U1.full, suite: "tunnel" as const }],
      impls,
      samples,
      1,
      [],
    );
    const ratio = (baseline: string, versus: string, metric?: string) =>
      report.ratios.find((r) =>
        r.baseline === baseline && r.versus === versus && r.metric === metric
      );
    assert.equal(ratio("udp-tunnelmux-deno-fwd", "udp-direct")?.median, 0.1);
    assert.equal(ratio("udp-frp", "udp-direct")?.median, 0.2);
    assert.equal(ratio("udp-tunnelmux-deno-fwd", "udp-frp")?.median, 0.5);
    assert.equal(ratio("udp-tunnelmux-deno-fwd", "udp-frp", "cpu")?.median, 0.5);
    assert.equal(ratio("udp-tunnelmux-deno-fwd", "udp-rathole")?.median, 2);
    assert.equal(ratio("udp-tunnelmux-deno-fwd", "udp-rathole", "rss")?.median, 1);
    assert.ok(report.ratios.every((r) => r.versus !== "direct"), "no UDP row against TCP direct");
    assert.equal(report.results.some((r) => r.impl === "direct"), false, "direct ran no U1");
    assert.match(formatReport(report), /U1 CPU s\/100k dgram/);
  });
});
