/**
 * `count`: the system calls a tunnel's two processes make per visitor, by name, with each
 * runtime's floor (`jsrelay-RUNTIME`, two plain relays) beside tunnelmux. For each
 * implementation: a fresh backend and tunnel (`impls.ts`); the bench's load generator warms up,
 * then `strace -c -f -p PID` is attached to the server and to the client process while a fixed
 * number of new connections each echo 64 bytes (one at a time unless `--concurrency`), and
 * separately while a fixed number of 64-byte round trips run on one connection. Counts are
 * divided by connections and by round trips. Under strace everything is slow: the counts are the
 * point, not the time.
 *
 * Usage (Linux, strace on PATH; as root on Debian: `apt-get install -y strace`):
 *
 * ```sh
 * node_modules/.bin/bun bench/tunnel/count.ts [options]
 * node_modules/.bin/deno run -A bench/tunnel/count.ts [options]
 * ```
 *
 * Options: `--only a,b` implementation id prefixes (default
 * `tunnelmux-deno-tcp,tunnelmux-bun-tcp,jsrelay`), `--runtime deno|bun`, `--warmup N`
 * (connections, and round trips, before counting; default 200), `--conns N` (default 500),
 * `--concurrency N` (default 1), `--trips N` (default 1000), `--settle-ms N` (wait after the load
 * before detaching, so the last connections' closes count; default 200), `--timeout SECONDS`
 * (per load run; default 120), `--peers-dir DIR`, `--json FILE`.
 *
 * @module
 */

import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import process from "node:process";
import { parseArgs } from "node:util";
import type { JsRuntime } from "../impls.ts";
import { textTable } from "../text_table.ts";
import { type TunnelImpl, tunnelImpls } from "./impls.ts";
import { buildLoadgen } from "./loadgen.ts";
import { runLoad, startWithBackend } from "./measure.ts";
import { type LongProcess, startProcess } from "./procs.ts";

/** A counted process: the public side, the relay hop's far node (relay rows only), the client. */
type Side = "server" | "hop" | "client";

/** One system call's line of an `strace -c` summary. */
export interface SyscallCount {
  /** Times it was called. */
  calls: number;
  /** Of those, how many failed. */
  errors: number;
}

/**
 * The calls and errors per system call name in `strace -c` output (`total` left out); the
 * sections strace prints per personality are summed. Lines that are not table rows are skipped.
 */
export function parseStraceSummary(text: string): Map<string, SyscallCount> {
  const counts = new Map<string, SyscallCount>();
  // % time, seconds, usecs/call, calls, errors (blank when none), name.
  const row = /^\s*[\d.]+\s+[\d.]+\s+\d+\s+(\d+)\s+(?:(\d+)\s+)?([a-z_0-9?]\S*)\s*$/;
  for (const line of text.split("\n")) {
    const match = row.exec(line);
    if (!match || match[3] === "total") continue;
    const seen = counts.get(match[3]) ?? { calls: 0, errors: 0 };
    seen.calls += Number(match[1]);
    seen.errors += Number(match[2] ?? 0);
    counts.set(match[3], seen);
  }
  return counts;
}

/** What one process of one implementation did during one counted phase. */
export interface PhaseCount {
  impl: string;
  /** `conns`: new connections with a 64 B echo each; `trips`: round trips on one connection. */
  phase: "conns" | "trips";
  side: Side;
  /** Connections or round trips done while counting. */
  units: number;
  /** Calls and errors by system call name. */
  counts: Record<string, SyscallCount>;
}

/** The options of one count run. */
export interface CountOptions {
  /** Connections (and, before the round trips, round trips) run before strace attaches. */
  warmup: number;
  /** New connections counted, a 64 B echo each. */
  conns: number;
  /** Of those, how many at once. */
  concurrency: number;
  /** 64 B round trips counted on one connection. */
  trips: number;
  /** Wait after the load's result before detaching, so the last closes are counted. */
  settleMs: number;
  /** Bound on each load run. */
  timeoutMs: number;
}

const PHASE_TITLE = {
  conns: (o: CountOptions) =>
    `system calls per connection (${o.conns} new connections, 64 B echo each, ${o.concurrency} ` +
    "at once)",
  trips: (o: CountOptions) =>
    `system calls per round trip (${o.trips} 64 B round trips, one connection)`,
};

const SIDE_TITLE = {
  server: "server side (daemon; jsrelay: the public relay; a relay row: the node visitors enter)",
  hop: "the relay hop's far node (a relay row: the node holding the client's session)",
  client: "client side (client; jsrelay: the relay that dials the backend)",
};

/** Why strace cannot be used here, or null. */
function straceMissing(): string | null {
  const probe = spawnSync("strace", ["-V"], { encoding: "utf8" });
  if (!probe.error && probe.status === 0) return null;
  return "strace not found on PATH; on Debian or Ubuntu install it as root with " +
    "`apt-get install -y strace`";
}

/** Attaches `strace -c -f` to `pid` (all its threads), summary to `file`; resolves once attached. */
async function attachStrace(pid: number, file: string): Promise<LongProcess> {
  try {
    return await startProcess(["strace", "-c", "-f", "-o", file, "-p", String(pid)], {
      ready: /Process \d+ attached/,
      timeoutMs: 10_000,
    });
  } catch (error) {
    throw new Error(
      `${(error as Error).message} (ptrace needs root or CAP_SYS_PTRACE, and ` +
        "/proc/sys/kernel/yama/ptrace_scope at 0 or 1 for a child of ours)",
    );
  }
}

/** Counts one phase of the load through `address` in the `sides` processes. */
async function countPhase(
  loadgen: string,
  address: string,
  host: string | undefined,
  sides: { side: Side; process: LongProcess }[],
  phase: "conns" | "trips",
  options: CountOptions,
  dir: string,
): Promise<{ side: Side; counts: Map<string, SyscallCount> }[]> {
  const load = phase === "conns"
    ? ["-scenario", "T2", "-count", String(options.conns), "-concurrency"]
    : ["-scenario", "T3", "-count", String(options.trips)];
  if (phase === "conns") load.push(String(options.concurrency));
  const files = sides.map(({ side }) => join(dir, `strace-${phase}-${side}.txt`));
  const tracers: LongProcess[] = [];
  try {
    await runLoad(
      [
        loadgen,
        "run",
        "-target",
        address,
        ...(host === undefined ? [] : ["-http", host]),
        ...load,
        "-size",
        "64",
        "-warmup",
        String(options.warmup),
        "-handshake",
        "-timeout",
        `${Math.round(options.timeoutMs / 1000)}s`,
      ],
      options.timeoutMs + 5_000,
      async () => {
        for (const [i, { process: traced }] of sides.entries()) {
          tracers.push(await attachStrace(traced.pid, files[i]));
        }
      },
    );
    await new Promise((resolve) => setTimeout(resolve, options.settleMs));
  } finally {
    // strace writes its summary when it detaches on SIGTERM.
    await Promise.all(tracers.map((tracer) => tracer.stop(10_000)));
  }
  return sides.map(({ side }, i) => ({
    side,
    counts: parseStraceSummary(readFileSync(files[i], "utf8")),
  }));
}

/** Starts `impl` on a fresh backend and counts both phases in its server and client. */
async function countImpl(
  loadgen: string,
  impl: TunnelImpl,
  options: CountOptions,
): Promise<PhaseCount[]> {
  const dir = mkdtempSync(join(tmpdir(), "tunnelmux-count-"));
  const started: LongProcess[] = [];
  try {
    const tunnel = await startWithBackend(loadgen, impl, dir, started);
    started.push(...tunnel.others ?? []);
    if (!tunnel.server || !tunnel.client) {
      throw new Error("no server and client processes to count");
    }
    started.push(tunnel.server, tunnel.client);
    const sides: { side: Side; process: LongProcess }[] = [
      { side: "server", process: tunnel.server },
      ...(tunnel.hop ? [{ side: "hop" as const, process: tunnel.hop }] : []),
      { side: "client", process: tunnel.client },
    ];
    const out: PhaseCount[] = [];
    for (const phase of ["conns", "trips"] as const) {
      const units = phase === "conns" ? options.conns : options.trips;
      const counted = await countPhase(
        loadgen,
        tunnel.address,
        tunnel.host,
        sides,
        phase,
        options,
        dir,
      );
      for (const { side, counts } of counted) {
        out.push({ impl: impl.id, phase, side, units, counts: Object.fromEntries(counts) });
      }
    }
    return out;
  } finally {
    await Promise.all(started.reverse().map((p) => p.stop(1000)));
    rmSync(dir, { recursive: true, force: true });
  }
}

function perUnit(x: number): string {
  if (!Number.isFinite(x)) return "-";
  return x >= 100 ? Math.round(x).toString() : x >= 10 ? x.toFixed(1) : x.toFixed(2);
}

/**
 * The tables: per phase and side, one row per system call (the total first, then by the largest
 * count per unit), one column per implementation in `impls` order (each floor beside its
 * runtime's tunnelmux rows). Calls that stay under 0.01 per unit everywhere are left out.
 */
export function formatCounts(
  results: readonly PhaseCount[],
  impls: readonly string[],
  options: CountOptions,
): string {
  const out: string[] = [];
  for (const phase of ["conns", "trips"] as const) {
    for (const side of ["server", "hop", "client"] as const) {
      const mine = impls.map((impl) =>
        results.find((r) => r.impl === impl && r.phase === phase && r.side === side)
      );
      const columns = impls.filter((_, i) => mine[i]);
      if (columns.length === 0) continue;
      const found = mine.filter((r): r is PhaseCount => !!r);
      const rate = (r: PhaseCount, name: string) =>
        name === "total"
          ? Object.values(r.counts).reduce((sum, c) => sum + c.calls, 0) / r.units
          : (r.counts[name]?.calls ?? 0) / r.units;
      const names = [...new Set(found.flatMap((r) => Object.keys(r.counts)))]
        .map((name) => ({ name, top: Math.max(...found.map((r) => rate(r, name))) }))
        .filter(({ top }) => top >= 0.005)
        .sort((a, b) => b.top - a.top || a.name.localeCompare(b.name))
        .map(({ name }) => name);
      const rows = ["total", ...names].map((name) => [
        name,
        ...found.map((r) => perUnit(rate(r, name))),
      ]);
      const errors = found.map((r) =>
        perUnit(Object.values(r.counts).reduce((sum, c) => sum + c.errors, 0) / r.units)
      );
      rows.push(["(failed calls)", ...errors]);
      if (out.length) out.push("");
      out.push(`${PHASE_TITLE[phase](options)}, ${SIDE_TITLE[side]}:`);
      out.push(textTable(["syscall", ...columns], rows));
    }
  }
  return out.join("\n");
}

/** Table order with each runtime's floor right after that runtime's tunnelmux rows. */
function besideFloor(impls: readonly TunnelImpl[]): TunnelImpl[] {
  const runtimeOf = (id: string) => /-(deno|bun)(-|$)/.exec(id)?.[1] ?? "~";
  const runtimes = [...new Set(impls.map((i) => runtimeOf(i.id)))];
  return runtimes.flatMap((runtime) => impls.filter((i) => runtimeOf(i.id) === runtime));
}

const HELP = `count: system calls per connection and per round trip of a tunnel's processes

Usage:
  node_modules/.bin/bun bench/tunnel/count.ts [options]
  node_modules/.bin/deno run -A bench/tunnel/count.ts [options]

Options:
  --only a,b          implementation id prefixes (default tunnelmux-deno-tcp,tunnelmux-bun-tcp,
                      jsrelay); direct has no processes to count
  --runtime deno|bun  only this runtime's rows (default both)
  --warmup N          connections (and round trips) before counting (default 200)
  --conns N           counted new connections, 64 B echo each (default 500)
  --concurrency N     counted connections at once (default 1)
  --trips N           counted 64 B round trips on one connection (default 1000)
  --settle-ms N       wait after the load before detaching strace (default 200)
  --timeout SECONDS   bound on each load run (default 120)
  --peers-dir DIR     where to find frp, chisel, bore, rathole for --only
  --json FILE         write the raw counts as JSON
  -h, --help          show this help

Needs strace (Debian: apt-get install -y strace, as root) and ptrace rights over the tunnel's
processes. Counts only; strace slows every process, so no times are reported.`;

/** The most a count option may ask for: keeps a traced run bounded. */
const MAX_COUNT = 100_000;

/** Runs the count with `args`; resolves with the exit code. */
export async function main(args: string[] = process.argv.slice(2)): Promise<number> {
  const { values } = parseArgs({
    args,
    options: {
      only: { type: "string", default: "tunnelmux-deno-tcp,tunnelmux-bun-tcp,jsrelay" },
      runtime: { type: "string" },
      warmup: { type: "string", default: "200" },
      conns: { type: "string", default: "500" },
      concurrency: { type: "string", default: "1" },
      trips: { type: "string", default: "1000" },
      "settle-ms": { type: "string", default: "200" },
      timeout: { type: "string", default: "120" },
      "peers-dir": { type: "string" },
      json: { type: "string" },
      help: { type: "boolean", short: "h", default: false },
    },
  });
  if (values.help) {
    console.log(HELP);
    return 0;
  }
  const count = (name: "warmup" | "conns" | "concurrency" | "trips" | "settle-ms", min: number) => {
    const n = Number(values[name]);
    if (!Number.isInteger(n) || n < min || n > MAX_COUNT) {
      throw new Error(`--${name} must be an integer from ${min} to ${MAX_COUNT}`);
    }
    return n;
  };
  const options: CountOptions = {
    warmup: count("warmup", 0),
    conns: count("conns", 1),
    concurrency: count("concurrency", 1),
    trips: count("trips", 1),
    settleMs: count("settle-ms", 0),
    timeoutMs: Number(values.timeout) * 1000,
  };
  if (!(options.timeoutMs > 0)) throw new Error("--timeout must be a positive number of seconds");
  if (values.runtime && values.runtime !== "deno" && values.runtime !== "bun") {
    throw new Error("--runtime must be deno or bun");
  }
  const runtimes: JsRuntime[] = values.runtime ? [values.runtime as JsRuntime] : ["deno", "bun"];
  const only = values.only.split(",").map((s) => s.trim()).filter(Boolean);
  const picked = tunnelImpls(runtimes, values["peers-dir"], true)
    .filter((impl) => only.some((p) => impl.id.startsWith(p)))
    .filter((impl) => impl.id !== "direct" && impl.id !== "http-direct");
  const log = (line: string) => process.stderr.write(line + "\n");
  for (const impl of picked.filter((i) => i.missing)) {
    log(`count: skipping ${impl.id}: ${impl.missing}`);
  }
  const impls = besideFloor(picked.filter((impl) => !impl.missing));
  if (impls.length === 0) throw new Error(`--only ${values.only} matches no tunnel to count`);
  const missing = straceMissing();
  if (missing) {
    log(`count: ${missing}`);
    return 3;
  }

  // Deno checks for a newer release a few seconds after it starts, a name lookup that would land
  // in the counts of whichever phase runs then; the tunnel's processes inherit this.
  process.env.DENO_NO_UPDATE_CHECK ??= "1";
  const loadgen = await buildLoadgen();
  const results: PhaseCount[] = [];
  const failed: string[] = [];
  for (const impl of impls) {
    log(`count: ${impl.id} ...`);
    try {
      results.push(...await countImpl(loadgen, impl, options));
    } catch (error) {
      const why = (error as Error).message.slice(0, 400);
      failed.push(`${impl.id}: ${why}`);
      log(`count: ${impl.id} FAILED: ${why}`);
    }
  }
  const straceVersion = spawnSync("strace", ["-V"], { encoding: "utf8" }).stdout.split("\n")[0];
  console.log(
    `tunnel system calls, ${new Date().toISOString()}; ${straceVersion}; ` +
      `${options.warmup} warm-up connections (and round trips) first; counts only\n`,
  );
  console.log(formatCounts(results, impls.map((i) => i.id), options));
  if (failed.length) console.log(`\nfailed:\n${failed.map((f) => `  ${f}`).join("\n")}`);
  if (values.json) {
    writeFileSync(
      values.json,
      JSON.stringify({ straceVersion, options, results, failed }, null, 2),
    );
    log(`count: wrote ${values.json}`);
  }
  return failed.length ? 1 : 0;
}

if (import.meta.main) {
  try {
    process.exitCode = await main();
  } catch (error) {
    console.error(`count: ${(error as Error).message}\n\n${HELP}`);
    process.exitCode = 2;
  }
}
