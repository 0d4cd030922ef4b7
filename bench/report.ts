/**
 * Turns samples into the result table, the paired-ratio table and the targets, as text
 * (stdout) and as a JSON document (`--json`). An `--svg` renderer can take the same
 * {@linkcode BenchReport}.
 *
 * @module
 */

import type { BenchEnv } from "./env.ts";
import type { Scenario } from "./scenarios.ts";
import { pairedRatio, type Spread, spread } from "./stats.ts";

/** One measurement: implementation × scenario × round. */
export interface SampleRecord {
  round: number;
  scenario: string;
  impl: string;
  ok: boolean;
  /** Headline value (NaN when failed). */
  value: number;
  /** p99 for S5. */
  p99?: number;
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
  /** Median p99 (S5). */
  p99?: number;
}

/** tunnelmux on one runtime against another implementation, paired per round. */
export interface RatioRow extends Spread {
  scenario: string;
  /** The numerator: `tunnelmux-deno` or `tunnelmux-bun`. */
  baseline: string;
  /** The denominator. */
  versus: string;
  /** `speedup` (rates: tunnelmux ÷ other, higher is better) or `latency` (lower is better). */
  kind: "speedup" | "latency";
}

/** One of the goals, checked against the measured median ratio. */
export interface TargetRow {
  scenario: string;
  baseline: string;
  versus: string;
  goal: string;
  ratio: number;
  met: boolean | null;
}

/** The whole report; what `--json` writes. */
export interface BenchReport {
  env: BenchEnv;
  options: Record<string, unknown>;
  scenarios: { id: string; title: string; unit: string; workload: unknown }[];
  impls: string[];
  results: ResultRow[];
  ratios: RatioRow[];
  targets: TargetRow[];
  samples: SampleRecord[];
}

/** The targets: tunnelmux vs `versus` family in `scenario`, `min` for rates, `max` for S5. */
const TARGETS: { scenario: string; versus: string; min?: number; max?: number }[] = [
  { scenario: "S1", versus: "libp2p-yamux", min: 3 },
  { scenario: "S1", versus: "hashicorp-go", min: 1.5 },
  { scenario: "S2", versus: "libp2p-yamux", min: 3 },
  { scenario: "S2", versus: "hashicorp-go", min: 1.5 },
  { scenario: "S3", versus: "libp2p-yamux", min: 2 },
  { scenario: "S3", versus: "raw-native", min: 0.7 },
  { scenario: "S4", versus: "raw-native", min: 0.9 },
  { scenario: "S5", versus: "raw-native", max: 1.3 },
];

function valuesOf(samples: SampleRecord[], scenario: string, impl: string, rounds: number) {
  const out = new Array<number>(rounds).fill(NaN);
  for (const s of samples) {
    if (s.scenario === scenario && s.impl === impl && s.ok) out[s.round] = s.value;
  }
  return out;
}

/** Builds the report from raw samples. */
export function buildReport(
  env: BenchEnv,
  options: Record<string, unknown>,
  scenarios: readonly { scenario: Scenario; workload: unknown }[],
  impls: readonly string[],
  samples: SampleRecord[],
  rounds: number,
): BenchReport {
  const results: ResultRow[] = [];
  const ratios: RatioRow[] = [];
  const targets: TargetRow[] = [];
  for (const { scenario } of scenarios) {
    for (const impl of impls) {
      const mine = samples.filter((s) => s.scenario === scenario.id && s.impl === impl);
      const failed = mine.filter((s) => !s.ok);
      const p99 = spread(mine.filter((s) => s.ok && s.p99 !== undefined).map((s) => s.p99!));
      results.push({
        scenario: scenario.id,
        impl,
        unit: scenario.metric.unit,
        ...spread(valuesOf(samples, scenario.id, impl, rounds)),
        failures: failed.length,
        ...(failed.length ? { error: failed[0].error } : {}),
        ...(p99.n ? { p99: p99.median } : {}),
      });
    }
    for (const baseline of impls.filter((i) => i.startsWith("tunnelmux-"))) {
      const runtime = baseline.slice("tunnelmux-".length);
      const base = valuesOf(samples, scenario.id, baseline, rounds);
      // Compare with the other JS implementations on the same runtime, and with Go.
      const others = impls.filter((i) =>
        i !== baseline && !i.startsWith("tunnelmux-") &&
        (i.endsWith(`-${runtime}`) || i.endsWith("-go"))
      );
      for (const versus of others) {
        const r = pairedRatio(base, valuesOf(samples, scenario.id, versus, rounds));
        const kind = scenario.metric.higher ? "speedup" : "latency";
        ratios.push({ scenario: scenario.id, baseline, versus, kind, ...r });
        const family = versus.endsWith("-go") ? versus : versus.slice(0, versus.lastIndexOf("-"));
        for (const t of TARGETS.filter((t) => t.scenario === scenario.id && t.versus === family)) {
          const goal = t.min !== undefined ? `>= ${t.min}x` : `<= ${t.max}x`;
          const met = r.n === 0
            ? null
            : t.min !== undefined
            ? r.median >= t.min
            : r.median <= t.max!;
          targets.push({ scenario: scenario.id, baseline, versus, goal, ratio: r.median, met });
        }
      }
    }
  }
  return {
    env,
    options,
    scenarios: scenarios.map(({ scenario, workload }) => ({
      id: scenario.id,
      title: scenario.title,
      unit: scenario.metric.unit,
      workload,
    })),
    impls: [...impls],
    results,
    ratios,
    targets,
    samples,
  };
}

function num(x: number): string {
  if (!Number.isFinite(x)) return "-";
  if (Math.abs(x) >= 100) return Math.round(x).toString();
  if (Math.abs(x) >= 10) return x.toFixed(1);
  return x.toFixed(2);
}

function table(header: string[], rows: string[][]): string {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i].length)));
  const line = (cells: string[]) =>
    cells.map((c, i) => (i === 0 ? c.padEnd(widths[i]) : c.padStart(widths[i]))).join("  ");
  return [line(header), widths.map((w) => "-".repeat(w)).join("  "), ...rows.map(line)].join("\n");
}

/** The report as plain text for stdout. */
export function formatReport(report: BenchReport): string {
  const e = report.env;
  const out: string[] = [
    `tunnelmux protocol benchmark, ${e.date}`,
    `${e.cpus} CPUs (${e.cpuModel}), ${e.os}; ${e.deno}; bun ${e.bun}; ${e.go}`,
    `rounds: ${report.options.rounds}${report.options.quick ? " (quick sizes)" : ""}; ` +
    "median [min-max] over rounds; every byte verified by the client",
    "",
  ];
  for (const s of report.scenarios) out.push(`${s.id}: ${s.title} (${s.unit})`);
  out.push("");
  const scenarioIds = report.scenarios.map((s) => s.id);
  const rows = report.impls.map((impl) => [
    impl,
    ...scenarioIds.map((id) => {
      const r = report.results.find((x) => x.scenario === id && x.impl === impl)!;
      if (r.n === 0) return `FAILED(${r.failures})`;
      const fails = r.failures ? ` !${r.failures}` : "";
      const p99 = r.p99 !== undefined ? ` p99 ${num(r.p99)}` : "";
      return `${num(r.median)} [${num(r.min)}-${num(r.max)}]${p99}${fails}`;
    }),
  ]);
  out.push(table(["impl", ...report.scenarios.map((s) => `${s.id} ${s.unit}`)], rows));
  const failures = report.results.filter((r) => r.failures > 0);
  if (failures.length) {
    out.push("", "failures (! = failed rounds):");
    for (const f of failures) {
      out.push(`  ${f.impl} ${f.scenario}: ${f.failures} failed: ${f.error}`);
    }
  }
  if (report.ratios.length) {
    out.push(
      "",
      "ratios, paired per round (S1-S4: tunnelmux / other, higher is better; " +
        "S5: tunnelmux p50 / other p50, lower is better):",
    );
    const pairs = [...new Set(report.ratios.map((r) => `${r.baseline} vs ${r.versus}`))];
    const ratioRows = pairs.map((pair) => [
      pair,
      ...scenarioIds.map((id) => {
        const r = report.ratios.find((x) =>
          x.scenario === id && `${x.baseline} vs ${x.versus}` === pair
        );
        return r && r.n ? `${num(r.median)}x [${num(r.min)}-${num(r.max)}]` : "-";
      }),
    ]);
    out.push(table(["pair", ...scenarioIds], ratioRows));
  }
  if (report.targets.length) {
    out.push("", "targets:");
    for (const t of report.targets) {
      const verdict = t.met === null ? "n/a" : t.met ? "met" : "MISSED";
      out.push(
        `  ${t.scenario} ${t.baseline} vs ${t.versus} ${t.goal}: ${num(t.ratio)}x ${verdict}`,
      );
    }
  }
  return out.join("\n");
}
