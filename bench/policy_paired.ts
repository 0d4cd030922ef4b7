/**
 * `bench:policy`'s paired parts, which show whether a policy that refuses nobody costs anything:
 *
 * - P6: one daemon process and one client process (`policy_client.ts`) holding two tunnels to one
 *   echo service, one without a policy and one with every rule set and refusing nobody. The load
 *   alternates between them in short slices (A B B A A B …, a bounded count of pairs), each slice
 *   timed and its processes' CPU read before and after (per thread, `/proc/PID/task/*\/schedstat`,
 *   ns; and `/proc/PID/stat`, whose 10 ms ticks miss no ended thread, summed over the slices): drift
 *   of the shared machine hits both tunnels of a pair alike, so the ratio allow-all / none of each
 *   pair is the measurement, reported as its median and spread. Slices of short connections (as the
 *   tunnel bench's T2) and of round trips on one kept connection (as T3).
 * - P7: the admission itself in this process, no I/O: a visitor's entry through a tunnel's
 *   `VisitorGate` (address rules, rates, count, the bandwidth buckets asked for and spent from,
 *   its leave), ns per visitor with the allow-all policy and with none.
 *
 * @module
 */

import { Buffer } from "node:buffer";
import { readdirSync, readFileSync } from "node:fs";
import { connect } from "node:net";
import process from "node:process";
import { echoProbe } from "./echo_probe.ts";
import { startProcess } from "./tunnel/procs.ts";
import { runtimeArgs } from "../testing/process.ts";
import { VisitorGate } from "../tunnel/policy/visitor_gate.ts";
import { ALLOW_ALL } from "./policy_client.ts";

/** A latency's 50th and 99th percentiles, microseconds. */
export interface Percentiles {
  /** Median. */
  p50: number;
  /** 99th percentile. */
  p99: number;
}

/** The 50th and 99th percentiles of `samples` (microseconds). */
export function percentiles(samples: number[]): Percentiles {
  const sorted = [...samples].sort((a, b) => a - b);
  const at = (q: number) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))];
  return { p50: at(0.5), p99: at(0.99) };
}

/** `count` round trips of 64 B through `port` on one connection, one at a time: microseconds. */
export function roundTrips(port: number, count: number): Promise<number[]> {
  return new Promise((resolve, reject) => {
    const socket = connect({ host: "127.0.0.1", port });
    const block = Buffer.alloc(64, 7);
    const samples: number[] = [];
    let got = 0;
    let sent = 0;
    const deadline = setTimeout(() => {
      socket.destroy();
      reject(new Error(`round trips timed out after ${samples.length}`));
    }, 120_000);
    const next = () => {
      sent = performance.now();
      socket.write(block);
    };
    socket.on("error", reject);
    socket.on("connect", next);
    socket.on("data", (chunk: Buffer) => {
      got += chunk.length;
      if (got < block.length) return;
      got -= block.length;
      samples.push((performance.now() - sent) * 1000);
      if (samples.length < count) return next();
      clearTimeout(deadline);
      socket.destroy();
      resolve(samples);
    });
  });
}

/** `count` echo visitors through `port`, `concurrency` at once: connections per second. */
export async function connectionRate(
  port: number,
  count: number,
  concurrency: number,
): Promise<number> {
  let next = 0;
  let failed = 0;
  const started = performance.now();
  await Promise.all(Array.from({ length: concurrency }, async () => {
    while (next < count) {
      next++;
      if (!await echoProbe("127.0.0.1", port, 64, 10_000)) failed++;
    }
  }));
  if (failed > 0) throw new Error(`${failed} of ${count} visitors failed`);
  return count / ((performance.now() - started) / 1000);
}

/**
 * CPU time of each thread of process `pid` so far, in ns, by thread id: the scheduler's run time
 * (`/proc/PID/task/TID/schedstat`, ns, where `/proc/PID/stat` counts 10 ms ticks); empty where
 * unknown (not Linux).
 */
export function threadCpu(pid: number): Map<string, number> {
  const threads = new Map<string, number>();
  try {
    for (const task of readdirSync(`/proc/${pid}/task`)) {
      try {
        const ns = Number(
          readFileSync(`/proc/${pid}/task/${task}/schedstat`, "utf8").split(" ")[0],
        );
        if (Number.isFinite(ns)) threads.set(task, ns);
      } catch {
        // A thread that ended between the listing and the read.
      }
    }
  } catch {
    // No such process, or no /proc.
  }
  return threads;
}

/**
 * The CPU ns the threads of `before` and `after` spent between the two readings: a thread that
 * ended in between is left out with its time (a runtime's helper threads come and go), so this
 * never goes back, and may miss a little; the ticks of {@linkcode cpuTicks} miss nothing.
 */
export function cpuBetween(before: Map<string, number>, after: Map<string, number>): number {
  let total = 0;
  for (const [tid, ns] of after) total += ns - (before.get(tid) ?? 0);
  return total;
}

/** User + system CPU of process `pid` so far in clock ticks (10 ms; ended threads included). */
export function cpuTicks(pid: number): number {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    return Number(fields[11]) + Number(fields[12]);
  } catch {
    return NaN;
  }
}

/** CPU time of process `pid` so far in ns (its live threads'), NaN where unknown. */
export function cpuNanoseconds(pid: number): number {
  const threads = threadCpu(pid);
  if (threads.size === 0) return NaN;
  let total = 0;
  for (const ns of threads.values()) total += ns;
  return total;
}

/** The machine's load averages over 1, 5 and 15 minutes (`/proc/loadavg`), or undefined. */
export function loadAverage(): [number, number, number] | undefined {
  try {
    const [a, b, c] = readFileSync("/proc/loadavg", "utf8").split(" ").map(Number);
    return [a, b, c];
  } catch {
    return undefined;
  }
}

/** The spread of paired ratios (allow-all / none), in percent. */
export interface RatioSummary {
  /** The median ratio. */
  median: number;
  /**
   * The geometric mean of the ratios and its 95 % interval (the mean of their logarithms ± 1.96
   * standard errors): a ratio's plain mean leans up (110 % and 90 % average to over 100 %).
   */
  mean: number;
  low: number;
  high: number;
  /** The 25th and 75th percentiles. */
  p25: number;
  p75: number;
  /** The smallest and largest. */
  min: number;
  max: number;
  /** How many pairs. */
  pairs: number;
}

/** Median, quartiles and range of `allowAll[i] / none[i] * 100` over the pairs. */
export function summarizeRatios(pairs: { none: number; allowAll: number }[]): RatioSummary {
  const ratios = pairs.map((p) => p.allowAll / p.none * 100).filter(Number.isFinite);
  const sorted = ratios.sort((a, b) => a - b);
  const at = (q: number) =>
    sorted[Math.min(sorted.length - 1, Math.round(q * (sorted.length - 1)))];
  const logs = sorted.map((r) => Math.log(r / 100));
  const mean = logs.reduce((a, b) => a + b, 0) / logs.length;
  const variance = logs.reduce((a, b) => a + (b - mean) ** 2, 0) / (logs.length - 1);
  const within = 1.96 * Math.sqrt(variance / logs.length);
  return {
    median: at(0.5),
    mean: Math.exp(mean) * 100,
    low: Math.exp(mean - within) * 100,
    high: Math.exp(mean + within) * 100,
    p25: at(0.25),
    p75: at(0.75),
    min: sorted[0],
    max: sorted.at(-1)!,
    pairs: sorted.length,
  };
}

/** One variant's slice: what it measured and the CPU its processes spent, ns per unit of work. */
interface Slice {
  /** Connections per second, or round-trip p50 and p99 (µs). */
  rate?: number;
  trips?: Percentiles;
  /** Daemon and client CPU per 1000 connections (or round trips), ms. */
  daemonMs: number;
  clientMs: number;
  /** Daemon and client CPU ticks (10 ms, ended threads included) over the slice. */
  daemonTicks: number;
  clientTicks: number;
}

/** What P6 and P7 measured on one runtime. */
export interface PairedResult {
  /** Pairs run of each kind, and the work in each slice. */
  pairs: number;
  connectionsPerSlice: number;
  tripsPerSlice: number;
  /** Paired ratios allow-all / none (percent) of the connection slices. */
  connections: { rate: RatioSummary; daemonCpu: RatioSummary; clientCpu: RatioSummary };
  /** Paired ratios of the round-trip slices. */
  roundTrips: {
    p50: RatioSummary;
    p99: RatioSummary;
    daemonCpu: RatioSummary;
    clientCpu: RatioSummary;
  };
  /** Medians of the slices, per variant: conn/s, µs, CPU ms per 1000. */
  absolute: {
    none: { rate: number; p50: number; p99: number; daemonMs: number; clientMs: number };
    allowAll: { rate: number; p50: number; p99: number; daemonMs: number; clientMs: number };
  };
  /**
   * CPU of every slice of each kind together, allow-all / none per unit of work, percent, from
   * `/proc/PID/stat` (10 ms ticks, nothing missed; the sums make the tick fine enough).
   */
  totals: {
    connections: { daemon: number; client: number };
    roundTrips: { daemon: number; client: number };
  };
  /** P7: ns per visitor admitted, without a policy and with the allow-all one. */
  admission: { none: number; allowAll: number };
  /** Load averages (1, 5, 15 min) before and after. */
  load: { before?: number[]; after?: number[] };
}

const median = (values: number[]) => [...values].sort((a, b) => a - b)[values.length >> 1];

/** Σ allow-all / Σ none of `pick` over the pairs (equal work per slice), percent. */
function totalRatio(pairs: Slice[][], pick: (s: Slice) => number): number {
  let none = 0;
  let allowAll = 0;
  for (const [a, b] of pairs) {
    none += pick(a);
    allowAll += pick(b);
  }
  return allowAll / none * 100;
}

/**
 * P7: ns per visitor through a `VisitorGate` (its entry, both bandwidth buckets asked for and 64 B
 * spent from each, its leave), for `policy`, over `count` visitors from 64 addresses; the median of
 * `repeats` timed runs after an untimed one. Throws if one is refused (keep `count` times runs
 * under the policy's rates).
 */
export function admissionNs(
  policy: ConstructorParameters<typeof VisitorGate>[0],
  count = 100_000,
  repeats = 9,
): number {
  const gate = new VisitorGate(policy);
  const remotes = Array.from({ length: 64 }, (_, i) => `10.0.${i >> 4}.${i & 15}:${40000 + i}`);
  let admitted = 0;
  const run = () => {
    const started = performance.now();
    for (let i = 0; i < count; i++) {
      const entry = gate.enter(remotes[i & 63]);
      if (!entry.ok) throw new Error(`a visitor was refused: ${entry.reason}`);
      gate.throttle("in")?.spend(64);
      gate.throttle("out")?.spend(64);
      entry.leave();
      admitted++;
    }
    return (performance.now() - started) * 1e6 / count;
  };
  run();
  const times = Array.from({ length: repeats }, run);
  if (admitted !== count * (repeats + 1)) throw new Error("visitors lost");
  return median(times);
}

/**
 * P6 and P7 against the daemon at `serverUrl` (its pid `daemonPid`), whose client `token` may
 * expose ports, for the echo service at `echoAddress`: `pairs` pairs of each kind, bounded by
 * `maxMs` in all (fewer pairs when it runs out).
 */
export async function runPaired(options: {
  serverUrl: string;
  token: string;
  daemonPid: number;
  echoAddress: string;
  pairs: number;
  connectionsPerSlice: number;
  tripsPerSlice: number;
  maxMs: number;
  log: (line: string) => void;
}): Promise<PairedResult> {
  const before = loadAverage();
  const client = await startProcess(
    [
      process.execPath,
      ...runtimeArgs("bench/policy_client.ts", [
        options.serverUrl,
        options.token,
        options.echoAddress,
      ]),
    ],
    { ready: /ready (\{.*\})/, timeoutMs: 30_000 },
  );
  try {
    const ports = JSON.parse(client.ready[1]) as { none: number; allowAll: number };
    const pids = { daemon: options.daemonPid, client: client.pid };
    /** Runs `work` on one variant's port: its result and the processes' CPU per 1000 units. */
    const slice = async (
      port: number,
      units: number,
      work: (port: number) => Promise<Partial<Slice>>,
    ): Promise<Slice> => {
      const d0 = threadCpu(pids.daemon);
      const c0 = threadCpu(pids.client);
      const t0 = [cpuTicks(pids.daemon), cpuTicks(pids.client)];
      const measured = await work(port);
      const t1 = [cpuTicks(pids.daemon), cpuTicks(pids.client)];
      const perThousand = (ns: number) => ns / 1e6 / (units / 1000);
      return {
        ...measured,
        daemonMs: perThousand(cpuBetween(d0, threadCpu(pids.daemon))),
        clientMs: perThousand(cpuBetween(c0, threadCpu(pids.client))),
        daemonTicks: t1[0] - t0[0],
        clientTicks: t1[1] - t0[1],
      };
    };
    const shortConnections = (port: number) =>
      slice(port, options.connectionsPerSlice, async (p) => ({
        rate: await connectionRate(p, options.connectionsPerSlice, 16),
      }));
    const trips = (port: number) =>
      slice(port, options.tripsPerSlice, async (p) => ({
        trips: percentiles(await roundTrips(p, options.tripsPerSlice)),
      }));
    // Untimed: the JIT, the kernel's buffers and both tunnels' first visitors settle.
    for (const port of [ports.none, ports.allowAll]) {
      await connectionRate(port, 200, 16);
      await roundTrips(port, 500);
    }
    const started = performance.now();
    const pairs = { connections: [] as Slice[][], trips: [] as Slice[][] };
    for (let i = 0; i < options.pairs; i++) {
      if (performance.now() - started > options.maxMs) {
        options.log(`time bound reached after ${i} pairs`);
        break;
      }
      // A B, then B A: neither variant always goes first.
      const order = i % 2 === 0 ? ["none", "allowAll"] as const : ["allowAll", "none"] as const;
      const c: Record<string, Slice> = {};
      for (const name of order) c[name] = await shortConnections(ports[name]);
      const t: Record<string, Slice> = {};
      for (const name of order) t[name] = await trips(ports[name]);
      pairs.connections.push([c.none, c.allowAll]);
      pairs.trips.push([t.none, t.allowAll]);
      options.log(
        `pair ${i + 1}: ${c.none.rate!.toFixed(0)} / ${c.allowAll.rate!.toFixed(0)} conn/s, ` +
          `daemon ${c.none.daemonMs.toFixed(0)} / ${c.allowAll.daemonMs.toFixed(0)} ms CPU per ` +
          `1000 conn; round trip p50 ${t.none.trips!.p50.toFixed(0)} / ` +
          `${t.allowAll.trips!.p50.toFixed(0)} µs`,
      );
    }
    const ratios = (list: Slice[][], pick: (s: Slice) => number) =>
      summarizeRatios(
        list.map(([none, allowAll]) => ({ none: pick(none), allowAll: pick(allowAll) })),
      );
    const absolute = (k: 0 | 1) => ({
      rate: median(pairs.connections.map((p) => p[k].rate!)),
      p50: median(pairs.trips.map((p) => p[k].trips!.p50)),
      p99: median(pairs.trips.map((p) => p[k].trips!.p99)),
      daemonMs: median(pairs.connections.map((p) => p[k].daemonMs)),
      clientMs: median(pairs.connections.map((p) => p[k].clientMs)),
    });
    return {
      pairs: pairs.connections.length,
      connectionsPerSlice: options.connectionsPerSlice,
      tripsPerSlice: options.tripsPerSlice,
      connections: {
        rate: ratios(pairs.connections, (s) => s.rate!),
        daemonCpu: ratios(pairs.connections, (s) => s.daemonMs),
        clientCpu: ratios(pairs.connections, (s) => s.clientMs),
      },
      roundTrips: {
        p50: ratios(pairs.trips, (s) => s.trips!.p50),
        p99: ratios(pairs.trips, (s) => s.trips!.p99),
        daemonCpu: ratios(pairs.trips, (s) => s.daemonMs),
        clientCpu: ratios(pairs.trips, (s) => s.clientMs),
      },
      absolute: { none: absolute(0), allowAll: absolute(1) },
      totals: {
        connections: {
          daemon: totalRatio(pairs.connections, (s) => s.daemonTicks),
          client: totalRatio(pairs.connections, (s) => s.clientTicks),
        },
        roundTrips: {
          daemon: totalRatio(pairs.trips, (s) => s.daemonTicks),
          client: totalRatio(pairs.trips, (s) => s.clientTicks),
        },
      },
      // 100 000 visitors a run, 10 runs: within the allow-all rates' one second of burst (1 000 000),
      // so none is refused however fast this machine admits them.
      admission: { none: admissionNs({}), allowAll: admissionNs(ALLOW_ALL) },
      load: { before, after: loadAverage() },
    };
  } finally {
    await client.stop();
  }
}

/** The lines P6 and P7 print as, for `runtime`. */
export function pairedReport(runtime: string, r: PairedResult): string[] {
  const show = (s: RatioSummary) =>
    `median ${s.median.toFixed(1)} %, geometric mean ${s.mean.toFixed(1)} % ` +
    `(95 % interval ${s.low.toFixed(1)}–${s.high.toFixed(1)}; ` +
    `quartiles ${s.p25.toFixed(1)}–${s.p75.toFixed(1)}, range ${s.min.toFixed(1)}–` +
    `${s.max.toFixed(1)})`;
  const { none, allowAll } = r.absolute;
  const load = (l?: number[]) => l ? l.map((v) => v.toFixed(2)).join(" ") : "unknown";
  const extraNs = r.admission.allowAll - r.admission.none;
  const perConnectionNs = none.daemonMs * 1e6 / 1000;
  return [
    `[${runtime}] P6 paired, one daemon and one client, ${r.pairs} pairs of ` +
    `${r.connectionsPerSlice} connections and of ${r.tripsPerSlice} round trips; ` +
    `allow-all / none:`,
    `[${runtime}]   connections/s ${show(r.connections.rate)}`,
    `[${runtime}]   daemon CPU per 1000 connections ${show(r.connections.daemonCpu)}`,
    `[${runtime}]   client CPU per 1000 connections ${show(r.connections.clientCpu)}`,
    `[${runtime}]   round trip p50 ${show(r.roundTrips.p50)}`,
    `[${runtime}]   round trip p99 ${show(r.roundTrips.p99)}`,
    `[${runtime}]   daemon CPU per 1000 round trips ${show(r.roundTrips.daemonCpu)}`,
    `[${runtime}]   CPU of all slices together (ticks): daemon ` +
    `${r.totals.connections.daemon.toFixed(1)} %, client ${
      r.totals.connections.client.toFixed(1)
    } % ` +
    `over the connections; daemon ${r.totals.roundTrips.daemon.toFixed(1)} %, client ` +
    `${r.totals.roundTrips.client.toFixed(1)} % over the round trips`,
    `[${runtime}]   medians none / allow-all: ${none.rate.toFixed(0)} / ` +
    `${allowAll.rate.toFixed(0)} conn/s; daemon ${none.daemonMs.toFixed(1)} / ` +
    `${allowAll.daemonMs.toFixed(1)} ms and client ${none.clientMs.toFixed(1)} / ` +
    `${allowAll.clientMs.toFixed(1)} ms CPU per 1000 connections; round trip p50 ` +
    `${none.p50.toFixed(0)} / ${allowAll.p50.toFixed(0)} µs, p99 ${none.p99.toFixed(0)} / ` +
    `${allowAll.p99.toFixed(0)} µs`,
    `[${runtime}] P7 admission: ${r.admission.none.toFixed(0)} ns per visitor without a policy, ` +
    `${r.admission.allowAll.toFixed(0)} ns with the allow-all one: +${extraNs.toFixed(0)} ns, ` +
    `${(extraNs / perConnectionNs * 100).toFixed(2)} % of the daemon's CPU per connection`,
    `[${runtime}] load average before ${load(r.load.before)}, after ${load(r.load.after)}`,
  ];
}
