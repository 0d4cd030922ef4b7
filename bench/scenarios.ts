/**
 * The protocol benchmark scenarios (S1–S5): what each one sends, at full and at `--quick` size,
 * and which number it reports. The tunnel scenarios (T1–T4) have their own table in
 * `tunnel/scenarios.ts` and share {@linkcode Metric}.
 *
 * @module
 */

/** How a scenario's workload is driven (see `bench/drive.ts`). */
export type ScenarioKind = "streams" | "bulk" | "rtt";

/** What a scenario's headline number means; `higher` tells ratios which way is better. */
export interface Metric {
  /** Unit printed in the table. */
  unit: "streams/s" | "MiB/s" | "MB/s" | "conn/s" | "µs" | "dgram/s" | "% lost" | "ms";
  /** True when bigger is better (rates); false for latencies and loss. */
  higher: boolean;
}

/** The sizes of one scenario run. */
export interface Workload {
  /** Streams (S1–S3) or round trips (S5); 1 for bulk. */
  count: number;
  /** Bytes per stream (S1–S3), per round trip (S5), or in all (S4). */
  size: number;
  /** Streams in flight at once (S1–S3). */
  inflight: number;
}

/** One benchmark scenario. */
export interface Scenario {
  /** Short id used on the command line and in JSON (`S1`). */
  id: string;
  /** One-line description for the table. */
  title: string;
  /** How the workload is driven. */
  kind: ScenarioKind;
  /** The headline metric. */
  metric: Metric;
  /** Full-size workload. */
  full: Workload;
  /** `--quick` workload: tiny, for CI smoke runs. */
  quick: Workload;
}

const KiB = 1024;
const MiB = 1024 * KiB;
const RATE_STREAMS: Metric = { unit: "streams/s", higher: true };
const RATE_BYTES: Metric = { unit: "MiB/s", higher: true };
const LATENCY: Metric = { unit: "µs", higher: false };

/** S1–S5 in report order. */
export const SCENARIOS: readonly Scenario[] = [
  {
    id: "S1",
    title: "2500 streams x 1 KiB, one at a time",
    kind: "streams",
    metric: RATE_STREAMS,
    full: { count: 2500, size: KiB, inflight: 1 },
    quick: { count: 20, size: KiB, inflight: 1 },
  },
  {
    id: "S2",
    title: "2500 streams x 1 KiB, 64 in flight",
    kind: "streams",
    metric: RATE_STREAMS,
    full: { count: 2500, size: KiB, inflight: 64 },
    quick: { count: 40, size: KiB, inflight: 8 },
  },
  {
    id: "S3",
    title: "500 streams x 64 KiB, 16 in flight",
    kind: "streams",
    metric: RATE_BYTES,
    full: { count: 500, size: 64 * KiB, inflight: 16 },
    quick: { count: 4, size: 64 * KiB, inflight: 2 },
  },
  {
    id: "S4",
    title: "one stream, 256 MiB",
    kind: "bulk",
    metric: RATE_BYTES,
    full: { count: 1, size: 256 * MiB, inflight: 1 },
    quick: { count: 1, size: 8 * MiB, inflight: 1 },
  },
  {
    id: "S5",
    title: "2000 sequential 64 B round trips, one stream",
    kind: "rtt",
    metric: LATENCY,
    full: { count: 2000, size: 64, inflight: 1 },
    quick: { count: 50, size: 64, inflight: 1 },
  },
];

/** Looks a scenario up by id (case-insensitive); throws on an unknown one. */
export function scenarioById(id: string): Scenario {
  const found = SCENARIOS.find((s) => s.id.toLowerCase() === id.toLowerCase());
  if (!found) throw new Error(`unknown scenario ${JSON.stringify(id)}`);
  return found;
}
