/**
 * Test support: the real daemon and client programs as separate processes, under the runtime
 * running the test (`process.execPath`: Deno gets `run -A FILE`, Bun just `FILE`), with their
 * config, tokens and logs.
 *
 * Rules the helpers keep, so tests stay robust:
 *
 * - everything started here is registered and torn down by {@linkcode cleanup}, which a test file
 *   calls from `after`/`afterEach`; child processes are also SIGKILLed when the test process exits;
 * - every wait is bounded (a timeout rejects with context: the process's recent output);
 * - nothing asserts on durations: timeouts only turn a hang into a failure.
 *
 * @example
 * ```ts ignore
 * import { after, it } from "node:test";
 * import { cleanup, daemonConfig, newToken, startClient, startDaemon } from "./process.ts";
 * import { startEchoServer } from "./fake_servers.ts";
 * import { tcpRoundTrip } from "./visitors.ts";
 * after(cleanup);
 * it("echo through a reverse tunnel", async () => {
 *   const token = newToken("laptop");
 *   const daemon = await startDaemon({ config: daemonConfig([{ name: "laptop", token }]) });
 *   const echo = await startEchoServer();
 *   const client = await startClient({
 *     server: daemon.tcpUrl, token, args: ["--expose", `0=127.0.0.1:${echo.port}`],
 *   });
 *   const { port } = await client.waitForTunnel();
 *   const back = await tcpRoundTrip(port, new TextEncoder().encode("hi"));
 * });
 * ```
 *
 * @module
 */

import { type ChildProcess, spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import process from "node:process";
import { fileURLToPath } from "node:url";
import { currentRuntime, type RuntimeName } from "../util/host/runtime.ts";
import { register } from "./cleanup.ts";
import { DEFAULT_TIMEOUT_MS, withTimeout } from "./wait.ts";

export { cleanup } from "./cleanup.ts";

/** The repository root (where `daemon/` and `client/` live). */
export const ROOT: string = fileURLToPath(new URL("..", import.meta.url));

/** The runtime running the tests, and so the one the programs run under. */
export const RUNTIME: RuntimeName = currentRuntime();

const children = new Set<ChildProcess>();

let exitHookInstalled = false;
function installExitHook(): void {
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  process.on("exit", () => {
    for (const child of children) {
      try {
        child.kill("SIGKILL");
      } catch { /* already gone */ }
    }
  });
}

/** A fresh plain token (≥ 24 characters, as the daemon requires), tagged with `label`. */
export function newToken(label = "e2e"): string {
  return `${label}-${randomBytes(18).toString("hex")}`;
}

/** One client entry of a daemon config; see `daemon/config.ts`. */
export interface ClientEntry {
  /** Client name. */
  name: string;
  /** Plain token (≥ 24 characters) or `sha256:` hash. */
  token: string;
  /**
   * Reverse tunnels it may open; default ports 20000-32767 and 0 (any of them) on 127.0.0.1:
   * below Linux's ephemeral range (32768-60999), so a tunnel's port never collides with a port
   * the suite's own outgoing connections (or their TIME_WAIT) hold.
   */
  expose?: { ports?: (string | number)[]; bindHosts?: string[] };
  /** Forward allowlist, e.g. `["127.0.0.1:5432", "10.0.0.0/8:443"]`. Default none. */
  forward?: string[];
  /** Groups it may join (each defined in the config's `groups`). Default none. */
  groups?: string[];
  /** Named services. */
  services?: { offer?: string[]; use?: string[] };
  /** Per-client limits. */
  limits?: { tunnels?: number; streams?: number };
}

/**
 * Builds a daemon config document: the given clients, admin listener off, JSON logs at `info`,
 * a short shutdown grace (2 s), and `extra` merged on top (shallowly, per top-level key).
 */
export function daemonConfig(
  clients: ClientEntry[],
  extra: Record<string, unknown> = {},
): Record<string, unknown> {
  return {
    listen: { admin: null },
    shutdownGraceMs: 2_000,
    log: { level: "info", format: "json" },
    clients: clients.map((c) => ({
      expose: { ports: ["20000-32767", 0] },
      ...c,
    })),
    ...extra,
  };
}

/** A JSON log line of the daemon or client (`time`, `level`, `msg` and context fields). */
export type LogEntry = Record<string, unknown> & { level?: string; msg?: string };

/** A running program, daemon or client. */
export interface ProgramProcess {
  /** The child process. */
  readonly process: ChildProcess;
  /** Its pid. */
  readonly pid: number;
  /** Every JSON log line from stderr so far, parsed, in order. */
  logs(): LogEntry[];
  /** Raw stdout so far. */
  stdout(): string;
  /** Raw stderr so far (JSON lines and anything else). */
  stderr(): string;
  /**
   * Resolves with the first log entry at index ≥ `from` (an earlier `logs().length`) matching
   * `predicate`. Rejects on timeout or if the process exits first, quoting its recent stderr.
   */
  waitForLog(
    predicate: (entry: LogEntry) => boolean,
    timeoutMs?: number,
    from?: number,
  ): Promise<LogEntry>;
  /** Sends a signal (e.g. `SIGHUP`, `SIGTERM`, `SIGKILL`). */
  signal(name: string): void;
  /** Resolves once the process has exited. */
  readonly exited: Promise<{ code: number | null; signal: string | null }>;
  /** True once it has exited. */
  readonly hasExited: boolean;
  /**
   * SIGTERM, then SIGKILL if it has not exited within `graceMs` (default 5 s). Resolves with the
   * exit code (null when ended by a signal).
   */
  stop(graceMs?: number): Promise<number | null>;
  /** SIGKILL, and wait (bounded) for the exit. */
  kill(): Promise<void>;
}

/** A running daemon. */
export interface DaemonProcess extends ProgramProcess {
  /** `tcp://127.0.0.1:PORT`, when TCP is on. */
  readonly tcpUrl: string;
  /** `ws://127.0.0.1:PORT/tunnel`, when WebSocket is on. */
  readonly wsUrl: string;
  /** `127.0.0.1:PORT` of the TCP listener ("" when off). */
  readonly tcpAddress: string;
  /** `127.0.0.1:PORT` of the WebSocket listener, without path ("" when off). */
  readonly wsAddress: string;
  /** In a cluster: `127.0.0.1:PORT` of the relay listener as bound ("" otherwise). */
  readonly clusterAddress: string;
  /** In a cluster: the relay listener's address as the node advertises it ("" otherwise). */
  readonly clusterAdvertise: string;
  /** The config file written for it (undefined without `config`). */
  readonly configPath: string | undefined;
  /** Rewrites the config file (then `signal("SIGHUP")` to reload). */
  writeConfig(config: Record<string, unknown>): void;
}

/** A running client CLI. */
export interface ClientProcess extends ProgramProcess {
  /**
   * Waits for the next "tunnel up" log line at index ≥ `from` and returns its remote address.
   */
  waitForTunnel(
    from?: number,
    timeoutMs?: number,
  ): Promise<{ host: string; port: number; entry: LogEntry }>;
  /** Waits for the next "forwarding" log line at index ≥ `from`; returns its listen address. */
  waitForForward(
    from?: number,
    timeoutMs?: number,
  ): Promise<{ host: string; port: number; entry: LogEntry }>;
}

/** Arguments to run `file` (relative to {@linkcode ROOT}) under the current runtime. */
export function runtimeArgs(file: string, args: string[] = []): string[] {
  const path = join(ROOT, file);
  return RUNTIME === "deno" ? ["run", "-A", path, ...args] : [path, ...args];
}

function cleanEnv(extra: Record<string, string | undefined> = {}): Record<string, string> {
  const env: Record<string, string> = {};
  for (const [key, value] of Object.entries(process.env)) {
    // The test's own TUNNELMUX_ settings stay out, except the suite-wide poisoning of returned
    // relay buffers (scripts/test.sh), which the programs under test must run with too.
    if (value === undefined) continue;
    if (!key.startsWith("TUNNELMUX_") || key === "TUNNELMUX_POOL_POISON") env[key] = value;
  }
  env.NO_COLOR = "1";
  for (const [key, value] of Object.entries(extra)) {
    if (value === undefined) delete env[key];
    else env[key] = value;
  }
  return env;
}

function splitHostPort(text: string): { host: string; port: number } {
  const at = text.lastIndexOf(":");
  return { host: text.slice(0, at).replace(/^\[(.*)\]$/, "$1"), port: Number(text.slice(at + 1)) };
}

function spawnProgram(file: string, args: string[], env: Record<string, string | undefined>) {
  installExitHook();
  const child = spawn(process.execPath, runtimeArgs(file, args), {
    cwd: ROOT,
    env: cleanEnv(env),
    stdio: ["ignore", "pipe", "pipe"],
  });
  children.add(child);
  let out = "";
  let err = "";
  let partial = "";
  const entries: LogEntry[] = [];
  const listeners = new Set<() => void>();
  const notify = () => {
    for (const listener of [...listeners]) listener();
  };
  child.stdout!.setEncoding("utf8");
  child.stderr!.setEncoding("utf8");
  child.stdout!.on("data", (chunk: string) => {
    out += chunk;
    notify();
  });
  child.stderr!.on("data", (chunk: string) => {
    err += chunk;
    partial += chunk;
    const lines = partial.split("\n");
    partial = lines.pop()!;
    for (const line of lines) {
      if (!line.startsWith("{")) continue;
      try {
        entries.push(JSON.parse(line));
      } catch { /* not a log line */ }
    }
    notify();
  });
  let hasExited = false;
  const exited = new Promise<{ code: number | null; signal: string | null }>((resolve) => {
    // "close" comes after "exit" and after stdout and stderr are drained: no output is missed.
    child.on("close", (code, signal) => {
      hasExited = true;
      children.delete(child);
      resolve({ code, signal });
      notify();
    });
    child.on("error", () => {
      hasExited = true;
      children.delete(child);
      resolve({ code: null, signal: null });
      notify();
    });
  });
  const tail = () =>
    `\n--- stderr (last 3000 chars) ---\n${err.slice(-3000)}\n--- stdout ---\n${out.slice(-1000)}`;

  /** Waits until `check()` returns a value, re-checking on every output or exit. */
  const until = <T>(check: () => T | undefined, timeoutMs: number, what: string): Promise<T> =>
    new Promise<T>((resolve, reject) => {
      const listener = () => {
        let value: T | undefined;
        try {
          value = check();
        } catch (error) {
          finish();
          return reject(error);
        }
        if (value !== undefined) {
          finish();
          return resolve(value);
        }
        if (hasExited) {
          finish();
          reject(new Error(`${file} exited before ${what}${tail()}`));
        }
      };
      const finish = () => {
        clearTimeout(timer);
        listeners.delete(listener);
      };
      const timer = setTimeout(() => {
        finish();
        reject(new Error(`${file}: no ${what} within ${timeoutMs} ms${tail()}`));
      }, timeoutMs);
      listeners.add(listener);
      listener();
    });

  // Signals go through process.kill(pid): Deno's ChildProcess.kill() makes the exit report the
  // signal it sent even when the program handled it and exited with a code of its own.
  const send = (name: string | number) => {
    if (hasExited || child.pid === undefined) return;
    try {
      process.kill(child.pid, name);
    } catch { /* already gone */ }
  };
  const kill = async () => {
    send("SIGKILL");
    await withTimeout(exited, DEFAULT_TIMEOUT_MS, `${file} to exit after SIGKILL`).catch(() => {});
  };
  register(kill);

  const program: ProgramProcess = {
    process: child,
    pid: child.pid ?? -1,
    logs: () => entries,
    stdout: () => out,
    stderr: () => err,
    waitForLog: (predicate, timeoutMs = DEFAULT_TIMEOUT_MS, from = 0) =>
      until(
        () => entries.slice(from).find(predicate),
        timeoutMs,
        "matching log line",
      ),
    signal: (name) => {
      send(name);
    },
    exited,
    get hasExited() {
      return hasExited;
    },
    stop: async (graceMs = 5_000) => {
      send("SIGTERM");
      const result = await withTimeout(exited, graceMs, "exit after SIGTERM").catch(async () => {
        send("SIGKILL");
        return await withTimeout(exited, DEFAULT_TIMEOUT_MS, `${file} to exit after SIGKILL`);
      });
      return result.code;
    },
    kill,
  };
  return { program, until };
}

/** Options of {@linkcode startDaemon}. */
export interface StartDaemonOptions {
  /** Config document, written to a temp JSONC file and passed with `--config`. */
  config?: Record<string, unknown>;
  /** Extra environment (inherited `TUNNELMUX_*` variables are always removed). */
  env?: Record<string, string | undefined>;
  /** Extra command-line arguments. */
  args?: string[];
  /** `--listen-tcp` (default `127.0.0.1:0`; `off` to disable). */
  listenTcp?: string;
  /** `--listen-ws` (default `127.0.0.1:0`; `off` to disable). */
  listenWs?: string;
  /** Bound on the start (default {@linkcode DEFAULT_TIMEOUT_MS}). */
  timeoutMs?: number;
}

/**
 * Starts `daemon/main.ts` with `--listen-admin off --log-format json` and the given listeners
 * (port 0 by default), and resolves once it printed its listener addresses on stdout.
 */
export async function startDaemon(options: StartDaemonOptions = {}): Promise<DaemonProcess> {
  let configPath: string | undefined;
  let dir: string | undefined;
  if (options.config) {
    dir = mkdtempSync(join(tmpdir(), "tunnelmux-e2e-"));
    configPath = join(dir, "daemon.jsonc");
    writeFileSync(
      configPath,
      `// written by testing/process.ts\n${JSON.stringify(options.config, null, 2)}\n`,
    );
    register(() => rmSync(dir!, { recursive: true, force: true }));
  }
  const listenTcp = options.listenTcp ?? "127.0.0.1:0";
  const listenWs = options.listenWs ?? "127.0.0.1:0";
  const args = [
    "--listen-tcp",
    listenTcp,
    "--listen-ws",
    listenWs,
    "--listen-admin",
    "off",
    "--log-format",
    "json",
    ...(configPath ? ["--config", configPath] : []),
    ...(options.args ?? []),
  ];
  // A cluster node prints its relay listener too (the last of the lines).
  const clustered = Boolean(options.config?.cluster) ||
    args.includes("--cluster-servers") || options.env?.TUNNELMUX_CLUSTER_SERVERS !== undefined;
  const { program, until } = spawnProgram("daemon/main.ts", args, options.env ?? {});
  const addresses = await until(
    () => {
      const text = program.stdout();
      const tcp = /tunnels over TCP on (\S+)/.exec(text)?.[1];
      const ws = /tunnels over WebSocket on (ws:\/\/\S+)/.exec(text)?.[1];
      const cluster = /cluster relays on (\S+), advertised as (\S+)/.exec(text);
      if ((listenTcp !== "off" && !tcp) || (listenWs !== "off" && !ws)) return undefined;
      if (clustered && !cluster) return undefined;
      return {
        tcp: tcp ?? "",
        ws: ws ?? "",
        cluster: cluster?.[1] ?? "",
        advertise: cluster?.[2] ?? "",
      };
    },
    options.timeoutMs ?? DEFAULT_TIMEOUT_MS,
    "listener addresses on stdout",
  ).catch(async (error) => {
    await program.kill();
    throw error;
  });
  const wsAddress = addresses.ws ? new URL(addresses.ws).host : "";
  return Object.assign(program, {
    tcpUrl: addresses.tcp ? `tcp://${addresses.tcp}` : "",
    wsUrl: addresses.ws,
    tcpAddress: addresses.tcp,
    wsAddress,
    clusterAddress: addresses.cluster,
    clusterAdvertise: addresses.advertise,
    configPath,
    writeConfig(config: Record<string, unknown>) {
      if (!configPath) throw new Error("startDaemon was given no config file");
      writeFileSync(configPath, JSON.stringify(config, null, 2));
    },
  });
}

/** Options of {@linkcode startClient}. */
export interface StartClientOptions {
  /** `--server` URL (e.g. `daemon.tcpUrl` or `daemon.wsUrl`). */
  server: string;
  /** Passed as `TUNNELMUX_TOKEN`. */
  token: string;
  /** Further arguments: `--expose`, `--forward`, `--offer`, `--use`, `--no-reconnect`, ... */
  args?: string[];
  /** Extra environment. */
  env?: Record<string, string | undefined>;
}

/**
 * Starts `client/main.ts --server URL --log-format json ARGS` with the token in the environment.
 * Resolves at once (the process is running); wait for its state with `waitForLog`,
 * `waitForTunnel` or `waitForForward`.
 */
export function startClient(options: StartClientOptions): Promise<ClientProcess> {
  const args = ["--server", options.server, "--log-format", "json", ...(options.args ?? [])];
  const { program } = spawnProgram("client/main.ts", args, {
    ...options.env,
    TUNNELMUX_TOKEN: options.token,
  });
  const address = (msg: string, field: string) => (from = 0, timeoutMs = DEFAULT_TIMEOUT_MS) =>
    program.waitForLog((e) => e.msg === msg && typeof e[field] === "string", timeoutMs, from)
      .then((entry) => ({ ...splitHostPort(entry[field] as string), entry }));
  return Promise.resolve(Object.assign(program, {
    waitForTunnel: address("tunnel up", "remote"),
    waitForForward: address("forwarding", "listen"),
  }));
}

/** Resident set size of a process in bytes (`VmRSS` from `/proc/PID/status`; Linux only). */
export function rssBytes(pid: number): number {
  const status = readFileSync(`/proc/${pid}/status`, "utf8");
  const kb = /^VmRSS:\s+(\d+)\s+kB/m.exec(status);
  if (!kb) throw new Error(`no VmRSS in /proc/${pid}/status`);
  return Number(kb[1]) * 1024;
}
