/**
 * `bench:policy`: what a tunnel's visitor policy costs when it refuses nobody, and how close the
 * bandwidth limiter holds a transfer to its rate. One daemon and three client processes on the
 * runtime running this, each client exposing the same local services with other rules:
 *
 * - P1: short connections (connect, 64 B echo, close), 16 at once: no policy, against a policy
 *   whose every check runs and passes (allow 0.0.0.0/0 and ::/0, per-visitor rate and count and
 *   the tunnel's rate at 1 000 000).
 * - P2: a download on one connection: no policy, against a bandwidth rule of 1 TB/s each way (the
 *   limiter consulted on every read, never holding).
 * - P3: a download limited to `--rate` bytes/s (service → visitor) for `--seconds`, measured after
 *   the bucket's first second of burst: the rate reached against the rate set.
 * - P5: P3 through the HTTP port: one HTTP tunnel's response body limited to `--rate` bytes/s.
 * - P4: round trips (64 B echoed) on one kept connection, one at a time: p50 and p99, no policy
 *   against the allow-everything one.
 *
 * - P6 and P7 (`policy_paired.ts`): both variants in the same daemon and client process, the load
 *   alternated between them in short slices, each pair's ratio allow-all / none of connections/s,
 *   round-trip p50/p99 and the processes' CPU per 1000 connections; and the admission alone, ns
 *   per visitor. P1 and P4 give each variant its own client process, whose placement on the
 *   machine's CPUs moves a round by more than the policy's cost: P6 is the one that can show it.
 *
 * Rounds interleave the variants so drift hits them alike (P1 and P4 paired per round); medians
 * of the rounds are reported. Without `--runtime` the bench runs once per runtime (Deno, then
 * Bun), each in a process of its own, and prints both.
 *
 * @module
 */

import { Buffer } from "node:buffer";
import { connect, createServer, type Server, type Socket } from "node:net";
import process from "node:process";
import { parseArgs } from "node:util";
import { cleanup, daemonConfig, newToken, startClient, startDaemon } from "../testing/mod.ts";
import {
  connectionRate,
  pairedReport,
  type PairedResult,
  type Percentiles,
  percentiles,
  roundTrips,
  runPaired,
} from "./policy_paired.ts";
import { type JsRuntime, RUNTIME_BIN } from "./impls.ts";

const HELP =
  `bench:policy: the cost of a visitor policy that refuses nobody, and the limiter's accuracy

Usage: policy [--runtime deno|bun] [--rounds N] [--rate BYTES] [--seconds S] [--pairs N]
              [--paired-only] [--quick] [--json FILE]

  --runtime R     run on R only (default: Deno, then Bun, each in its own process)
  --rounds N      measured rounds of P1 and P2 (default 5; --quick: 1)
  --rate BYTES    P3's limit, bytes per second (default 4194304)
  --seconds S     P3's measured time (default 10; --quick: 2)
  --pairs N       P6's pairs of slices of each kind (default 100; --quick: 4; 0: no P6, P7)
  --paired-only   P6 and P7 only
  --quick         small sizes (a smoke test, not a measurement)
  --json FILE     write the results as JSON`;

/** What one run measured. */
export interface PolicyBenchResult {
  /** P1: connections per second, median of the rounds. */
  connections: { none: number; allowAll: number };
  /** P2: MB/s of one download, median of the rounds. */
  download: { none: number; unlimitedBandwidth: number };
  /** P3: the rate set and reached (bytes/s), and the error in percent. */
  limiter: { set: number; reached: number; errorPercent: number };
  /** P5: P3 for an HTTP tunnel's response body through the daemon's HTTP port. */
  httpLimiter: { set: number; reached: number; errorPercent: number };
  /** P4: round trips on one connection, microseconds, median of the rounds' percentiles. */
  roundTrip: { none: Percentiles; allowAll: Percentiles };
  /** P6 and P7: both variants in one daemon and one client, paired slices; the admission. */
  paired?: PairedResult;
}

const median = (values: number[]) => [...values].sort((a, b) => a - b)[values.length >> 1];
const medianOf = (rounds: Percentiles[]): Percentiles => ({
  p50: median(rounds.map((r) => r.p50)),
  p99: median(rounds.map((r) => r.p99)),
});

/** A service that sends bytes, as fast as the connection takes them, until it is closed. */
function startFirehose(): Promise<Server> {
  const block = Buffer.alloc(64 * 1024, 42);
  const server = createServer((socket: Socket) => {
    socket.on("error", () => {});
    const pump = () => {
      while (!socket.destroyed && socket.write(block));
    };
    socket.on("drain", pump);
    pump();
  });
  return new Promise((resolve) => server.listen(0, "127.0.0.1", () => resolve(server)));
}

/** An HTTP service whose one response is endless (framed by the close), sent as fast as taken. */
function startHttpFirehose(): Promise<Server> {
  const block = Buffer.alloc(64 * 1024, 42);
  const server = createServer((socket: Socket) => {
    socket.on("error", () => {});
    socket.once("data", () => {
      socket.write("HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\n\r\n");
      const pump = () => {
        while (!socket.destroyed && socket.write(block));
      };
      socket.on("drain", pump);
      pump();
    });
  });
  return new Promise((resolve) => server.listen(0, "127.0.0.1", () => resolve(server)));
}

/** A port free on 127.0.0.1 now (for the daemon's HTTP port). */
function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const server = createServer();
    server.listen(0, "127.0.0.1", () => {
      const port = portOf(server);
      server.close(() => resolve(port));
    });
  });
}

/** An echo service. */
function startEcho(): Promise<Server> {
  const server = createServer((socket: Socket) => {
    socket.on("error", () => {});
    socket.pipe(socket);
  });
  return new Promise((resolve) => server.listen(0, "127.0.0.1", () => resolve(server)));
}

const portOf = (server: Server) => (server.address() as { port: number }).port;

/**
 * Reads from `port` for `ms` after `skipMs` (bytes before then are not counted): bytes per second,
 * or, with `bytes`, reads that many and returns MB/s.
 */
function download(
  port: number,
  options: { bytes?: number; skipMs?: number; ms?: number; request?: string },
) {
  return new Promise<number>((resolve, reject) => {
    const socket = connect({ host: "127.0.0.1", port });
    if (options.request) socket.write(options.request);
    let got = 0;
    let counted = 0;
    let from = 0;
    const started = performance.now();
    const skip = options.skipMs ?? 0;
    const deadline = setTimeout(() => {
      socket.destroy();
      if (options.bytes !== undefined) reject(new Error("download timed out"));
      else resolve(counted / ((performance.now() - from) / 1000));
    }, options.bytes !== undefined ? 120_000 : skip + options.ms!);
    socket.on("error", reject);
    socket.on("data", (chunk: Buffer) => {
      got += chunk.length;
      const now = performance.now();
      if (options.bytes !== undefined) {
        if (got >= options.bytes) {
          clearTimeout(deadline);
          socket.destroy();
          resolve(got / 1e6 / ((now - started) / 1000));
        }
        return;
      }
      if (now - started < skip) return;
      if (from === 0) from = now;
      else counted += chunk.length;
    });
  });
}

/** Runs P1–P3 once over processes on this runtime. */
export async function runPolicyBench(options: {
  rounds: number;
  rate: number;
  seconds: number;
  quick: boolean;
  /** P6's pairs of each kind (0: no P6 and P7). */
  pairs: number;
  /** P6 and P7 only. */
  pairedOnly?: boolean;
  log?: (line: string) => void;
}): Promise<PolicyBenchResult | { paired: PairedResult }> {
  const log = options.log ?? (() => {});
  const echo = await startEcho();
  const firehose = await startFirehose();
  const httpFirehose = await startHttpFirehose();
  try {
    const token = newToken("policy-bench");
    const httpPort = await freePort();
    // Ports, and the HTTP tunnel's name.
    const client = { name: "bench", token, expose: { ports: [0, "20000-32767"], hosts: ["*"] } };
    const daemon = await startDaemon({
      config: daemonConfig([client], {
        limits: { visitorsPerTunnel: 100_000, visitorsPerClient: 100_000 },
        listen: { admin: null, http: `127.0.0.1:${httpPort}` },
        http: { domain: "bench.test" },
      }),
    });
    const paired = options.pairs > 0
      ? await runPaired({
        serverUrl: daemon.tcpUrl,
        token,
        daemonPid: daemon.pid,
        echoAddress: `127.0.0.1:${portOf(echo)}`,
        pairs: options.pairs,
        connectionsPerSlice: options.quick ? 200 : 500,
        tripsPerSlice: options.quick ? 200 : 500,
        maxMs: 300_000,
        log,
      })
      : undefined;
    if (options.pairedOnly) return { paired: paired! };
    const expose = [
      "--expose",
      `0=127.0.0.1:${portOf(echo)}`,
      "--expose",
      `0=127.0.0.1:${portOf(firehose)}`,
    ];
    const big = "1000000";
    const variants = {
      none: [] as string[],
      allowAll: [
        "--allow-ip",
        "0.0.0.0/0,::/0",
        "--rate",
        big,
        "--tunnel-rate",
        big,
        "--max-conn-per-visitor",
        big,
        "--bandwidth-in",
        "1000000000000",
        "--bandwidth-out",
        "1000000000000",
      ],
      limited: ["--bandwidth-out", String(options.rate)],
    };
    const ports: Record<string, { echo: number; firehose: number }> = {};
    for (const [name, flags] of Object.entries(variants)) {
      const client = await startClient({
        server: daemon.tcpUrl,
        token,
        args: [...expose, ...flags],
      });
      const first = await client.waitForTunnel();
      const second = await client.waitForTunnel(client.logs().indexOf(first.entry) + 1);
      // Which tunnel serves which service: the log names the local address.
      const byLocal = new Map(
        [first, second].map((t) => [t.entry.local as string, Number(t.port)]),
      );
      ports[name] = {
        echo: byLocal.get(`127.0.0.1:${portOf(echo)}`)!,
        firehose: byLocal.get(`127.0.0.1:${portOf(firehose)}`)!,
      };
    }
    const count = options.quick ? 200 : 2000;
    const bytes = (options.quick ? 16 : 256) * 1024 * 1024;
    const rates = { none: [] as number[], allowAll: [] as number[] };
    const trips = { none: [] as Percentiles[], allowAll: [] as Percentiles[] };
    const tripCount = options.quick ? 500 : 5000;
    const speeds = { none: [] as number[], allowAll: [] as number[] };
    // An untimed pass first: the runtimes' JIT and the kernel's buffers settle.
    await connectionRate(ports.none.echo, 100, 16);
    await connectionRate(ports.allowAll.echo, 100, 16);
    for (let round = 0; round < options.rounds; round++) {
      for (const name of ["none", "allowAll"] as const) {
        rates[name].push(await connectionRate(ports[name].echo, count, 16));
        speeds[name].push(await download(ports[name].firehose, { bytes }));
        trips[name].push(percentiles(await roundTrips(ports[name].echo, tripCount)));
        log(
          `round ${round + 1} ${name}: ${rates[name].at(-1)!.toFixed(0)} conn/s, ` +
            `${speeds[name].at(-1)!.toFixed(0)} MB/s, round trip p50 ` +
            `${trips[name].at(-1)!.p50.toFixed(0)} µs p99 ${trips[name].at(-1)!.p99.toFixed(0)} µs`,
        );
      }
    }
    const reached = await download(ports.limited.firehose, {
      skipMs: 1500,
      ms: options.seconds * 1000,
    });
    log(`limited to ${options.rate} B/s: ${reached.toFixed(0)} B/s`);
    await startClient({
      server: daemon.tcpUrl,
      token,
      args: [
        "--http",
        `held=127.0.0.1:${portOf(httpFirehose)}`,
        "--bandwidth-out",
        String(options.rate),
      ],
    });
    const request = "GET / HTTP/1.1\r\nHost: held.bench.test\r\n\r\n";
    // The tunnel is up once a request gets its 200 (bounded: 100 tries, 100 ms apart).
    for (let i = 0;; i++) {
      const up = await new Promise<boolean>((resolve) => {
        const socket = connect({ host: "127.0.0.1", port: httpPort });
        socket.on("error", () => resolve(false));
        socket.once("data", (chunk: Buffer) => {
          socket.destroy();
          resolve(chunk.toString("latin1").startsWith("HTTP/1.1 200"));
        });
        socket.write(request);
      });
      if (up) break;
      if (i === 100) throw new Error("the HTTP tunnel did not come up");
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    const httpReached = await download(httpPort, {
      skipMs: 1500,
      ms: options.seconds * 1000,
      request,
    });
    log(`HTTP limited to ${options.rate} B/s: ${httpReached.toFixed(0)} B/s`);
    return {
      connections: { none: median(rates.none), allowAll: median(rates.allowAll) },
      download: { none: median(speeds.none), unlimitedBandwidth: median(speeds.allowAll) },
      limiter: {
        set: options.rate,
        reached,
        errorPercent: (reached - options.rate) / options.rate * 100,
      },
      httpLimiter: {
        set: options.rate,
        reached: httpReached,
        errorPercent: (httpReached - options.rate) / options.rate * 100,
      },
      roundTrip: { none: medianOf(trips.none), allowAll: medianOf(trips.allowAll) },
      paired,
    };
  } finally {
    echo.close();
    firehose.close();
    httpFirehose.close();
    await cleanup();
  }
}

/** The lines a result prints as, for `runtime`. */
function report(runtime: string, result: PolicyBenchResult | { paired: PairedResult }): string[] {
  const paired = result.paired ? pairedReport(runtime, result.paired) : [];
  if (!("connections" in result)) return paired;
  const { connections: c, download: d, limiter: l, httpLimiter: h, roundTrip: t } = result;
  const pct = (a: number, b: number) => (a / b * 100).toFixed(1);
  return [
    `[${runtime}] P1 short connections: ${c.none.toFixed(0)} conn/s without a policy, ` +
    `${c.allowAll.toFixed(0)} with one that refuses nobody (${pct(c.allowAll, c.none)} %)`,
    `[${runtime}] P2 download: ${d.none.toFixed(0)} MB/s without a policy, ` +
    `${d.unlimitedBandwidth.toFixed(0)} with a 1 TB/s bandwidth rule (${
      pct(d.unlimitedBandwidth, d.none)
    } %)`,
    `[${runtime}] P3 limiter: set ${l.set} B/s, reached ${l.reached.toFixed(0)} B/s (${
      l.errorPercent.toFixed(2)
    } %)`,
    `[${runtime}] P5 HTTP limiter: set ${h.set} B/s, reached ${h.reached.toFixed(0)} B/s (${
      h.errorPercent.toFixed(2)
    } %)`,
    `[${runtime}] P4 round trip: p50 ${t.none.p50.toFixed(0)} µs, p99 ${
      t.none.p99.toFixed(0)
    } µs without a policy; p50 ${t.allowAll.p50.toFixed(0)} µs, p99 ${
      t.allowAll.p99.toFixed(0)
    } µs with one that refuses nobody`,
    ...paired,
  ];
}

/** Runs this bench under `runtime` in a process of its own, with `args`: its result. */
async function runOn(
  runtime: JsRuntime,
  args: string[],
): Promise<PolicyBenchResult | { paired: PairedResult }> {
  const { mkdtempSync, readFileSync, rmSync } = await import("node:fs");
  const { tmpdir } = await import("node:os");
  const { join } = await import("node:path");
  const { spawnSync } = await import("node:child_process");
  const dir = mkdtempSync(join(tmpdir(), "tunnelmux-bench-policy-"));
  try {
    const file = join(dir, "result.json");
    const path = new URL("./policy.ts", import.meta.url).pathname;
    const command = runtime === "deno"
      ? [RUNTIME_BIN.deno, "run", "-A", path]
      : [RUNTIME_BIN.bun, path];
    const done = spawnSync(command[0], [
      ...command.slice(1),
      ...args,
      "--runtime",
      runtime,
      "--json",
      file,
    ], {
      // Its report is printed here with the others; its progress shows as it goes.
      stdio: ["ignore", "ignore", "inherit"],
    });
    if (done.status !== 0) throw new Error(`the ${runtime} run failed (${done.status})`);
    return JSON.parse(readFileSync(file, "utf8")).result;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    args: process.argv.slice(2),
    options: {
      runtime: { type: "string" },
      rounds: { type: "string" },
      rate: { type: "string" },
      seconds: { type: "string" },
      quick: { type: "boolean" },
      pairs: { type: "string" },
      "paired-only": { type: "boolean" },
      json: { type: "string" },
      help: { type: "boolean", short: "h" },
    },
  });
  if (values.help) return console.log(HELP);
  const here: JsRuntime = "Bun" in globalThis ? "bun" : "deno";
  if (values.runtime !== undefined && values.runtime !== "deno" && values.runtime !== "bun") {
    console.error("--runtime must be deno or bun");
    process.exit(2);
  }
  if (values.pairs !== undefined && !/^\d{1,5}$/.test(values.pairs)) {
    console.error("--pairs must be a whole number from 0 to 99999");
    process.exit(2);
  }
  if (values["paired-only"] && values.pairs === "0") {
    console.error("--paired-only runs P6 and P7 only: --pairs 0 would run nothing");
    process.exit(2);
  }
  const quick = values.quick ?? false;
  const results: Partial<Record<JsRuntime, PolicyBenchResult | { paired: PairedResult }>> = {};
  if (values.runtime === here) {
    results[here] = await runPolicyBench({
      rounds: Number(values.rounds ?? (quick ? 1 : 5)),
      rate: Number(values.rate ?? 4 * 1024 * 1024),
      seconds: Number(values.seconds ?? (quick ? 2 : 10)),
      quick,
      pairs: Number(values.pairs ?? (quick ? 4 : 100)),
      pairedOnly: values["paired-only"] ?? false,
      log: (line) => console.error(`[${here}] ${line}`),
    });
  } else {
    const args = [
      ...(values.rounds ? ["--rounds", values.rounds] : []),
      ...(values.rate ? ["--rate", values.rate] : []),
      ...(values.seconds ? ["--seconds", values.seconds] : []),
      ...(quick ? ["--quick"] : []),
      ...(values.pairs ? ["--pairs", values.pairs] : []),
      ...(values["paired-only"] ? ["--paired-only"] : []),
    ];
    const runtimes: JsRuntime[] = values.runtime ? [values.runtime as JsRuntime] : ["deno", "bun"];
    for (const runtime of runtimes) results[runtime] = await runOn(runtime, args);
  }
  for (const [runtime, result] of Object.entries(results)) {
    for (const line of report(runtime, result!)) console.log(line);
  }
  if (values.json) {
    const { writeFileSync } = await import("node:fs");
    const [runtime] = Object.keys(results);
    // One runtime's file holds its result; a run of both holds both.
    const out = values.runtime ? { runtime, result: results[runtime as JsRuntime] } : results;
    writeFileSync(values.json, JSON.stringify(out, null, 2) + "\n");
  }
}

if (import.meta.main) await main();
