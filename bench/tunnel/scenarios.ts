/**
 * The tunnel scenarios (T1–T4 over TCP, U1–U6 over UDP): the load generator's workload through a
 * tunnel (or straight to the backend, `direct` / `udp-direct`), at full and at `--quick` size, and
 * which numbers each one reports. A UDP scenario runs only through the UDP implementations and a
 * TCP one only through the others.
 *
 * @module
 */

import type { Metric } from "../scenarios.ts";

/** The sizes of one tunnel scenario run (the load generator's flags). */
export interface TunnelWorkload {
  /** T1: bytes downloaded through the tunnel. */
  bytes?: number;
  /** T2: connections; T3: round trips; T4: new connections. */
  count?: number;
  /** T2: connections at once. */
  concurrency?: number;
  /** T2/T3: bytes per echo; T4: bytes sent before waiting for the first one back; U: per datagram. */
  size?: number;
  /** U3: datagrams per second offered. */
  rate?: number;
  /** Untimed repetitions before the timed part (the load generator's default when absent). */
  warmup?: number;
}

/** One tunnel scenario. */
export interface TunnelScenario {
  /** Id used on the command line and in JSON (`T1`). */
  id: string;
  /** One-line description for the table. */
  title: string;
  /** The headline metric. */
  metric: Metric;
  /** Full-size workload. */
  full: TunnelWorkload;
  /** `--quick` workload: tiny, for CI smoke runs. */
  quick: TunnelWorkload;
  /**
   * When set, the daemon's and client's CPU time over the timed part is reported per this many
   * units of work (`per(work)` of them were done): CPU s/GiB for T1, CPU s/1000 conn for T2.
   */
  cpu?: { unit: string; per(work: TunnelWorkload): number };
  /** Report the daemon's and client's RSS after the timed part (T2, U1–U6). */
  rss?: boolean;
  /** A UDP scenario: the backend is a UDP echo, run through the UDP implementations only. */
  udp?: boolean;
  /** The load's result field that is the headline value, when not the TCP scenarios' own. */
  field?: string;
  /**
   * Driven by `iperf3 -u` instead of the load generator (`field` of its receiver line): the backend
   * is `iperf3 -s`, and the tunnel carries its TCP control connection beside the datagrams. Full
   * runs only, and only when iperf3 is on PATH.
   */
  iperf3?: { bitrate: string; seconds: number; length: number };
}

const MiB = 1024 * 1024;

const DGRAM_CPU = { unit: "CPU s/100k dgram", per: (work: TunnelWorkload) => work.count! / 1e5 };

/** T1–T4, then U1–U6, in report order. */
export const TUNNEL_SCENARIOS: readonly TunnelScenario[] = [
  {
    id: "T1",
    title: "256 MiB downloaded through the tunnel on one connection",
    metric: { unit: "MB/s", higher: true },
    full: { bytes: 256 * MiB },
    quick: { bytes: 4 * MiB, warmup: 1 },
    cpu: { unit: "CPU s/GiB", per: (work) => work.bytes! / (1024 * MiB) },
  },
  {
    id: "T2",
    title: "2000 short connections (connect, 64 B echo, close), 16 at once",
    metric: { unit: "conn/s", higher: true },
    full: { count: 2000, concurrency: 16, size: 64 },
    quick: { count: 100, concurrency: 8, size: 64, warmup: 10 },
    cpu: { unit: "CPU s/1000 conn", per: (work) => work.count! / 1000 },
    rss: true,
  },
  {
    id: "T3",
    title: "2000 sequential 64 B round trips on one tunneled connection (p50)",
    metric: { unit: "µs", higher: false },
    full: { count: 2000, size: 64 },
    quick: { count: 100, size: 64, warmup: 20 },
  },
  {
    id: "T4",
    title: "time to first byte of a new connection, 200 sequential (p50)",
    metric: { unit: "µs", higher: false },
    full: { count: 200, size: 16 },
    quick: { count: 20, size: 16, warmup: 3 },
  },
  // UDP: datagrams echoed by the backend; each is checked and counted once, and one that does not
  // come back is lost, never waited for without bound (bench/tunnel/loadgen/udp.go).
  {
    id: "U1",
    title: "100,000 UDP datagrams of 64 B echoed, 64 in flight (datagrams back per second)",
    metric: { unit: "dgram/s", higher: true },
    full: { count: 100_000, size: 64, concurrency: 64 },
    quick: { count: 2000, size: 64, concurrency: 16, warmup: 5 },
    cpu: DGRAM_CPU,
    rss: true,
    udp: true,
    field: "dgram_per_s",
  },
  {
    id: "U2",
    title: "100,000 UDP datagrams of 1200 B echoed, 64 in flight (datagrams back per second)",
    metric: { unit: "dgram/s", higher: true },
    full: { count: 100_000, size: 1200, concurrency: 64 },
    quick: { count: 2000, size: 1200, concurrency: 16, warmup: 5 },
    cpu: DGRAM_CPU,
    rss: true,
    udp: true,
    field: "dgram_per_s",
  },
  {
    id: "U3",
    title: "30,000 UDP datagrams of 1200 B offered at 5000/s (% not echoed back)",
    metric: { unit: "% lost", higher: false },
    full: { count: 30_000, size: 1200, rate: 5000 },
    quick: { count: 2000, size: 1200, rate: 5000, warmup: 5 },
    cpu: DGRAM_CPU,
    rss: true,
    udp: true,
    field: "loss_pct",
  },
  {
    id: "U4",
    title: "2000 sequential 64 B UDP round trips (p50)",
    metric: { unit: "µs", higher: false },
    full: { count: 2000, size: 64 },
    quick: { count: 100, size: 64, warmup: 20 },
    rss: true,
    udp: true,
    field: "p50_us",
  },
  // iperf3's own reading of the same path, one way (its client through the tunnel to its server).
  {
    id: "U5",
    title: "iperf3 -u, 1200 B datagrams at 20 Mbit/s for 5 s (% lost at the server)",
    metric: { unit: "% lost", higher: false },
    full: {},
    quick: {},
    rss: true,
    udp: true,
    field: "lost_percent",
    iperf3: { bitrate: "20M", seconds: 5, length: 1200 },
  },
  {
    id: "U6",
    title: "iperf3 -u, 1200 B datagrams at 20 Mbit/s for 5 s (jitter at the server)",
    metric: { unit: "ms", higher: false },
    full: {},
    quick: {},
    rss: true,
    udp: true,
    field: "jitter_ms",
    iperf3: { bitrate: "20M", seconds: 5, length: 1200 },
  },
];

/** The load generator's flags for `scenario` at `work`. */
export function loadArgs(scenario: TunnelScenario, work: TunnelWorkload): string[] {
  const flags: [string, number | undefined][] = [
    ["-bytes", work.bytes],
    ["-count", work.count],
    ["-concurrency", work.concurrency],
    ["-size", work.size],
    ["-rate", work.rate],
    ["-warmup", work.warmup],
  ];
  return [
    "-scenario",
    scenario.id,
    ...flags.flatMap(([flag, value]) => value === undefined ? [] : [flag, String(value)]),
  ];
}
