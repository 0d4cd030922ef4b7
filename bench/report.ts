/**
 * Turns samples into the result table, the paired-ratio table and the targets, as text
 * (stdout) and as a JSON document (`--json`). An `--svg` renderer can take the same
 * {@linkcode BenchReport}. Two suites share it: the protocol scenarios (S1–S5, tunnelmux against
 * other yamux implementations) and the tunnel scenarios (T1–T4, every tunnel against `direct`,
 * with the tunnel processes' CPU and RSS as extras).
 *
 * @module
 */

import type { BenchEnv } from "./env.ts";
import type { Metric } from "./scenarios.ts";
import { pairedRatio, type Spread, spread } from "./stats.ts";
import type { MemoryReport } from "./memory.ts";
import { textTable } from "./text_table.ts";

/** Which suite a scenario belongs to; it decides what its ratios compare. */
export type Suite = "protocol" | "tunnel";

/** What the report needs of a scenario (protocol and tunnel scenarios both have it). */
export interface ReportScenario {
  id: string;
  title: string;
  metric: Metric;
  /** Tunnel scenarios: the unit CPU time is reported in (`CPU s/GiB`). */
  cpu?: { unit: string };
}

/** One measurement: implementation × scenario × round. */
export interface SampleRecord {
  round: number;
  scenario: string;
  impl: string;
  ok: boolean;
  /** Headline value (NaN when failed). */
  value: number;
  /** p99 for S5, T3, T4. */
  p99?: number;
  /** Tunnel suite: daemon + client CPU seconds per the scenario's CPU unit (T1, T2). */
  cpu?: number;
  /** Tunnel suite: the server side's (daemon's) RSS in MiB after the timed part (T2). */
  rssServerMiB?: number;
  /** Tunnel suite: the client side's RSS in MiB after the timed part (T2). */
  rssClientMiB?: number;
  error?: string;
}

/** Summary of one implementation in one scenario. */
export interface ResultRow extends Spread {
  scenario: string;
  impl: string;
  unit: string;
  failures: number;
  /** The first failure's message. */
  error?: string;
  /** Median p99 (S5, T3, T4). */
  p99?: number;
  /** Tunnel suite: daemon + client CPU seconds per `cpuUnit`, over rounds. */
  cpu?: Spread;
  /** The unit of `cpu` (`CPU s/GiB`, `CPU s/1000 conn`). */
  cpuUnit?: string;
  /** Tunnel suite: the server side's RSS in MiB after T2, over rounds. */
  rssServerMiB?: Spread;
  /** Tunnel suite: the client side's RSS in MiB after T2, over rounds. */
  rssClientMiB?: Spread;
}

/**
 * One implementation against another, paired per round: protocol suite, tunnelmux on one runtime
 * against the others; tunnel suite, every tunnel against `direct`, WebSocket against TCP,
 * tunnelmux against its runtime's floor (`jsrelay-RUNTIME`) in every figure, and tunnelmux's CPU
 * and RSS against the foreign tunnels'.
 */
export interface RatioRow extends Spread {
  scenario: string;
  /** The numerator (`tunnelmux-deno`, `tunnelmux-bun-ws`, `frp`). */
  baseline: string;
  /** The denominator. */
  versus: string;
  /**
   * `speedup` (rates: baseline ÷ versus, higher is better), `latency` (lower is better), or
   * `cost` (CPU or RSS, lower is better).
   */
  kind: "speedup" | "latency" | "cost";
  /**
   * What is compared when not the headline value: `cpu`, `rss` (the server side's), `rss-client`
   * or `p99` (of a latency).
   */
  metric?: RatioMetric;
}

/** A figure compared other than the headline value (`rss` is the server side's). */
export type RatioMetric = "cpu" | "rss" | "rss-client" | "p99";

/** One of the goals, checked against the measured median ratio. */
export interface TargetRow {
  scenario: string;
  baseline: string;
  versus: string;
  goal: string;
  ratio: number;
  met: boolean | null;
  /** As in {@linkcode RatioRow}: `cpu`, `rss` or `p99` when not the headline value. */
  metric?: RatioMetric;
}

/** An implementation that could not run here (e.g. a foreign tunnel's binary is missing). */
export interface SkippedImpl {
  impl: string;
  reason: string;
}

/** The whole report; what `--json` writes. */
export interface BenchReport {
  env: BenchEnv;
  options: Record<string, unknown>;
  scenarios: {
    id: string;
    title: string;
    unit: string;
    workload: unknown;
    /** True when bigger is better (optional for readers of older reports). */
    higher?: boolean;
    /** The suite; absent means `protocol` (reports from before the tunnel suite). */
    suite?: Suite;
  }[];
  impls: string[];
  /** One row per scenario and implementation that ran in it. */
  results: ResultRow[];
  ratios: RatioRow[];
  targets: TargetRow[];
  samples: SampleRecord[];
  /** Implementations left out, and why (absent when none). */
  skipped?: SkippedImpl[];
  /** M1, when the memory suite ran (its own shape: see `memory.ts`). */
  memory?: MemoryReport;
}

/** A goal on a ratio: `min` for rates, `max` for latencies and costs. */
interface Target {
  scenario: string;
  versus: string;
  min?: number;
  max?: number;
  metric?: RatioMetric;
}

/** The protocol targets: tunnelmux vs the `versus` family in `scenario`. */
const TARGETS: Target[] = [
  { scenario: "S1", versus: "libp2p-yamux", min: 3 },
  { scenario: "S1", versus: "hashicorp-go", min: 1.5 },
  { scenario: "S2", versus: "libp2p-yamux", min: 3 },
  { scenario: "S2", versus: "hashicorp-go", min: 1.5 },
  { scenario: "S3", versus: "libp2p-yamux", min: 2 },
  { scenario: "S3", versus: "raw-native", min: 0.7 },
  { scenario: "S4", versus: "raw-native", min: 0.9 },
  { scenario: "S5", versus: "raw-native", max: 1.3 },
];

/**
 * The name of the synthetic peer that is, in each round, the best foreign tunnel that ran in the
 * scenario (highest rate, lowest latency or cost), for the targets.
 */
export const BEST_PEER = "best-peer";

/** The foreign tunnels (`tunnel/impls.ts`), the candidates for {@linkcode BEST_PEER}. */
const FOREIGN_TUNNELS = ["frp", "chisel", "bore", "rathole"];

/**
 * The tunnel targets for every tunnelmux tunnel (`tcp` stands for the same runtime's
 * TCP tunnel): against direct TCP; WebSocket ≥ 0.8× TCP (latencies: ≤ 1/0.8); CPU per GiB and
 * per 1000 connections at or below bore's; the daemon's RSS after T2 at or below frps's.
 */
const TUNNEL_TARGETS: Target[] = [
  { scenario: "T1", versus: "direct", min: 0.3 },
  { scenario: "T2", versus: "direct", min: 0.4 },
  { scenario: "T3", versus: "direct", max: 5 },
  { scenario: "T4", versus: "direct", max: 2.5 },
  { scenario: "T1", versus: "tcp", min: 0.8 },
  { scenario: "T2", versus: "tcp", min: 0.8 },
  { scenario: "T3", versus: "tcp", max: 1.25 },
  { scenario: "T4", versus: "tcp", max: 1.25 },
  { scenario: "T1", versus: "bore", max: 1, metric: "cpu" },
  { scenario: "T2", versus: "bore", max: 1, metric: "cpu" },
  { scenario: "T2", versus: "frp", max: 1, metric: "rss" },
  // Against the best foreign tunnel of each round (see `bestPeer`).
  { scenario: "T1", versus: BEST_PEER, min: 1.1 },
  { scenario: "T2", versus: BEST_PEER, min: 1 },
  { scenario: "T3", versus: BEST_PEER, max: 1 },
  { scenario: "T3", versus: BEST_PEER, max: 1.5, metric: "p99" },
  { scenario: "T4", versus: BEST_PEER, max: 1 },
  { scenario: "T1", versus: BEST_PEER, max: 1, metric: "cpu" },
  { scenario: "T2", versus: BEST_PEER, max: 1, metric: "cpu" },
];

/** Per round, the field `pick` of `impl`'s successful samples in `scenario` (NaN elsewhere). */
function valuesOf(
  samples: SampleRecord[],
  scenario: string,
  impl: string,
  rounds: number,
  pick: (s: SampleRecord) => number | undefined = (s) => s.value,
) {
  const out = new Array<number>(rounds).fill(NaN);
  for (const s of samples) {
    if (s.scenario === scenario && s.impl === impl && s.ok) out[s.round] = pick(s) ?? NaN;
  }
  return out;
}

/** What a ratio compares: the headline value, the CPU figure or the server side's RSS. */
const PICK = {
  value: (s: SampleRecord) => s.value,
  cpu: (s: SampleRecord) => s.cpu,
  rss: (s: SampleRecord) => s.rssServerMiB,
  "rss-client": (s: SampleRecord) => s.rssClientMiB,
  p99: (s: SampleRecord) => s.p99,
};

/**
 * Per round, the best of the foreign tunnels' figures `pick` in `scenario`: the highest when
 * `higher`, else the lowest (NaN in a round where none has one).
 */
function bestPeer(
  samples: SampleRecord[],
  scenario: string,
  impls: readonly string[],
  rounds: number,
  pick: (s: SampleRecord) => number | undefined,
  higher: boolean,
): number[] {
  const peers = impls.filter((i) => FOREIGN_TUNNELS.includes(i));
  const series = peers.map((peer) => valuesOf(samples, scenario, peer, rounds, pick));
  return Array.from({ length: rounds }, (_, round) => {
    const values = series.map((s) => s[round]).filter((v) => Number.isFinite(v));
    if (values.length === 0) return NaN;
    return higher ? Math.max(...values) : Math.min(...values);
  });
}

/** A ratio to compute: numerator, denominator, and the figure compared (the headline when absent). */
type Pair = [baseline: string, versus: string, metric?: RatioMetric];

/** The pairs a scenario's ratios compare. */
function ratioPairs(suite: Suite, impls: readonly string[]): Pair[] {
  const pairs: Pair[] = [];
  if (suite === "protocol") {
    for (const baseline of impls.filter((i) => i.startsWith("tunnelmux-"))) {
      const runtime = baseline.slice("tunnelmux-".length);
      // Compare with the other JS implementations on the same runtime, and with Go.
      for (const versus of impls) {
        if (
          versus !== baseline && !versus.startsWith("tunnelmux-") &&
          (versus.endsWith(`-${runtime}`) || versus.endsWith("-go"))
        ) pairs.push([baseline, versus]);
      }
    }
    return pairs;
  }
  // Each family against its own baseline: raw tunnels against `direct`, HTTP ones against
  // `http-direct`, UDP ones against `udp-direct`.
  const baselines = ["direct", "http-direct", "udp-direct"];
  for (const baseline of impls.filter((i) => !baselines.includes(i))) {
    const family = /^(http|udp)-/.exec(baseline)?.[1];
    const direct = family ? `${family}-direct` : "direct";
    if (impls.includes(direct)) pairs.push([baseline, direct]);
  }
  // UDP: tunnelmux's against frp's and rathole's UDP tunnels, figure, CPU and RSS.
  for (const baseline of impls.filter((i) => i.startsWith("udp-tunnelmux-"))) {
    for (const versus of ["udp-frp", "udp-rathole"].filter((v) => impls.includes(v))) {
      pairs.push([baseline, versus], [baseline, versus, "cpu"], [baseline, versus, "rss"]);
    }
  }
  // HTTP tunnels by name: tunnelmux's against frp's HTTP proxy, figure, CPU and RSS.
  for (const baseline of impls.filter((i) => i.startsWith("http-tunnelmux-"))) {
    if (impls.includes("http-frp")) {
      pairs.push([baseline, "http-frp"], [baseline, "http-frp", "cpu"], [
        baseline,
        "http-frp",
        "rss",
      ]);
    }
  }
  // The request inspector on against off, same runtime: what watching the requests costs.
  for (const inspect of impls.filter((i) => /^http-tunnelmux-.*-inspect$/.test(i))) {
    const plain = inspect.replace(/-inspect$/, "");
    if (impls.includes(plain)) {
      pairs.push([inspect, plain], [inspect, plain, "cpu"], [inspect, plain, "p99"]);
    }
  }
  for (const ws of impls.filter((i) => /^tunnelmux-.*-ws$/.test(i))) {
    const tcp = ws.replace(/-ws$/, "-tcp");
    if (impls.includes(tcp)) pairs.push([ws, tcp]);
  }
  // The cluster's relay hop against the owner node alone: the cost of the hop, figure and CPU.
  for (const relay of impls.filter((i) => /^tunnelmux-.*-relay$/.test(i))) {
    const tcp = relay.replace(/-relay$/, "-tcp");
    if (impls.includes(tcp)) pairs.push([relay, tcp], [relay, tcp, "cpu"]);
  }
  // Each tunnelmux tunnel against its runtime's floor, two plain relays: every figure the
  // summary has (those a scenario lacks are dropped below).
  for (const baseline of impls.filter((i) => /^tunnelmux-(deno|bun)-/.test(i))) {
    const floor = `jsrelay-${baseline.split("-")[1]}`;
    if (!impls.includes(floor)) continue;
    for (const metric of [undefined, "cpu", "rss", "rss-client", "p99"] as const) {
      pairs.push([baseline, floor, metric]);
    }
  }
  // Costs only against the foreign tunnel the target names (CPU: bore, RSS: frp).
  for (const baseline of impls.filter((i) => i.startsWith("tunnelmux-"))) {
    if (impls.includes("bore")) pairs.push([baseline, "bore", "cpu"]);
    if (impls.includes("frp")) pairs.push([baseline, "frp", "rss"]);
  }
  // Every tunnelmux tunnel against the best foreign tunnel of each round.
  if (impls.some((i) => FOREIGN_TUNNELS.includes(i))) {
    for (const baseline of impls.filter((i) => i.startsWith("tunnelmux-"))) {
      pairs.push([baseline, BEST_PEER], [baseline, BEST_PEER, "cpu"], [baseline, BEST_PEER, "p99"]);
    }
  }
  return pairs;
}

/** The target family `versus` belongs to, relative to `baseline` (see the target tables). */
function targetFamily(suite: Suite, baseline: string, versus: string): string {
  if (suite === "tunnel") {
    return versus === baseline.replace(/-ws$/, "-tcp") && versus !== baseline ? "tcp" : versus;
  }
  return versus.endsWith("-go") ? versus : versus.slice(0, versus.lastIndexOf("-"));
}

/** Summary of the optional per-sample figure `pick`, or nothing when no sample has it. */
function extra(mine: SampleRecord[], pick: (s: SampleRecord) => number | undefined) {
  const values = mine.filter((s) => s.ok).map(pick).filter((v): v is number => v !== undefined);
  const summary = spread(values);
  return summary.n ? summary : undefined;
}

/** Builds the report from raw samples. */
export function buildReport(
  env: BenchEnv,
  options: Record<string, unknown>,
  scenarios: readonly { scenario: ReportScenario; workload: unknown; suite: Suite }[],
  impls: readonly string[],
  samples: SampleRecord[],
  rounds: number,
  skipped: SkippedImpl[] = [],
): BenchReport {
  const results: ResultRow[] = [];
  const ratios: RatioRow[] = [];
  const targets: TargetRow[] = [];
  for (const { scenario, suite } of scenarios) {
    const ran = impls.filter((impl) =>
      samples.some((s) => s.scenario === scenario.id && s.impl === impl)
    );
    for (const impl of ran) {
      const mine = samples.filter((s) => s.scenario === scenario.id && s.impl === impl);
      const failed = mine.filter((s) => !s.ok);
      const p99 = extra(mine, (s) => s.p99);
      const cpu = extra(mine, PICK.cpu);
      const rssServer = extra(mine, PICK.rss);
      const rssClient = extra(mine, (s) => s.rssClientMiB);
      results.push({
        scenario: scenario.id,
        impl,
        unit: scenario.metric.unit,
        ...spread(valuesOf(samples, scenario.id, impl, rounds)),
        failures: failed.length,
        ...(failed.length ? { error: failed[0].error } : {}),
        ...(p99 ? { p99: p99.median } : {}),
        ...(cpu ? { cpu, cpuUnit: scenario.cpu?.unit } : {}),
        ...(rssServer ? { rssServerMiB: rssServer } : {}),
        ...(rssClient ? { rssClientMiB: rssClient } : {}),
      });
    }
    for (const [baseline, versus, metric] of ratioPairs(suite, ran)) {
      const pick = PICK[metric ?? "value"];
      // Higher is better for a rate's headline value; for CPU, RSS and a p99, lower is.
      const higher = !metric && scenario.metric.higher === true;
      const r = pairedRatio(
        valuesOf(samples, scenario.id, baseline, rounds, pick),
        versus === BEST_PEER
          ? bestPeer(samples, scenario.id, ran, rounds, pick, higher)
          : valuesOf(samples, scenario.id, versus, rounds, pick),
      );
      const kind = metric === "p99"
        ? "latency"
        : metric
        ? "cost"
        : scenario.metric.higher
        ? "speedup"
        : "latency";
      // CPU and RSS pairs are tried in every tunnel scenario; only those with figures are kept.
      if (!metric || r.n > 0) {
        ratios.push({
          scenario: scenario.id,
          baseline,
          versus,
          kind,
          ...(metric ? { metric } : {}),
          ...r,
        });
      }
      if (!baseline.startsWith("tunnelmux-")) continue;
      const family = targetFamily(suite, baseline, versus);
      const table = suite === "tunnel" ? TUNNEL_TARGETS : TARGETS;
      for (
        const t of table.filter((t) =>
          t.scenario === scenario.id && t.versus === family && t.metric === metric
        )
      ) {
        const goal = t.min !== undefined ? `>= ${t.min}x` : `<= ${t.max}x`;
        const met = r.n === 0 ? null : t.min !== undefined ? r.median >= t.min : r.median <= t.max!;
        targets.push({
          scenario: scenario.id,
          baseline,
          versus,
          goal,
          ratio: r.median,
          met,
          ...(metric ? { metric } : {}),
        });
      }
    }
  }
  return {
    env,
    options,
    scenarios: scenarios.map(({ scenario, workload, suite }) => ({
      id: scenario.id,
      title: scenario.title,
      unit: scenario.metric.unit,
      workload,
      higher: scenario.metric.higher,
      suite,
    })),
    impls: [...impls],
    results,
    ratios,
    targets,
    samples,
    ...(skipped.length ? { skipped } : {}),
  };
}

function num(x: number): string {
  if (!Number.isFinite(x)) return "-";
  if (Math.abs(x) >= 100) return Math.round(x).toString();
  if (Math.abs(x) >= 10) return x.toFixed(1);
  return x.toFixed(2);
}

function cell(r: Spread | undefined, suffix = ""): string {
  return r && r.n ? `${num(r.median)}${suffix} [${num(r.min)}-${num(r.max)}]` : "-";
}

const SUITE_TITLE: Record<Suite, string> = {
  protocol: "tunnelmux protocol benchmark",
  tunnel: "tunnelmux tunnel benchmark",
};

const RATIO_LEGEND: Record<Suite, string> = {
  protocol: "ratios, paired per round (S1-S4: tunnelmux / other, higher is better; " +
    "S5: tunnelmux p50 / other p50, lower is better):",
  tunnel: "ratios, paired per round (T1, T2: A / B, higher is better; T3, T4: p50 of A / p50 " +
    "of B, lower is better; cpu, rss (server side), rss-client, p99: A / B, lower is better; " +
    "jsrelay-RUNTIME is that runtime's floor, two plain relays):",
};

/** One suite's tables: results, resources (tunnel), failures, ratios, targets. */
function formatSuite(report: BenchReport, suite: Suite): string[] {
  const scenarios = report.scenarios.filter((s) => (s.suite ?? "protocol") === suite);
  const ids = scenarios.map((s) => s.id);
  const results = report.results.filter((r) => ids.includes(r.scenario));
  const impls = report.impls.filter((impl) => results.some((r) => r.impl === impl));
  const row = (id: string, impl: string) =>
    results.find((x) => x.scenario === id && x.impl === impl);
  const out: string[] = [];
  for (const s of scenarios) out.push(`${s.id}: ${s.title} (${s.unit})`);
  out.push("");
  const rows = impls.map((impl) => [
    impl,
    ...ids.map((id) => {
      const r = row(id, impl);
      if (!r) return "-";
      if (r.n === 0) return `FAILED(${r.failures})`;
      const fails = r.failures ? ` !${r.failures}` : "";
      const p99 = r.p99 !== undefined ? ` p99 ${num(r.p99)}` : "";
      return `${num(r.median)} [${num(r.min)}-${num(r.max)}]${p99}${fails}`;
    }),
  ]);
  out.push(textTable(["impl", ...scenarios.map((s) => `${s.id} ${s.unit}`)], rows));
  const withCpu = results.filter((r) => r.cpu);
  const withRss = results.filter((r) => r.rssServerMiB);
  if (withCpu.length || withRss.length) {
    // Resources of the tunnel's two processes (the load and the backend are not counted).
    const cpuCols = [...new Set(withCpu.map((r) => `${r.scenario} ${r.cpuUnit}`))];
    const rssCols = [...new Set(withRss.map((r) => r.scenario))];
    const header = [
      "impl (server + client processes)",
      ...cpuCols,
      ...rssCols.flatMap((id) => [`server RSS MiB after ${id}`, `client RSS MiB after ${id}`]),
    ];
    const resourceRows = impls.filter((impl) => results.some((r) => r.impl === impl && r.cpu))
      .map((impl) => [
        impl,
        ...cpuCols.map((col) => cell(row(col.split(" ")[0], impl)?.cpu)),
        ...rssCols.flatMap((id) => [
          cell(row(id, impl)?.rssServerMiB),
          cell(row(id, impl)?.rssClientMiB),
        ]),
      ]);
    out.push("", "CPU (user + system, timed part only) and RSS of the tunnel's processes:");
    out.push(textTable(header, resourceRows));
  }
  const failures = results.filter((r) => r.failures > 0);
  if (failures.length) {
    out.push("", "failures (! = failed rounds):");
    for (const f of failures) {
      out.push(`  ${f.impl} ${f.scenario}: ${f.failures} failed: ${f.error}`);
    }
  }
  const ratios = report.ratios.filter((r) => ids.includes(r.scenario));
  if (ratios.length) {
    out.push("", RATIO_LEGEND[suite]);
    const label = (r: RatioRow) =>
      `${r.baseline} vs ${r.versus}${r.metric ? ` (${r.metric})` : ""}`;
    const pairs = [...new Set(ratios.map(label))];
    const ratioRows = pairs.map((pair) => [
      pair,
      ...ids.map((id) => cell(ratios.find((x) => x.scenario === id && label(x) === pair), "x")),
    ]);
    out.push(textTable(["pair", ...ids], ratioRows));
  }
  const targets = report.targets.filter((t) => ids.includes(t.scenario));
  if (targets.length) {
    out.push("", "targets:");
    for (const t of targets) {
      const verdict = t.met === null ? "n/a" : t.met ? "met" : "MISSED";
      const what = t.metric ? ` ${t.metric}` : "";
      out.push(
        `  ${t.scenario}${what} ${t.baseline} vs ${t.versus} ${t.goal}: ${
          num(t.ratio)
        }x ${verdict}`,
      );
    }
  }
  return out;
}

/** The report as plain text for stdout: a block per suite that ran. */
export function formatReport(report: BenchReport): string {
  const e = report.env;
  const out: string[] = [];
  for (const suite of ["protocol", "tunnel"] as const) {
    if (!report.scenarios.some((s) => (s.suite ?? "protocol") === suite)) continue;
    if (out.length) out.push("", "");
    out.push(
      `${SUITE_TITLE[suite]}, ${e.date}`,
      `${e.cpus} CPUs (${e.cpuModel}), ${e.os}; ${e.deno}; bun ${e.bun}; ${e.go}`,
      `rounds: ${report.options.rounds}${report.options.quick ? " (quick sizes)" : ""}; ` +
        "median [min-max] over rounds; every byte verified by the " +
        (suite === "protocol" ? "client" : "load generator"),
      "",
      ...formatSuite(report, suite),
    );
  }
  if (report.skipped?.length) {
    out.push("", "skipped:");
    for (const s of report.skipped) out.push(`  ${s.impl}: ${s.reason}`);
  }
  return out.join("\n");
}
