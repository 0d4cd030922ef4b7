/**
 * Harness for the Go yamux interop peers in `interop/hashicorp` and
 * `interop/goyamux`: builds them (cached in `.cache/interop/`), starts them as
 * echo servers and runs their client scenarios. Works under Deno and Bun.
 *
 * See `interop/README.md` for the peers' flags, scenarios and output format.
 *
 * @module
 */

import { spawn } from "node:child_process";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { buildGoProgram } from "../util/host/go_build.ts";

/** Name of a Go peer: the directory under `interop/` that holds it. */
export type GoPeerName = "hashicorp" | "goyamux";

/** All Go peers, in a stable order. */
export const GO_PEERS: readonly GoPeerName[] = ["hashicorp", "goyamux"];

/** Client scenario names accepted by `-scenario` (see `interop/README.md`). */
export type GoScenario =
  | "concurrent"
  | "halfclose"
  | "rst"
  | "ping"
  | "goaway"
  | "dribble"
  | "largewindow"
  | "throughput"
  | "rtt"
  | "streams"
  | "accept"
  | "goaway-recv"
  | "rst-recv";

/** The one-line JSON summary a Go client prints for a scenario. */
export interface GoSummary {
  /** Scenario name as passed to `-scenario`. */
  scenario: GoScenario;
  /** Which Go peer ran the scenario. */
  impl: GoPeerName;
  /** Resolved version of the yamux library inside the peer. */
  impl_version: string;
  /** Whether the scenario passed. */
  ok: boolean;
  /** Streams the scenario completed (opened by the client). */
  streams: number;
  /** Payload bytes the client sent (one direction). */
  bytes: number;
  /** Wall time of the whole run in milliseconds. */
  ms: number;
  /** Failure reason when `ok` is false. */
  error?: string;
  /** Scenario-specific fields (e.g. `mib_per_s`, `p50_us`, `wire_in`). */
  [key: string]: unknown;
}

/** A JSON event line printed by a Go server (e.g. `session-end`, `server-opens`). */
export interface GoEvent {
  /** Event kind. */
  event: string;
  /** Event-specific fields. */
  [key: string]: unknown;
}

/** A running Go yamux echo server. */
export interface GoServer {
  /** Listening address (always `127.0.0.1`). */
  hostname: string;
  /** Listening TCP port. */
  port: number;
  /** `hostname:port`, ready for `-connect`. */
  address: string;
  /** Everything the server wrote to stderr so far (library logs). */
  readonly stderr: string;
  /** Events the server printed so far, oldest first. */
  readonly events: readonly GoEvent[];
  /**
   * Resolves with the first event (already printed or future) matching
   * `predicate`; rejects after `timeoutMs` (default 10 s) or if the server exits.
   */
  waitForEvent(predicate: (e: GoEvent) => boolean, timeoutMs?: number): Promise<GoEvent>;
  /** Stops the server (closes stdin, then SIGKILL after 5 s) and waits for exit. */
  close(): Promise<void>;
}

/** Options for {@link startGoServer}. */
export interface StartGoServerOptions {
  /** How long to wait for the `listening on` line (default 30 s, build excluded). */
  timeoutMs?: number;
}

/** Options for {@link runGoClient}. */
export interface RunGoClientOptions {
  /**
   * Hard limit for the client process in milliseconds (default 120 s); the
   * client's own `-timeout` (default 60 s) should normally fire first.
   */
  timeoutMs?: number;
}

/** What a finished client process left behind. */
interface ClientRun {
  code: number | null;
  signal: string | null;
  stdout: string;
  stderr: string;
  killed: boolean;
}

const INTEROP_DIR = dirname(fileURLToPath(import.meta.url));
const REPO_ROOT = dirname(INTEROP_DIR);
/** Directory the peer binaries are cached in (`<repo>/.cache/interop`). */
export const GO_PEER_CACHE_DIR: string = join(REPO_ROOT, ".cache", "interop");

/**
 * Builds the Go peer `name` (once per process; across processes a binary is
 * reused while a hash of its Go sources, go.sum and `go version` is unchanged)
 * into `<repo>/.cache/interop/<name>` and resolves with the binary path.
 * Rejects with go's stderr if the build fails, or a clear message if `go` is missing.
 */
export function buildGoPeer(name: GoPeerName): Promise<string> {
  if (!(GO_PEERS as readonly string[]).includes(name)) {
    throw new Error(`unknown Go peer ${JSON.stringify(name)} (want one of ${GO_PEERS.join(", ")})`);
  }
  return buildGoProgram({
    name,
    packageDir: join(INTEROP_DIR, name),
    sourceDirs: [join(INTEROP_DIR, name), join(INTEROP_DIR, "peer")],
    cacheDir: GO_PEER_CACHE_DIR,
  });
}

/**
 * Builds (if needed) and starts the Go peer `name` as a yamux echo server on
 * `127.0.0.1:0` with extra server flags `args` (e.g. `["-goaway-after", "3"]`),
 * and resolves once it printed `listening on HOST:PORT`.
 */
export async function startGoServer(
  name: GoPeerName,
  args: string[] = [],
  options: StartGoServerOptions = {},
): Promise<GoServer> {
  const bin = await buildGoPeer(name);
  const timeoutMs = options.timeoutMs ?? 30_000;
  const child = spawn(bin, ["-listen", "127.0.0.1:0", ...args], {
    stdio: ["pipe", "pipe", "pipe"],
  });
  let stderr = "";
  let stdoutBuf = "";
  let listening = false;
  let exited = false;
  const events: GoEvent[] = [];
  const waiters = new Set<() => void>();
  const notify = () => {
    for (const w of [...waiters]) w();
  };
  const exitPromise = new Promise<void>((resolve) => {
    child.on("close", () => {
      exited = true;
      notify();
      resolve();
    });
  });
  child.stderr!.setEncoding("utf8");
  child.stderr!.on("data", (d: string) => (stderr += d));
  child.stdout!.setEncoding("utf8");

  const addr = await new Promise<{ hostname: string; port: number }>((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill("SIGKILL");
      reject(
        new Error(`${name} server did not report "listening on" within ${timeoutMs} ms\n${stderr}`),
      );
    }, timeoutMs);
    const fail = (err: Error) => {
      clearTimeout(timer);
      reject(err);
    };
    child.on("error", fail);
    void exitPromise.then(() => {
      if (!listening) fail(new Error(`${name} server exited before listening:\n${stderr}`));
    });
    child.stdout!.on("data", (d: string) => {
      stdoutBuf += d;
      let nl: number;
      while ((nl = stdoutBuf.indexOf("\n")) >= 0) {
        const line = stdoutBuf.slice(0, nl).trim();
        stdoutBuf = stdoutBuf.slice(nl + 1);
        if (!line) continue;
        if (!listening) {
          const m = /^listening on (.+):(\d+)$/.exec(line);
          if (!m) {
            fail(new Error(`${name} server printed unexpected first line: ${line}`));
            child.kill("SIGKILL");
            return;
          }
          listening = true;
          clearTimeout(timer);
          resolve({ hostname: m[1], port: Number(m[2]) });
          continue;
        }
        try {
          events.push(JSON.parse(line) as GoEvent);
        } catch {
          events.push({ event: "raw", line });
        }
        notify();
      }
    });
  });

  return {
    hostname: addr.hostname,
    port: addr.port,
    address: `${addr.hostname}:${addr.port}`,
    get stderr() {
      return stderr;
    },
    events,
    waitForEvent(predicate, timeoutMs = 10_000) {
      return new Promise<GoEvent>((resolve, reject) => {
        const check = () => {
          const hit = events.find(predicate);
          if (hit || exited) {
            waiters.delete(check);
            clearTimeout(timer);
            if (hit) resolve(hit);
            else reject(new Error(`${name} server exited before the awaited event\n${stderr}`));
          }
        };
        const timer = setTimeout(() => {
          waiters.delete(check);
          reject(
            new Error(
              `${name} server: awaited event not seen within ${timeoutMs} ms; events: ${
                JSON.stringify(events)
              }`,
            ),
          );
        }, timeoutMs);
        waiters.add(check);
        check();
      });
    },
    async close() {
      if (exited) return;
      child.stdin!.end();
      const timer = setTimeout(() => child.kill("SIGKILL"), 5_000);
      await exitPromise;
      clearTimeout(timer);
    },
  };
}

/**
 * Builds (if needed) and runs the Go peer `name` as a yamux client with
 * `args` (must include `-connect HOST:PORT -scenario NAME`). Resolves with the
 * parsed JSON summary on success; rejects with the summary's error, stderr and
 * stdout when the scenario fails or the process exits non-zero.
 */
export async function runGoClient(
  name: GoPeerName,
  args: string[],
  options: RunGoClientOptions = {},
): Promise<GoSummary> {
  const bin = await buildGoPeer(name);
  const timeoutMs = options.timeoutMs ?? 120_000;
  const res = await new Promise<ClientRun>((resolve, reject) => {
    const child = spawn(bin, args, { stdio: ["ignore", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    let killed = false;
    child.stdout!.setEncoding("utf8");
    child.stderr!.setEncoding("utf8");
    child.stdout!.on("data", (d: string) => (stdout += d));
    child.stderr!.on("data", (d: string) => (stderr += d));
    const timer = setTimeout(() => {
      killed = true;
      child.kill("SIGKILL");
    }, timeoutMs);
    child.on("error", (err) => {
      clearTimeout(timer);
      reject(err);
    });
    child.on("close", (code, signal) => {
      clearTimeout(timer);
      resolve({ code, signal, stdout, stderr, killed });
    });
  });
  const lines = res.stdout.split("\n").map((l) => l.trim()).filter(Boolean);
  let summary: GoSummary | undefined;
  try {
    summary = lines.length ? JSON.parse(lines[lines.length - 1]) as GoSummary : undefined;
  } catch {
    summary = undefined;
  }
  if (res.code === 0 && summary?.ok === true) return summary;
  const why = res.killed
    ? `killed after ${timeoutMs} ms`
    : summary?.error ?? `exit ${res.code ?? res.signal}`;
  throw new Error(
    `${name} ${
      args.join(" ")
    } failed: ${why}\n--- stderr ---\n${res.stderr}--- stdout ---\n${res.stdout}`,
  );
}
