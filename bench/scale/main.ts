/**
 * `npm run bench:scale`: the cost curves — how memory, CPU and latency grow with idle
 * sessions on one daemon (1 → 10,000), reverse tunnels on one daemon (1 → 1,000) and concurrent
 * streams on one session (1 → 100,000), for tunnelmux on Deno and Bun and, where it can run the
 * same load, rathole and frp (see `curves.ts`). Prints a table per curve; with `--out DIR` writes
 * `scale.json`, `scale.md` and an SVG per curve there.
 *
 * ```sh
 * deno run -A bench/scale/main.ts [--curves sessions,tunnels,streams] [--impls deno,bun,rathole,frp]
 *   [--quick] [--out DIR] [--peers-dir DIR]
 * ```
 *
 * @module
 */

import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { delimiter, join } from "node:path";
import { accessSync, constants } from "node:fs";
import process from "node:process";
import { parseArgs } from "node:util";
import { buildLoadgen } from "../tunnel/loadgen.ts";
import { Child } from "./child.ts";
import { type CurveId, type CurveRun, MEASURES, runCurve } from "./curves.ts";
import { type Chart, renderCurves } from "./plot.ts";

const HELP = `Usage: bench/scale/main.ts [options]

The cost curves: sessions (1 → 10,000 idle clients on one daemon), tunnels (1 → 1,000 on one
daemon) and streams (1 → 100,000 on one session), tunnelmux on Deno and Bun beside rathole and
frp (sessions and tunnels).

  --curves LIST     sessions,tunnels,streams (default all)
  --impls LIST      deno,bun,rathole,frp (default all; rathole and frp when found)
  --quick           small counts, for a smoke run
  --out DIR         write scale.json, scale.md and scale-CURVE.svg into DIR
  --from FILE       run nothing: print (and with --out, write) a finished run's scale.json again
  --peers-dir DIR   where rathole, frps and frpc are (else PATH, then .cache/peers/bin)
  -h, --help        this text
`;

/**
 * The steps of each curve. rathole's sessions stop at 5000 (a listener per service as well, and
 * the file descriptor limit), frp's at 100.
 */
const STEPS: Record<CurveId, { full: number[]; quick: number[] }> = {
  sessions: { full: [1, 100, 1000, 3000, 10_000], quick: [1, 10, 50] },
  tunnels: { full: [1, 10, 100, 1000], quick: [1, 5, 20] },
  streams: { full: [1, 1000, 10_000, 100_000], quick: [1, 100, 1000] },
};
const RATHOLE_MAX_SESSIONS = 5000;
/** frp's sessions are frpc processes (~15 MiB each): they stop at 100. */
const FRP_MAX_SESSIONS = 100;

/** Which measures each curve's table and plot show, in order. */
const SHOWN: Record<CurveId, string[]> = {
  sessions: ["rssMiB", "rssPerKiB", "keepaliveCpuMs", "acceptUs"],
  tunnels: ["rssMiB", "rssPerKiB", "clientRssMiB", "t4P50Us", "t3P50Us", "exposeUs"],
  streams: ["serverRssMiB", "rssPerKiB", "openUs", "closeUs"],
};
const UNIT_NAMES: Record<CurveId, string> = {
  sessions: "session",
  tunnels: "tunnel",
  streams: "stream",
};

function findBinary(name: string, peersDir: string | undefined): string | null {
  const dirs = [
    ...(peersDir ? [peersDir] : []),
    ...(process.env.PATH ?? "").split(delimiter),
    join(import.meta.dirname ?? ".", "..", "..", ".cache", "peers", "bin"),
  ];
  for (const dir of dirs) {
    try {
      accessSync(join(dir, name), constants.X_OK);
      return join(dir, name);
    } catch {
      // not here
    }
  }
  return null;
}

function measureTitle(curve: CurveId, key: string): string {
  const { title, unit } = MEASURES[key];
  const named = title.replace("per unit", `per ${UNIT_NAMES[curve]}`);
  // The streams curve has no daemon: its memory is the serving side's.
  return `${curve === "streams" ? named.replace("daemon", "serving side") : named}, ${unit}`;
}

/** A markdown table per curve: a row per implementation and measure, a column per N. */
export function curveTable(curve: CurveId, runs: readonly CurveRun[]): string {
  const ns = [...new Set(runs.flatMap((run) => run.points.map((p) => p.n)))].sort((a, b) => a - b);
  const lines = [
    `| ${curve} | ${ns.map((n) => `N=${n.toLocaleString("en-US")}`).join(" | ")} |`,
    `| --- | ${ns.map(() => "---").join(" | ")} |`,
  ];
  for (const key of SHOWN[curve]) {
    for (const run of runs) {
      if (!run.points.some((p) => p.values[key] !== undefined)) continue;
      const cells = ns.map((n) => {
        const value = run.points.find((p) => p.n === n)?.values[key];
        return value === undefined ? "" : Number(value.toPrecision(3)).toString();
      });
      lines.push(`| ${run.impl}: ${measureTitle(curve, key)} | ${cells.join(" | ")} |`);
    }
  }
  const failed = runs.filter((run) => run.error);
  for (const run of failed) lines.push("", `${run.impl} stopped: ${run.error}`);
  return lines.join("\n");
}

/**
 * Measures divided by N (or by the step's new units): at N = 1 they are mostly the process's own
 * warm-up, which would flatten every other point of the plot, so plots start at the second step.
 */
const PER_UNIT = new Set(["rssPerKiB", "keepaliveCpuMs", "acceptUs", "exposeUs", "openUs"]);

function charts(curve: CurveId, runs: readonly CurveRun[]): Chart[] {
  return SHOWN[curve].map((key) => ({
    title: measureTitle(curve, key) + (PER_UNIT.has(key) ? " (from the second step)" : ""),
    series: runs
      .map((run) => ({
        name: run.impl,
        points: run.points
          .filter((p, i) => p.values[key] !== undefined && !(PER_UNIT.has(key) && i === 0))
          .map((p) => ({ x: p.n, y: p.values[key] })),
      }))
      .filter((series) => series.points.length > 0),
  }));
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      curves: { type: "string", default: "sessions,tunnels,streams" },
      impls: { type: "string", default: "deno,bun,rathole,frp" },
      quick: { type: "boolean", default: false },
      out: { type: "string" },
      from: { type: "string" },
      "peers-dir": { type: "string" },
      help: { type: "boolean", short: "h" },
    },
  });
  if (values.help) return void console.log(HELP);
  const curves = values.curves!.split(",") as CurveId[];
  const impls = values.impls!.split(",");
  for (const curve of curves) {
    if (!(curve in STEPS)) throw new Error(`unknown curve ${curve} (sessions, tunnels, streams)`);
  }

  const finished = values.from
    ? JSON.parse(readFileSync(values.from, "utf8")) as FinishedRun
    : undefined;
  const when = finished?.when ?? new Date().toISOString();
  const results = finished?.results ??
    await runAll(curves, impls, values.quick!, values["peers-dir"]);
  if (values.from) {
    for (const [curve, runs] of Object.entries(results)) {
      console.log(`\n${curveTable(curve as CurveId, runs)}\n`);
    }
  }
  if (values.out) writeResults(values.out, { when, results });
}

/** What `scale.json` holds. */
interface FinishedRun {
  /** When the run started (ISO 8601). */
  when: string;
  /** The runs of each curve. */
  results: Record<string, CurveRun[]>;
}

/** Runs the curves; prints each curve's table as it completes. */
async function runAll(
  curves: readonly CurveId[],
  impls: readonly string[],
  quick: boolean,
  peersDir: string | undefined,
): Promise<Record<string, CurveRun[]>> {
  const find = (name: string) => {
    const found = findBinary(name, peersDir);
    if (!found) console.error(`scale: ${name} not found, skipped`);
    return found;
  };
  const rathole = impls.includes("rathole") ? find("rathole") : null;
  const [frps, frpc] = impls.includes("frp") ? [find("frps"), find("frpc")] : [null, null];
  const loadgen = await buildLoadgen();
  const backendChild = new Child([loadgen, "serve", "-listen", "127.0.0.1:0"]);
  const backend = (await backendChild.waitFor(/listening on (\S+)/, 10_000))[1];
  const context = { loadgen, backend, log: (line: string) => console.error(line) };
  const results: Record<string, CurveRun[]> = {};
  try {
    for (const curve of curves) {
      const steps = quick ? STEPS[curve].quick : STEPS[curve].full;
      const runs: CurveRun[] = [];
      for (const impl of impls) {
        if (impl === "rathole") {
          if (!rathole || curve === "streams") continue;
          const capped = curve === "sessions"
            ? steps.filter((n) => n <= RATHOLE_MAX_SESSIONS)
            : steps;
          runs.push(await runCurve({ curve, impl, steps: capped, ratholeBin: rathole }, context));
        } else if (impl === "frp") {
          if (!frps || !frpc || curve === "streams") continue;
          const capped = curve === "sessions" ? steps.filter((n) => n <= FRP_MAX_SESSIONS) : steps;
          runs.push(
            await runCurve({ curve, impl, steps: capped, frpBins: { frps, frpc } }, context),
          );
        } else if (impl === "deno" || impl === "bun") {
          runs.push(await runCurve({ curve, impl, steps }, context));
        } else {
          throw new Error(`unknown implementation ${impl} (deno, bun, rathole, frp)`);
        }
      }
      results[curve] = runs;
      console.log(`\n${curveTable(curve, runs)}\n`);
    }
  } finally {
    await backendChild.stop();
  }
  return results;
}

/** Writes `scale.json`, `scale.md` and an SVG per curve into `dir`. */
function writeResults(dir: string, { when, results }: FinishedRun): void {
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, "scale.json"), JSON.stringify({ when, results }, null, 2));
  const tables = Object.entries(results).map(([curve, runs]) => curveTable(curve as CurveId, runs));
  writeFileSync(join(dir, "scale.md"), `Run ${when}\n\n${tables.join("\n\n")}\n`);
  for (const [curve, runs] of Object.entries(results)) {
    const title = `Cost as ${curve} grow (N on a log scale)`;
    writeFileSync(
      join(dir, `scale-${curve}.svg`),
      renderCurves(title, charts(curve as CurveId, runs)),
    );
  }
  console.error(`scale: wrote ${dir}`);
}

if (import.meta.main) {
  try {
    await main();
  } catch (error) {
    console.error(`scale: ${(error as Error).message}`);
    process.exit(1);
  }
}
