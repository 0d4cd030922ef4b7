/**
 * The command line every benchmark worker shares. A worker is one implementation in one fresh
 * process, in one of two roles:
 *
 * - `--serve`: an echo server on 127.0.0.1 (port 0); prints `listening on HOST:PORT`, then serves
 *   until stdin closes (the runner owns its lifetime).
 * - `--connect HOST:PORT --scenario S1 --count N --size B --inflight K`: warms up, runs the
 *   scenario once and prints one JSON line ({@linkcode WorkerResult}); exit 1 with `ok:false` on
 *   any failure.
 *
 * @module
 */

import process from "node:process";
import { parseArgs } from "node:util";
import { parseHostPort } from "../../util/net/address.ts";
import type { Opener } from "../duplex.ts";
import { quantile, runRoundTrips, runStreams } from "../drive.ts";

/** A connected client of one implementation. */
export interface WorkerClient {
  /** A new mux stream, or a new TCP connection for raw implementations. */
  open: Opener;
  /** Ends the session or connection (best effort). */
  close(): Promise<unknown> | void;
}

/** What a worker script provides. */
export interface WorkerImpl {
  /** Implementation family, e.g. `tunnelmux`, `libp2p`, `raw-native`. */
  name: string;
  /** Library version, or the runtime API used. */
  version: string;
  /**
   * True without a mux: S1/S2 then open one connection per stream, and S3 becomes one bulk echo of
   * the same bytes on one connection.
   */
  raw?: boolean;
  /** Starts the echo server and resolves with its port. */
  serve(): Promise<number>;
  /** Connects a client to the echo server. */
  connect(hostname: string, port: number): Promise<WorkerClient>;
}

/** The JSON line a client worker prints. */
export interface WorkerResult {
  /** Whether the scenario passed (every byte verified). */
  ok: boolean;
  /** Implementation family. */
  impl: string;
  /** Library version. */
  version: string;
  /** `deno` or `bun`. */
  runtime: string;
  /** Scenario id. */
  scenario: string;
  /** Timed part in milliseconds. */
  ms?: number;
  /** Streams per second (S1–S3). */
  streams_per_s?: number;
  /** MiB per second, one direction (S1–S4). */
  mib_per_s?: number;
  /** Round-trip median in µs (S5). */
  p50_us?: number;
  /** Round-trip 99th percentile in µs (S5). */
  p99_us?: number;
  /** Failure reason when `ok` is false. */
  error?: string;
}

/** `deno` or `bun`: the runtime of this process. */
export function runtime(): string {
  return "Deno" in globalThis ? "deno" : "Bun" in globalThis ? "bun" : "node";
}

interface Plan {
  scenario: string;
  count: number;
  size: number;
  inflight: number;
}

/** The timed work for one plan; resolves with the result fields. */
async function measure(
  impl: WorkerImpl,
  client: WorkerClient,
  plan: Plan,
): Promise<Partial<WorkerResult>> {
  const { count, size, inflight } = plan;
  if (plan.scenario === "S5") {
    const latencies = await runRoundTrips(await client.open(), count, size);
    latencies.sort((a, b) => a - b);
    return {
      p50_us: round(quantile(latencies, 0.5)),
      p99_us: round(quantile(latencies, 0.99)),
    };
  }
  const bulk = plan.scenario === "S4" || (impl.raw && plan.scenario === "S3");
  const started = performance.now();
  if (bulk) await runStreams(client.open, 1, count * size, 1);
  else await runStreams(client.open, count, size, inflight);
  const ms = performance.now() - started;
  const result: Partial<WorkerResult> = {
    ms: round(ms),
    mib_per_s: round((count * size) / (1024 * 1024) / (ms / 1000)),
  };
  if (!bulk) result.streams_per_s = round(count / (ms / 1000));
  return result;
}

/** A smaller run of the same plan first: JIT, buffers and windows warm up before timing. */
function warmup(plan: Plan): Plan {
  if (plan.scenario === "S4") return { ...plan, size: Math.max(1, Math.floor(plan.size / 8)) };
  return { ...plan, count: Math.max(1, Math.ceil(plan.count / 10)) };
}

function round(x: number): number {
  return Math.round(x * 10) / 10;
}

/** Parses the worker command line and runs the role it asks for. Never returns. */
export async function runWorker(impl: WorkerImpl): Promise<never> {
  const { values } = parseArgs({
    args: process.argv.slice(2),
    options: {
      serve: { type: "boolean", default: false },
      connect: { type: "string" },
      scenario: { type: "string", default: "S1" },
      count: { type: "string", default: "1" },
      size: { type: "string", default: "1024" },
      inflight: { type: "string", default: "1" },
      "no-warmup": { type: "boolean", default: false },
    },
  });
  if (values.serve) {
    const port = await impl.serve();
    console.log(`listening on 127.0.0.1:${port}`);
    // The runner closes our stdin to stop us; exit then, whatever is still open.
    process.stdin.on("end", () => process.exit(0));
    process.stdin.on("close", () => process.exit(0));
    process.stdin.resume();
    return new Promise<never>(() => {});
  }
  const base = { impl: impl.name, version: impl.version, runtime: runtime() };
  const plan: Plan = {
    scenario: values.scenario,
    count: Number(values.count),
    size: Number(values.size),
    inflight: Number(values.inflight),
  };
  let client: WorkerClient | undefined;
  try {
    if (!values.connect) throw new Error("--connect HOST:PORT or --serve is required");
    const { hostname, port } = parseHostPort(values.connect);
    client = await impl.connect(hostname, port);
    if (!values["no-warmup"]) await measure(impl, client, warmup(plan));
    const fields = await measure(impl, client, plan);
    console.log(JSON.stringify({ ok: true, ...base, scenario: plan.scenario, ...fields }));
    // Do not wait long for a graceful close: the numbers are out, and the server is discarded.
    await Promise.race([client.close(), new Promise((r) => setTimeout(r, 200))]);
    process.exit(0);
  } catch (error) {
    const message = (error as Error)?.message ?? String(error);
    console.log(JSON.stringify({ ok: false, ...base, scenario: plan.scenario, error: message }));
    process.exit(1);
  }
}
