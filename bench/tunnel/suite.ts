/**
 * The tunnel suite's runner: an unrecorded warm-up pass at quick sizes, then rounds with the
 * implementations interleaved per scenario (A B C, A B C, ...), every measurement in fresh
 * processes (see `measure.ts`).
 *
 * @module
 */

import type { SampleRecord } from "../report.ts";
import type { TunnelImpl } from "./impls.ts";
import { buildLoadgen } from "./loadgen.ts";
import { measureTunnel, type TunnelOutcome } from "./measure.ts";
import type { TunnelScenario, TunnelWorkload } from "./scenarios.ts";

/** What {@linkcode runTunnelSuite} runs. */
export interface TunnelRun {
  /** The implementations, `direct` among them, in table order. */
  impls: readonly TunnelImpl[];
  /** The scenarios with the workload to run each at. */
  scenarios: readonly { scenario: TunnelScenario; workload: TunnelWorkload }[];
  /** Measured rounds. */
  rounds: number;
  /** Whether to do the warm-up pass first (not for `--quick`). */
  warmUp: boolean;
  /** Bound on one load run. */
  timeoutMs: number;
  /** Progress lines. */
  log(line: string): void;
}

/** Whether `impl` runs `scenario`: UDP scenarios through UDP tunnels, TCP ones through the rest. */
export function runsIn(impl: TunnelImpl, scenario: TunnelScenario): boolean {
  return !!impl.udp === !!scenario.udp;
}

function summary(scenario: TunnelScenario, outcome: TunnelOutcome) {
  if (!outcome.ok) return `FAILED ${outcome.error}`;
  const parts = [`${outcome.value.toFixed(1)} ${scenario.metric.unit}`];
  if (outcome.p99 !== undefined) parts.push(`p99 ${outcome.p99.toFixed(1)}`);
  if (outcome.cpu !== undefined) parts.push(`${outcome.cpu.toFixed(2)} ${scenario.cpu!.unit}`);
  if (outcome.rssServerMiB !== undefined) {
    parts.push(`RSS ${outcome.rssServerMiB.toFixed(1)} + ${outcome.rssClientMiB!.toFixed(1)} MiB`);
  }
  return parts.join(", ");
}

/** Runs the tunnel suite and returns its samples. */
export async function runTunnelSuite(run: TunnelRun): Promise<SampleRecord[]> {
  const loadgen = await buildLoadgen();
  if (run.warmUp) {
    for (const { scenario } of run.scenarios) {
      for (const impl of run.impls.filter((impl) => runsIn(impl, scenario))) {
        const outcome = await measureTunnel(
          loadgen,
          impl,
          scenario,
          scenario.quick,
          Math.min(run.timeoutMs, 15_000),
        );
        run.log(`warm-up ${scenario.id} ${impl.id}: ${outcome.ok ? "ok" : outcome.error}`);
      }
    }
  }
  const samples: SampleRecord[] = [];
  for (let round = 0; round < run.rounds; round++) {
    for (const { scenario, workload } of run.scenarios) {
      for (const impl of run.impls.filter((impl) => runsIn(impl, scenario))) {
        const outcome = await measureTunnel(loadgen, impl, scenario, workload, run.timeoutMs);
        run.log(
          `[${round + 1}/${run.rounds}] ${scenario.id} ${impl.id}: ${summary(scenario, outcome)}`,
        );
        const base = { round, scenario: scenario.id, impl: impl.id };
        if (outcome.ok && Number.isFinite(outcome.value)) {
          samples.push({ ...base, ...outcome });
        } else {
          const error = outcome.ok ? "no value in the load's result" : outcome.error;
          samples.push({ ...base, ok: false, value: NaN, error });
        }
      }
    }
  }
  return samples;
}
