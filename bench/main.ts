/**
 * `bench`: the protocol benchmark (S1–S5) across tunnelmux, libp2p-yamux, yamux-js, the Go yamux
 * peers and raw TCP. Every measurement is a fresh server process and a fresh client process;
 * rounds interleave the implementations so drift hits them all alike. Progress goes to stderr,
 * the tables to stdout, everything to `--json FILE`.
 *
 * Structure, so the rest of the issue fits: scenarios are data (`scenarios.ts`), implementations
 * are commands (`impls.ts`), a measurement is a process pair (`process.ts`), and the report is
 * built from samples (`report.ts`). The tunnel scenarios (T1–T4, M1) become a second scenario
 * table with their own worker commands (daemon + client + echo backend); `--svg` renders a
 * {@linkcode BenchReport} like `formatReport` does.
 *
 * @module
 */

import { writeFileSync } from "node:fs";
import process from "node:process";
import { parseArgs } from "node:util";
import { benchEnv } from "./env.ts";
import { allImpls, type JsRuntime, selectImpls } from "./impls.ts";
import { measureOnce } from "./process.ts";
import { type BenchReport, buildReport, formatReport, type SampleRecord } from "./report.ts";
import { scenarioById, SCENARIOS } from "./scenarios.ts";

export type { BenchReport };

const HELP = `tunnelmux bench: protocol scenarios S1-S5 across yamux implementations

Usage:
  deno task bench [options]      (or: bun bench/main.ts [options])

Options:
  --rounds N          measured rounds (default 5; --quick: 1)
  --quick             tiny sizes, one round, no warm-up pass (a smoke test, not a measurement)
  --only a,b          implementations whose id starts with one of these
                      (tunnelmux, libp2p-yamux, yamux-js, hashicorp, goyamux, raw-native,
                      raw-node, raw, or full ids like tunnelmux-bun)
  --runtime deno|bun  only JS implementations on this runtime (default: both); Go always runs
  --scenarios S1,S3   only these scenarios (default: all)
  --timeout SECONDS   bound on one client process (default 300)
  --json FILE         write the full report (environment, samples, summaries, ratios) as JSON
  -h, --help          show this help

Scenarios (client-opened echo streams, every byte verified by the client):
${SCENARIOS.map((s) => `  ${s.id}  ${s.title} (${s.metric.unit})`).join("\n")}

Raw TCP runs the same workloads without a mux: S1/S2 open a connection per stream, S3/S4 are
one bulk echo of the same bytes, S5 round trips on one connection.`;

function list(text: string | undefined): string[] {
  return (text ?? "").split(",").map((s) => s.trim()).filter(Boolean);
}

async function main(): Promise<number> {
  const args = process.argv.slice(2);
  if (args[0] === "--") args.shift(); // `deno task bench -- --quick` passes the separator on
  const { values } = parseArgs({
    args,
    options: {
      rounds: { type: "string" },
      quick: { type: "boolean", default: false },
      only: { type: "string" },
      runtime: { type: "string" },
      scenarios: { type: "string" },
      timeout: { type: "string", default: "300" },
      json: { type: "string" },
      help: { type: "boolean", short: "h", default: false },
    },
  });
  if (values.help) {
    console.log(HELP);
    return 0;
  }
  const quick = values.quick;
  const rounds = Number(values.rounds ?? (quick ? 1 : 5));
  if (!Number.isInteger(rounds) || rounds < 1) throw new Error("--rounds must be >= 1");
  const timeoutMs = Number(values.timeout) * 1000;
  if (!(timeoutMs > 0)) throw new Error("--timeout must be a positive number of seconds");
  if (values.runtime && values.runtime !== "deno" && values.runtime !== "bun") {
    throw new Error("--runtime must be deno or bun");
  }
  const runtimes: JsRuntime[] = values.runtime ? [values.runtime as JsRuntime] : ["deno", "bun"];
  const impls = selectImpls(allImpls(runtimes), list(values.only));
  const scenarioIds = list(values.scenarios);
  const scenarios = (scenarioIds.length ? scenarioIds.map(scenarioById) : [...SCENARIOS]).map(
    (scenario) => ({ scenario, workload: quick ? scenario.quick : scenario.full }),
  );
  const env = benchEnv();
  const log = (line: string) => process.stderr.write(line + "\n");
  log(`bench: ${impls.map((i) => i.id).join(", ")}; ${rounds} round(s); ${env.cpus} CPUs`);

  // One unrecorded pass at quick sizes: builds the Go peers, warms the module and disk caches.
  // (Each client also warms up in-process before its timed run.)
  if (!quick) {
    for (const { scenario } of scenarios) {
      for (const impl of impls) {
        const outcome = await measureOnce(
          await impl.server(),
          (address) => impl.client(address, scenario, scenario.quick),
          Math.min(timeoutMs, 15_000), // quick sizes: a hang need not cost the full bound
        );
        log(`warm-up ${scenario.id} ${impl.id}: ${outcome.ok ? "ok" : outcome.error}`);
      }
    }
  }

  const samples: SampleRecord[] = [];
  for (let round = 0; round < rounds; round++) {
    for (const { scenario, workload } of scenarios) {
      // Interleaved: every implementation once per scenario per round (A B C, A B C, ...).
      for (const impl of impls) {
        const outcome = await measureOnce(
          await impl.server(),
          (address) => impl.client(address, scenario, workload),
          timeoutMs,
        );
        const where = `[${round + 1}/${rounds}] ${scenario.id} ${impl.id}`;
        if (outcome.ok) {
          const sample = impl.parse(outcome.line, scenario, workload);
          const ok = Number.isFinite(sample.value);
          samples.push({
            round,
            scenario: scenario.id,
            impl: impl.id,
            ok,
            ...sample,
            ...(ok ? {} : { error: `no value in ${JSON.stringify(outcome.line)}` }),
          });
          const p99 = sample.p99 !== undefined ? ` (p99 ${sample.p99})` : "";
          log(`${where}: ${sample.value} ${scenario.metric.unit}${p99}`);
        } else {
          samples.push({
            round,
            scenario: scenario.id,
            impl: impl.id,
            ok: false,
            value: NaN,
            error: outcome.error,
          });
          log(`${where}: FAILED ${outcome.error}`);
        }
      }
    }
  }

  const report = buildReport(
    env,
    { rounds, quick, only: values.only ?? null, runtime: values.runtime ?? null },
    scenarios,
    impls.map((i) => i.id),
    samples,
    rounds,
  );
  console.log(formatReport(report));
  if (values.json) {
    // NaN is not JSON: failed values become null.
    writeFileSync(values.json, JSON.stringify(report, (_k, v) => Number.isNaN(v) ? null : v, 2));
    log(`bench: wrote ${values.json}`);
  }
  return 0;
}

if (import.meta.main) {
  try {
    process.exitCode = await main();
  } catch (error) {
    console.error(`bench: ${(error as Error).message}\n\n${HELP}`);
    process.exitCode = 2;
  }
}
