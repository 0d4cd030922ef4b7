/**
 * M1, the memory scenario: what 10,000 idle streams cost on one tunnelmux session, what a stream
 * whose reader stopped holds, and (`--soak`) whether RSS stays flat under steady traffic. Each
 * runtime gets its own pair of fresh processes (`bench/workers/memory_server.ts` and
 * `memory_client.ts`) over real TCP on 127.0.0.1; every memory reading is taken after a forced
 * full GC, on both sides. Numbers are reported, not judged (the target: an idle stream
 * costs at most 2 KiB); the one property checked is the flow-control bound, buffered ≤ window.
 *
 * @module
 */

import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { type JsRuntime, RUNTIME_BIN } from "./impls.ts";
import type { MemorySnapshot } from "./workers/memory_probe.ts";
import { type Fields, type Peer, spawnPeer } from "./workers/memory_rpc.ts";
import { textTable } from "./text_table.ts";

const ROOT = dirname(dirname(fileURLToPath(import.meta.url)));
const KiB = 1024;
const MiB = 1024 * KiB;

/** What to run. */
export interface MemoryOptions {
  /** Runtimes to measure, each with its own fresh pair of processes. */
  runtimes: readonly JsRuntime[];
  /** CI sizes: 500 idle streams, a 4 MiB stall; no soak unless `soakMinutes` asks for one. */
  quick: boolean;
  /** Also soak for this many minutes (a fresh pair of processes per runtime). */
  soakMinutes?: number;
  /** Seconds between soak samples (default 10). */
  soakSampleSeconds?: number;
  /** Progress lines. */
  log: (line: string) => void;
}

/** The sizes of one M1 run. */
export interface MemoryWorkload {
  /** Idle streams opened on the session. */
  streams: number;
  /** Bytes each idle stream echoes before it goes idle. */
  streamBytes: number;
  /** Bytes the server offers the stalled stream. */
  stallBytes: number;
  /** Bytes the stalled stream reads before it pauses (so auto-tuning may grow its window). */
  stallReadFirst: number;
  /** Bytes echoed on a second stream while the first is stalled. */
  echoBytes: number;
}

const FULL: MemoryWorkload = {
  streams: 10_000,
  streamBytes: 64,
  stallBytes: 64 * MiB,
  stallReadFirst: 16 * MiB,
  echoBytes: 1 * MiB,
};
const QUICK: MemoryWorkload = {
  streams: 500,
  streamBytes: 64,
  stallBytes: 4 * MiB,
  stallReadFirst: 1 * MiB,
  echoBytes: 64 * KiB,
};

/** Soak traffic: echo streams per second and bytes each, beside one stalled reader. */
const SOAK_RATE = 50;
const SOAK_STREAM_BYTES = 4 * KiB;
const SOAK_STALL_BYTES = 1024 * MiB;
/** Samples before this are warm-up (or before half the soak, if it is shorter). */
const SOAK_WARMUP_S = 60;

/** Memory per idle stream on one side, in bytes. */
export interface PerStream {
  rss: number;
  heap: number;
}

/** The idle-streams part of M1. */
export interface IdleResult {
  streams: number;
  /** Streams the server side counted open after the opens (should equal `streams`). */
  serverStreams: number;
  /** Time to open and echo all of them. */
  openMs: number;
  before: { server: MemorySnapshot; client: MemorySnapshot };
  after: { server: MemorySnapshot; client: MemorySnapshot };
  /** (after − before) ÷ streams. */
  perStream: { server: PerStream; client: PerStream };
}

/** The stalled-reader part of M1 (the client is the reader, the server the writer). */
export interface StallResult {
  offered: number;
  readBeforePause: number;
  /** The stalled stream's `bufferedBytes` once it stopped growing. */
  bufferedBytes: number;
  /** Its `receiveWindow` then. */
  receiveWindow: number;
  /** The flow-control bound: buffered ≤ window. */
  withinWindow: boolean;
  /** What the server's writer had passed to `write()`, sent, and still queued by then. */
  sender: { written: number; sent: number; queued: number };
  /** Client growth over the stall (after − before, forced GC both times). */
  clientGrowth: { rss: number; heap: number; external: number };
  /** A second stream's echo while the first was stalled. */
  echo: { ok: boolean; bytes: number; ms: number; error?: string };
  /** After `resume()`: every offered byte arrived, verified. */
  delivered: number;
}

/** One memory reading of one side during the soak. */
export interface SoakSample {
  /** Seconds since the soak started. */
  t: number;
  rss: number;
  heapUsed: number;
}

/** A soak's trend on one side. */
export interface SoakTrend {
  first: number;
  last: number;
  max: number;
  /** Least-squares slope after the warm-up, bytes per minute (null with fewer than 2 samples). */
  slopePerMin: number | null;
}

/** The soak part of M1. */
export interface SoakResult {
  minutes: number;
  sampleSeconds: number;
  warmupSeconds: number;
  samples: { server: SoakSample[]; client: SoakSample[] };
  rss: { server: SoakTrend; client: SoakTrend };
  heap: { server: SoakTrend; client: SoakTrend };
  /** Echo streams completed, failed, and ticks skipped because too many were in flight. */
  streams: { completed: number; failed: number; skipped: number; error?: string };
  /** The stalled reader at the end: still within its window? */
  stalled: { bufferedBytes: number; receiveWindow: number };
}

/** M1 on one runtime. */
export interface MemoryRun {
  runtime: JsRuntime;
  ok: boolean;
  error?: string;
  idle?: IdleResult;
  stall?: StallResult;
  soak?: SoakResult;
}

/** What `--scenarios M1` adds to the JSON report. */
export interface MemoryReport {
  scenario: "M1";
  title: string;
  quick: boolean;
  workload: MemoryWorkload;
  /** The goal for an idle stream, in bytes (reported against, not asserted). */
  targetBytesPerStream: number;
  runs: MemoryRun[];
}

function workerArgv(runtime: JsRuntime, script: string): string[] {
  const path = join(ROOT, "bench", "workers", script);
  return runtime === "deno"
    ? [RUNTIME_BIN.deno, "run", "-A", "--v8-flags=--expose-gc", path]
    : [RUNTIME_BIN.bun, path];
}

/** A started server and client on one runtime; `stop()` ends both. */
async function startPair(
  runtime: JsRuntime,
): Promise<{ server: Peer; client: Peer; stop(): Promise<void> }> {
  const server = await spawnPeer(workerArgv(runtime, "memory_server.ts"), 30_000);
  let client: Peer;
  try {
    client = await spawnPeer(
      [...workerArgv(runtime, "memory_client.ts"), "--connect", String(server.ready.address)],
      30_000,
    );
  } catch (error) {
    await server.stop();
    throw error;
  }
  return {
    server,
    client,
    stop: async () => void await Promise.all([client.stop(), server.stop()]),
  };
}

function memoryOf(fields: Fields): MemorySnapshot {
  return {
    rss: Number(fields.rss),
    heapUsed: Number(fields.heapUsed),
    heapTotal: Number(fields.heapTotal),
    external: Number(fields.external),
  };
}

async function readBoth(server: Peer, client: Peer) {
  const [s, c] = await Promise.all([server.request("mem"), client.request("mem")]);
  return { server: s, client: c };
}

function perStream(before: MemorySnapshot, after: MemorySnapshot, streams: number): PerStream {
  return {
    rss: Math.round((after.rss - before.rss) / streams),
    heap: Math.round((after.heapUsed - before.heapUsed) / streams),
  };
}

/** JIT, the pattern block and session buffers warm up before the first reading. */
async function warmUp(client: Peer): Promise<void> {
  await client.request("echo", { count: 200, size: 4 * KiB }, 60_000);
}

async function measureIdle(
  server: Peer,
  client: Peer,
  work: MemoryWorkload,
  log: (line: string) => void,
): Promise<IdleResult> {
  const before = await readBoth(server, client);
  // 10,000 opens with verified echoes take a few seconds; allow for a loaded machine.
  const opened = await client.request(
    "open",
    { count: work.streams, size: work.streamBytes },
    300_000,
  );
  const after = await readBoth(server, client);
  const result: IdleResult = {
    streams: Number(opened.opened),
    serverStreams: Number(after.server.streams),
    openMs: Number(opened.ms),
    before: { server: memoryOf(before.server), client: memoryOf(before.client) },
    after: { server: memoryOf(after.server), client: memoryOf(after.client) },
    perStream: { server: { rss: 0, heap: 0 }, client: { rss: 0, heap: 0 } },
  };
  result.perStream = {
    server: perStream(result.before.server, result.after.server, result.streams),
    client: perStream(result.before.client, result.after.client, result.streams),
  };
  log(
    `M1 idle: ${result.streams} streams in ${result.openMs} ms; per stream: server rss ` +
      `${result.perStream.server.rss} B heap ${result.perStream.server.heap} B, client rss ` +
      `${result.perStream.client.rss} B heap ${result.perStream.client.heap} B`,
  );
  return result;
}

async function measureStall(
  server: Peer,
  client: Peer,
  work: MemoryWorkload,
  log: (line: string) => void,
): Promise<StallResult> {
  const before = memoryOf(await client.request("mem"));
  const stall = await client.request(
    "stall",
    { bytes: work.stallBytes, readFirst: work.stallReadFirst },
    120_000,
  );
  const { server: serverMem, client: clientMem } = await readBoth(server, client);
  const after = memoryOf(clientMem);
  const flood = (serverMem.flood ?? {}) as Fields;
  let echo: StallResult["echo"];
  try {
    const done = await client.request("echo", { count: 1, size: work.echoBytes }, 60_000);
    echo = { ok: true, bytes: Number(done.bytes), ms: Number(done.ms) };
  } catch (error) {
    echo = { ok: false, bytes: 0, ms: NaN, error: (error as Error).message };
  }
  const resumed = await client.request("resume", {}, 300_000);
  const result: StallResult = {
    offered: Number(stall.offered),
    readBeforePause: Number(stall.readBeforePause),
    bufferedBytes: Number(stall.bufferedBytes),
    receiveWindow: Number(stall.receiveWindow),
    withinWindow: Number(stall.bufferedBytes) <= Number(stall.receiveWindow),
    sender: {
      written: Number(flood.written),
      sent: Number(flood.sent),
      queued: Number(flood.queued),
    },
    clientGrowth: {
      rss: after.rss - before.rss,
      heap: after.heapUsed - before.heapUsed,
      external: after.external - before.external,
    },
    echo,
    delivered: Number(resumed.delivered),
  };
  log(
    `M1 stall: buffered ${result.bufferedBytes} B of window ${result.receiveWindow} B ` +
      `(${result.withinWindow ? "within" : "OVER"}); client rss +${result.clientGrowth.rss} B; ` +
      `second stream echo ${echo.ok ? `${echo.bytes} B in ${echo.ms} ms` : `FAILED ${echo.error}`}`,
  );
  return result;
}

/** Least-squares slope of `y` over `t` (seconds), per minute; null with fewer than 2 points. */
export function slopePerMinute(points: readonly { t: number; y: number }[]): number | null {
  const n = points.length;
  if (n < 2) return null;
  const meanT = points.reduce((s, p) => s + p.t, 0) / n;
  const meanY = points.reduce((s, p) => s + p.y, 0) / n;
  let num = 0;
  let den = 0;
  for (const p of points) {
    num += (p.t - meanT) * (p.y - meanY);
    den += (p.t - meanT) ** 2;
  }
  return den === 0 ? null : Math.round((num / den) * 60);
}

function trend(samples: SoakSample[], key: "rss" | "heapUsed", warmupS: number): SoakTrend {
  const ys = samples.map((s) => s[key]);
  return {
    first: ys[0],
    last: ys[ys.length - 1],
    max: Math.max(...ys),
    slopePerMin: slopePerMinute(
      samples.filter((s) => s.t >= warmupS).map((s) => ({ t: s.t, y: s[key] })),
    ),
  };
}

async function soak(
  runtime: JsRuntime,
  minutes: number,
  sampleSeconds: number,
  log: (line: string) => void,
): Promise<SoakResult> {
  const pair = await startPair(runtime);
  try {
    const { server, client } = pair;
    await warmUp(client);
    const durationS = minutes * 60;
    const warmupS = Math.min(SOAK_WARMUP_S, durationS / 2);
    const samples = { server: [] as SoakSample[], client: [] as SoakSample[] };
    await client.request("soak-start", {
      rate: SOAK_RATE,
      size: SOAK_STREAM_BYTES,
      stallBytes: SOAK_STALL_BYTES,
    });
    const started = performance.now();
    // One sample per interval until the time is up: the loop is bounded by the clock and a count.
    const maxSamples = Math.ceil(durationS / sampleSeconds) + 1;
    for (let i = 1; i <= maxSamples; i++) {
      const due = started + i * sampleSeconds * 1000;
      if (due > started + durationS * 1000 + 1) break;
      await new Promise((resolve) => setTimeout(resolve, Math.max(0, due - performance.now())));
      const t = Math.round((performance.now() - started) / 100) / 10;
      const both = await readBoth(server, client);
      for (const side of ["server", "client"] as const) {
        samples[side].push({
          t,
          rss: Number(both[side].rss),
          heapUsed: Number(both[side].heapUsed),
        });
      }
      log(
        `M1 soak ${runtime} ${t} s: rss server ${mib(both.server.rss)} client ${
          mib(both.client.rss)
        }`,
      );
    }
    const stopped = await client.request("soak-stop", {}, 30_000);
    return {
      minutes,
      sampleSeconds,
      warmupSeconds: warmupS,
      samples,
      rss: {
        server: trend(samples.server, "rss", warmupS),
        client: trend(samples.client, "rss", warmupS),
      },
      heap: {
        server: trend(samples.server, "heapUsed", warmupS),
        client: trend(samples.client, "heapUsed", warmupS),
      },
      streams: {
        completed: Number(stopped.completed),
        failed: Number(stopped.failed),
        skipped: Number(stopped.skipped),
        ...(typeof stopped.error === "string" ? { error: stopped.error } : {}),
      },
      stalled: {
        bufferedBytes: Number(stopped.stalledBuffered),
        receiveWindow: Number(stopped.stalledWindow),
      },
    };
  } finally {
    await pair.stop();
  }
}

function mib(bytes: unknown): string {
  return `${(Number(bytes) / MiB).toFixed(1)} MiB`;
}

/** Runs M1 on every runtime in `options.runtimes`. Never throws: a failed run says why. */
export async function runMemory(options: MemoryOptions): Promise<MemoryReport> {
  const work = options.quick ? QUICK : FULL;
  const runs: MemoryRun[] = [];
  for (const runtime of options.runtimes) {
    const run: MemoryRun = { runtime, ok: false };
    runs.push(run);
    try {
      options.log(`M1 ${runtime}: ${work.streams} idle streams, then a stalled reader`);
      const pair = await startPair(runtime);
      try {
        await warmUp(pair.client);
        run.idle = await measureIdle(pair.server, pair.client, work, options.log);
        run.stall = await measureStall(pair.server, pair.client, work, options.log);
      } finally {
        await pair.stop();
      }
      if (options.soakMinutes) {
        options.log(`M1 ${runtime}: soak for ${options.soakMinutes} min`);
        run.soak = await soak(
          runtime,
          options.soakMinutes,
          options.soakSampleSeconds ?? 10,
          options.log,
        );
      }
      run.ok = true;
    } catch (error) {
      run.error = (error as Error).message.slice(0, 500);
      options.log(`M1 ${runtime}: FAILED ${run.error}`);
    }
  }
  return {
    scenario: "M1",
    title: `${work.streams} idle streams on one session; a stalled reader; RSS over a soak`,
    quick: options.quick,
    workload: work,
    targetBytesPerStream: 2 * KiB,
    runs,
  };
}

function kib(bytes: number): string {
  return Number.isFinite(bytes) ? `${(bytes / KiB).toFixed(1)} KiB` : "-";
}

function signedMib(bytes: number): string {
  if (!Number.isFinite(bytes)) return "-";
  return `${bytes >= 0 ? "+" : ""}${(bytes / MiB).toFixed(1)} MiB`;
}

/** The M1 report as plain text for stdout. */
export function formatMemory(report: MemoryReport): string {
  const w = report.workload;
  const out: string[] = [
    `M1 memory${report.quick ? " (quick sizes)" : ""}: every reading after a forced full GC`,
    "",
    `idle streams: ${w.streams} streams on one session, each echoed ${w.streamBytes} B and left ` +
    `open; bytes per stream = (after - before) / streams; target <= ${report.targetBytesPerStream} B`,
  ];
  const idleRows: string[][] = [];
  for (const run of report.runs) {
    if (!run.idle) continue;
    for (const side of ["server", "client"] as const) {
      const per = run.idle.perStream[side];
      const met = per.rss <= report.targetBytesPerStream ? "met" : "MISSED";
      idleRows.push([
        `${run.runtime} ${side}`,
        `${per.rss} B`,
        `${per.heap} B`,
        `${mib(run.idle.before[side].rss)} -> ${mib(run.idle.after[side].rss)}`,
        `${mib(run.idle.before[side].heapUsed)} -> ${mib(run.idle.after[side].heapUsed)}`,
        met,
      ]);
    }
  }
  out.push(
    textTable(["runtime side", "rss/stream", "heap/stream", "rss", "heap", "rss target"], idleRows),
    "",
    `stalled reader: ${mib(w.stallBytes)} offered, the reader pauses after ${
      mib(w.stallReadFirst)
    }; a second stream echoes ${kib(w.echoBytes)} meanwhile`,
  );
  const stallRows: string[][] = [];
  for (const run of report.runs) {
    const s = run.stall;
    if (!s) continue;
    stallRows.push([
      run.runtime,
      kib(s.bufferedBytes),
      kib(s.receiveWindow),
      s.withinWindow ? "yes" : "NO",
      kib(s.sender.sent - s.readBeforePause),
      signedMib(s.clientGrowth.rss),
      signedMib(s.clientGrowth.external),
      s.echo.ok ? `${s.echo.ms} ms` : "FAILED",
      s.delivered === s.offered ? "all" : `${s.delivered} B`,
    ]);
  }
  out.push(
    textTable([
      "runtime",
      "buffered",
      "window",
      "<= window",
      "sent since pause",
      "client rss",
      "external",
      "2nd stream echo",
      "resumed",
    ], stallRows),
  );
  const soaks = report.runs.filter((r) => r.soak);
  if (soaks.length) {
    const first = soaks[0].soak!;
    out.push(
      "",
      `soak: ${first.minutes} min, ${SOAK_RATE} echo streams/s of ${
        kib(SOAK_STREAM_BYTES)
      } and one stalled reader; samples every ${first.sampleSeconds} s; slope after ${first.warmupSeconds} s`,
    );
    const soakRows: string[][] = [];
    for (const run of soaks) {
      const s = run.soak!;
      for (const side of ["server", "client"] as const) {
        const r = s.rss[side];
        const h = s.heap[side];
        soakRows.push([
          `${run.runtime} ${side}`,
          `${mib(r.first)} / ${mib(r.last)} / ${mib(r.max)}`,
          r.slopePerMin === null ? "-" : `${signedMib(r.slopePerMin)}/min`,
          `${mib(h.first)} / ${mib(h.last)}`,
          h.slopePerMin === null ? "-" : `${signedMib(h.slopePerMin)}/min`,
          side === "client" ? `${s.streams.completed} ok, ${s.streams.failed} failed` : "",
        ]);
      }
    }
    out.push(
      textTable([
        "runtime side",
        "rss first / last / max",
        "rss slope",
        "heap first / last",
        "heap slope",
        "streams",
      ], soakRows),
    );
  }
  const failed = report.runs.filter((r) => !r.ok);
  if (failed.length) {
    out.push("", "failures:", ...failed.map((r) => `  ${r.runtime}: ${r.error}`));
  }
  return out.join("\n");
}
