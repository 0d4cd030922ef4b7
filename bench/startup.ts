/**
 * `bench:startup`: start to first echo through a tunnel, as `../shared/tunnel-bench` times it
 * (the target: ≤ 100 ms). Each round starts a fresh daemon (admin off, as the outside
 * harness runs it), waits until its control port accepts, starts a client that exposes an echo
 * service, and tries a 64-byte echo through the public port until one succeeds; the time from
 * the daemon's spawn to that echo is `startup`. Also reported: spawn to the control port
 * accepting (the daemon alone), and the rest (the client and the first echo).
 *
 * @module
 */

import { spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { connect, createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import process from "node:process";
import { parseArgs } from "node:util";
import { ROOT } from "../testing/mod.ts";
import { echoProbe } from "./echo_probe.ts";
import { type JsRuntime, RUNTIME_BIN } from "./impls.ts";
import { freePort } from "./tunnel/procs.ts";

const HELP = `bench:startup: start to first echo through a tunnel

Usage: startup [--runtime deno|bun] [--via main|cli] [--binary FILE] [--rounds N] [--json FILE]

  --runtime R   the daemon's and client's runtime (default: both, one after the other)
  --via E       main: start daemon/main.ts and client/main.ts (default); cli: start them as
                \`tunnelmux daemon\` and \`tunnelmux client\` (cli/main.ts), as users do
  --binary FILE a single binary (npm run binaries) started as FILE daemon and FILE client,
                instead of either runtime
  --rounds N    fresh starts per runtime (default 7); the median is reported
  --json FILE   write the samples and medians as JSON`;

/** One start, in ms from the daemon's spawn. */
export interface StartupSample {
  /** The daemon's control port accepts. */
  daemonMs: number;
  /** A 64-byte echo came back through the tunnel's public port. */
  firstEchoMs: number;
}

const TOKEN = "startup-bench-token-0123456789abcdef";
const DEADLINE_MS = 20_000;

/** How the programs are started: their own entry files, or the one `tunnelmux` command. */
export type StartVia = "main" | "cli";

/** What starts: a runtime on the sources (`via` says which entry), or a single binary's path. */
export type Starter = JsRuntime | { binary: string };

function argv(starter: Starter, via: StartVia, program: "daemon" | "client", args: string[]) {
  if (typeof starter === "object") return [starter.binary, program, ...args];
  const runtime = starter;
  const path = join(ROOT, via === "cli" ? "cli/main.ts" : `${program}/main.ts`);
  if (via === "cli") args = [program, ...args];
  return runtime === "deno"
    ? [RUNTIME_BIN.deno, "run", "-A", path, ...args]
    : [RUNTIME_BIN.bun, path, ...args];
}

/** Resolves true when `port` answers 64 bytes with the same 64 bytes. */
function echoes(port: number): Promise<boolean> {
  return echoProbe("127.0.0.1", port, 64, 1000);
}

/** Resolves true when `port` accepts a TCP connection. */
function accepts(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect({ host: "127.0.0.1", port });
    socket.on("connect", () => {
      socket.destroy();
      resolve(true);
    });
    socket.on("error", () => resolve(false));
  });
}

/** Polls `probe` every 2 ms until it resolves true; rejects after the deadline. */
async function until(probe: () => Promise<boolean>, what: string, since: number): Promise<void> {
  while (!(await probe())) {
    if (Date.now() - since > DEADLINE_MS) throw new Error(`${what}: not within ${DEADLINE_MS} ms`);
    await new Promise((resolve) => setTimeout(resolve, 2));
  }
}

/** One fresh start of daemon and client on `runtime` (or from a single binary). */
export async function measureStartup(
  runtime: Starter,
  via: StartVia = "main",
): Promise<StartupSample> {
  const dir = mkdtempSync(join(tmpdir(), "tunnelmux-startup-"));
  const echo = createServer((socket) => socket.pipe(socket));
  await new Promise<void>((resolve) => echo.listen(0, "127.0.0.1", resolve));
  const echoPort = (echo.address() as { port: number }).port;
  const [control, publicPort] = [await freePort(), await freePort()];
  const env = { ...process.env, TUNNELMUX_TOKEN: TOKEN } as Record<string, string>;
  const children: ReturnType<typeof spawn>[] = [];
  try {
    const t0 = Date.now();
    const daemon = argv(runtime, via, "daemon", [
      "--listen-admin",
      "off",
      "--data-dir",
      dir,
      "--log-level",
      "warn",
      "--listen-tcp",
      `127.0.0.1:${control}`,
      "--listen-ws",
      "off",
    ]);
    children.push(spawn(daemon[0], daemon.slice(1), { env, stdio: "ignore" }));
    await until(() => accepts(control), "the daemon's control port", t0);
    const daemonMs = Date.now() - t0;
    const client = argv(runtime, via, "client", [
      "--server",
      `tcp://127.0.0.1:${control}`,
      "--expose",
      `${publicPort}=127.0.0.1:${echoPort}`,
    ]);
    children.push(spawn(client[0], client.slice(1), { env, stdio: "ignore" }));
    await until(() => echoes(publicPort), "the first echo", t0);
    return { daemonMs, firstEchoMs: Date.now() - t0 };
  } finally {
    for (const child of children) child.kill("SIGKILL");
    echo.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)];
}

async function main(): Promise<number> {
  const { values } = parseArgs({
    args: process.argv.slice(2).filter((a) => a !== "--"),
    options: {
      runtime: { type: "string" },
      via: { type: "string", default: "main" },
      binary: { type: "string" },
      rounds: { type: "string", default: "7" },
      json: { type: "string" },
      help: { type: "boolean", short: "h" },
    },
  });
  if (values.help) {
    console.log(HELP);
    return 0;
  }
  const runtimes: Starter[] = values.binary
    ? [{ binary: values.binary }]
    : (values.runtime ? [values.runtime] : ["deno", "bun"]) as JsRuntime[];
  const rounds = Number(values.rounds);
  const via = values.via as StartVia;
  if (via !== "main" && via !== "cli") {
    console.error(`startup: --via takes main or cli, not "${via}"`);
    return 2;
  }
  const report: Record<string, unknown> = { date: new Date().toISOString(), via, runtimes: {} };
  console.log("runtime   daemon ms (median)   first echo ms (median, min-max)");
  for (const runtime of runtimes) {
    const name = typeof runtime === "object" ? "binary" : runtime;
    const samples: StartupSample[] = [];
    for (let i = 0; i < rounds; i++) samples.push(await measureStartup(runtime, via));
    const echoes = samples.map((s) => s.firstEchoMs);
    (report.runtimes as Record<string, unknown>)[name] = {
      samples,
      daemonMedianMs: median(samples.map((s) => s.daemonMs)),
      firstEchoMedianMs: median(echoes),
    };
    console.log(
      `${name.padEnd(8)}  ${String(median(samples.map((s) => s.daemonMs))).padStart(18)}   ${
        String(median(echoes)).padStart(6)
      } (${Math.min(...echoes)}-${Math.max(...echoes)})`,
    );
  }
  if (values.json) {
    const { writeFileSync } = await import("node:fs");
    writeFileSync(values.json, JSON.stringify(report, null, 2) + "\n");
  }
  return 0;
}

if (import.meta.main) process.exitCode = await main();
