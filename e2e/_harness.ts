/**
 * End-to-end test harness: runs the real daemon and client programs as separate processes, under
 * the runtime running the test (`process.execPath`: Deno gets `run -A FILE`, Bun just `FILE`), and
 * provides small plain-TCP services on 127.0.0.1 to tunnel to.
 *
 * Rules the helpers keep, so tests stay robust:
 *
 * - everything started here (processes, servers, sockets) is registered and torn down by
 *   {@linkcode cleanup}, which a test file calls from `after`/`afterEach`; child processes are
 *   also SIGKILLed when the test process exits;
 * - every wait is bounded (a timeout rejects with context: the process's recent output);
 * - nothing asserts on durations: timeouts only turn a hang into a failure.
 *
 * @example
 * ```ts ignore
 * import { after, it } from "node:test";
 * import { cleanup, daemonConfig, newToken, startClient, startDaemon, startEchoServer,
 *   tcpRoundTrip } from "./_harness.ts";
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
import {
  createServer as createHttpServer,
  type IncomingMessage,
  type ServerResponse,
} from "node:http";
import {
  connect as netConnect,
  createServer as createNetServer,
  type Server,
  type Socket,
} from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import process from "node:process";
import { Buffer } from "node:buffer";
import { fileURLToPath } from "node:url";
import { prng } from "../util/prng.ts";

/** The repository root (where `daemon/` and `client/` live). */
export const ROOT: string = fileURLToPath(new URL("..", import.meta.url));

/** The runtime running the tests, and so the one the programs run under. */
export const RUNTIME: "deno" | "bun" | "node" = "Deno" in globalThis
  ? "deno"
  : "Bun" in globalThis
  ? "bun"
  : "node";

/** Default bound of every wait in this module, in milliseconds. */
export const DEFAULT_TIMEOUT_MS = 15_000;

// ---------------------------------------------------------------------------------------------
// Registry and cleanup

const closers = new Set<() => Promise<void> | void>();
const children = new Set<ChildProcess>();

function register(closer: () => Promise<void> | void): () => void {
  closers.add(closer);
  return () => closers.delete(closer);
}

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

/**
 * Tears down everything this module started and that is still alive: child processes are
 * SIGKILLed (and awaited, bounded), servers and sockets closed, temp files removed. Safe to call
 * any number of times; call it from `after` or `afterEach`, so it runs even when a test fails.
 */
export async function cleanup(): Promise<void> {
  const all = [...closers];
  closers.clear();
  await Promise.allSettled(all.map(async (close) => await close()));
}

// ---------------------------------------------------------------------------------------------
// Waiting

/** Options of {@linkcode waitFor}. */
export interface WaitOptions {
  /** Give up after about this long (default {@linkcode DEFAULT_TIMEOUT_MS}). */
  timeoutMs?: number;
  /** Pause between polls (default 25 ms). The number of polls is bounded by timeout / interval. */
  intervalMs?: number;
  /** Says what was awaited, for the timeout error. */
  message?: string;
}

/**
 * Polls `condition` until it returns a truthy value (returned) or the bounded number of polls
 * (`timeoutMs / intervalMs`) is used up, then rejects. A throwing condition counts as falsy; its
 * last error is quoted on timeout.
 */
export async function waitFor<T>(
  condition: () => T | Promise<T>,
  options: WaitOptions = {},
): Promise<NonNullable<T>> {
  const timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  const intervalMs = options.intervalMs ?? 25;
  const polls = Math.max(1, Math.ceil(timeoutMs / intervalMs));
  let lastError: unknown;
  for (let i = 0; i < polls; i++) {
    try {
      const value = await condition();
      if (value) return value as NonNullable<T>;
    } catch (error) {
      lastError = error;
    }
    await sleep(intervalMs);
  }
  const detail = lastError ? ` (last error: ${(lastError as Error).message ?? lastError})` : "";
  throw new Error(`waitFor: ${options.message ?? "condition"} not met in ${timeoutMs} ms${detail}`);
}

/** Resolves after `ms` milliseconds. */
export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** Rejects with `message` if `promise` does not settle within `timeoutMs`. */
export function withTimeout<T>(
  promise: Promise<T>,
  timeoutMs: number,
  message: string,
): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () => reject(new Error(`timed out after ${timeoutMs} ms: ${message}`)),
      timeoutMs,
    );
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

// ---------------------------------------------------------------------------------------------
// Tokens and configuration

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
  /** Reverse tunnels it may open; default ports 20000-40000 and 0 (any of them) on 127.0.0.1. */
  expose?: { ports?: (string | number)[]; bindHosts?: string[] };
  /** Forward allowlist, e.g. `["127.0.0.1:5432", "10.0.0.0/8:443"]`. Default none. */
  forward?: string[];
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
      expose: { ports: ["20000-40000", 0] },
      ...c,
    })),
    ...extra,
  };
}

// ---------------------------------------------------------------------------------------------
// Processes

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
    if (value !== undefined && !key.startsWith("TUNNELMUX_")) env[key] = value;
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
      `// written by e2e/_harness.ts\n${JSON.stringify(options.config, null, 2)}\n`,
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
  const { program, until } = spawnProgram("daemon/main.ts", args, options.env ?? {});
  const addresses = await until(
    () => {
      const text = program.stdout();
      const tcp = /tunnels over TCP on (\S+)/.exec(text)?.[1];
      const ws = /tunnels over WebSocket on (ws:\/\/\S+)/.exec(text)?.[1];
      if ((listenTcp !== "off" && !tcp) || (listenWs !== "off" && !ws)) return undefined;
      return { tcp: tcp ?? "", ws: ws ?? "" };
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

// ---------------------------------------------------------------------------------------------
// Plain TCP services on 127.0.0.1

/** A TCP service started for a test. */
export interface TestServer {
  /** The bound port on 127.0.0.1. */
  readonly port: number;
  /** `127.0.0.1:PORT`. */
  readonly address: string;
  /** Connections accepted in all. */
  readonly connections: number;
  /** Connections open now. */
  readonly active: number;
  /** The accepted sockets still open. */
  readonly sockets: ReadonlySet<Socket>;
  /** Stops listening and destroys open connections. */
  close(): Promise<void>;
}

/** A stalling server: it accepts but never reads. */
export interface StallServer extends TestServer {
  /** Starts reading (and discarding) on every stalled socket. */
  release(): void;
}

async function startNetServer(
  onSocket: (socket: Socket) => void,
  options: { allowHalfOpen?: boolean } = {},
): Promise<TestServer & { server: Server }> {
  let connections = 0;
  const sockets = new Set<Socket>();
  const server = createNetServer({ allowHalfOpen: options.allowHalfOpen ?? true }, (socket) => {
    connections++;
    sockets.add(socket);
    socket.on("error", () => {});
    socket.on("close", () => sockets.delete(socket));
    onSocket(socket);
  });
  await listenServer(server);
  return serverView(server, sockets, () => connections);
}

function listenServer(server: Server | ReturnType<typeof createHttpServer>): Promise<void> {
  return withTimeout(
    new Promise<void>((resolve, reject) => {
      server.once("error", reject);
      server.listen(0, "127.0.0.1", () => resolve());
    }),
    DEFAULT_TIMEOUT_MS,
    "listen on 127.0.0.1:0",
  );
}

function serverView<S extends Server | ReturnType<typeof createHttpServer>>(
  server: S,
  sockets: Set<Socket>,
  connections: () => number,
): TestServer & { server: S } {
  const port = (server.address() as { port: number }).port;
  let closed: Promise<void> | undefined;
  const close = () =>
    closed ??= withTimeout(
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        for (const socket of sockets) socket.destroy();
      }),
      DEFAULT_TIMEOUT_MS,
      "server close",
    ).catch(() => {});
  register(close);
  return {
    server,
    port,
    address: `127.0.0.1:${port}`,
    get connections() {
      return connections();
    },
    get active() {
      return sockets.size;
    },
    sockets,
    close,
  };
}

/**
 * A TCP server on 127.0.0.1:0 that hands each accepted socket (half-open allowed, errors
 * swallowed) to `onSocket`: the building block for services a test needs once.
 */
export function startTcpServer(onSocket: (socket: Socket) => void): Promise<TestServer> {
  return startNetServer(onSocket);
}

/** An echo server: echoes every byte, and half-closes its side when the peer does. */
export function startEchoServer(): Promise<TestServer> {
  return startNetServer((socket) => socket.pipe(socket));
}

/**
 * A server that reads the whole request until EOF (the peer's half-close) and only then answers
 * with `respond(request)` and closes. Without the peer's half-close it never answers.
 */
export function startAfterEofServer(
  respond: (request: Uint8Array) => Uint8Array = (request) =>
    new TextEncoder().encode(`got ${request.length} bytes`),
): Promise<TestServer> {
  return startNetServer((socket) => {
    const chunks: Buffer[] = [];
    socket.on("data", (chunk: Buffer) => chunks.push(chunk));
    socket.on("end", () => socket.end(respond(Buffer.concat(chunks))));
  });
}

/**
 * A server that accepts connections and never reads from them (their data piles up in the
 * kernel, then in whoever writes), until {@linkcode StallServer.release}.
 */
export async function startStallServer(): Promise<StallServer> {
  const base = await startNetServer((socket) => socket.pause());
  return Object.assign(base, {
    release() {
      for (const socket of base.sockets) {
        socket.on("data", () => {});
        socket.resume();
      }
    },
  });
}

/**
 * An HTTP/1.1 server (`node:http`). Routes: `GET /bytes?n=N&seed=S` answers N bytes of
 * {@linkcode seededBytes}(N, S); `POST /echo` answers the request body; `GET /hello` answers
 * "hello"; anything else 404. `requests` counts requests.
 */
export async function startHttpServer(): Promise<TestServer & { readonly requests: number }> {
  let connections = 0;
  let requests = 0;
  const sockets = new Set<Socket>();
  const server = createHttpServer((req: IncomingMessage, res: ServerResponse) => {
    requests++;
    const url = new URL(req.url ?? "/", "http://localhost");
    if (req.method === "GET" && url.pathname === "/bytes") {
      const body = seededBytes(
        Number(url.searchParams.get("n") ?? 0),
        Number(url.searchParams.get("seed") ?? 0),
      );
      res.writeHead(200, {
        "content-type": "application/octet-stream",
        "content-length": body.length,
      });
      res.end(body);
    } else if (req.method === "POST" && url.pathname === "/echo") {
      const chunks: Buffer[] = [];
      req.on("data", (c: Buffer) => chunks.push(c));
      req.on("end", () => {
        const body = Buffer.concat(chunks);
        res.writeHead(200, {
          "content-type": "application/octet-stream",
          "content-length": body.length,
        });
        res.end(body);
      });
    } else if (url.pathname === "/hello") {
      res.writeHead(200, { "content-type": "text/plain" });
      res.end("hello");
    } else {
      res.writeHead(404);
      res.end();
    }
  });
  server.on("connection", (socket: Socket) => {
    connections++;
    sockets.add(socket);
    socket.on("error", () => {});
    socket.on("close", () => sockets.delete(socket));
  });
  await listenServer(server);
  const view = serverView(server, sockets, () => connections);
  Object.defineProperty(view, "requests", { get: () => requests, enumerable: true });
  return view as unknown as TestServer & { readonly requests: number };
}

/** A port on 127.0.0.1 where nothing listens (bound, then closed, so connecting is refused). */
export async function closedPort(): Promise<number> {
  const server = createNetServer();
  await listenServer(server);
  const port = (server.address() as { port: number }).port;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

// ---------------------------------------------------------------------------------------------
// Visitors

/** Deterministic bytes from a seed (so a failure replays): `size` bytes of a seeded PRNG. */
export function seededBytes(size: number, seed: number): Uint8Array {
  const random = prng(seed);
  const bytes = new Uint8Array(size);
  let word = 0;
  for (let i = 0; i < size; i++) {
    if ((i & 3) === 0) word = Math.floor(random() * 0x1_0000_0000);
    bytes[i] = (word >>> ((i & 3) * 8)) & 0xff;
  }
  return bytes;
}

/** Throws if `actual` differs from `expected`, naming the length or the first differing byte. */
export function assertSameBytes(actual: Uint8Array, expected: Uint8Array, what = "bytes"): void {
  if (actual.length !== expected.length) {
    throw new Error(`${what}: got ${actual.length} bytes, expected ${expected.length}`);
  }
  if (
    Buffer.from(actual.buffer, actual.byteOffset, actual.length).equals(
      Buffer.from(expected.buffer, expected.byteOffset, expected.length),
    )
  ) return;
  for (let i = 0; i < actual.length; i++) {
    if (actual[i] !== expected[i]) throw new Error(`${what}: byte ${i} differs`);
  }
}

/** Options of {@linkcode tcpRoundTrip}. */
export interface RoundTripOptions {
  /** Host (default 127.0.0.1). */
  host?: string;
  /** Bound on the whole exchange (default {@linkcode DEFAULT_TIMEOUT_MS}). */
  timeoutMs?: number;
  /** Half-close after writing (default true); without it, reads until the peer closes. */
  halfClose?: boolean;
}

/**
 * Connects to `port`, writes `bytes`, half-closes, and resolves with everything received until the
 * peer ends. Rejects on a connection error, a reset, or the timeout.
 */
export function tcpRoundTrip(
  port: number,
  bytes: Uint8Array,
  options: RoundTripOptions = {},
): Promise<Uint8Array> {
  const timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  let socket: Socket | undefined;
  const done = new Promise<Uint8Array>((resolve, reject) => {
    socket = netConnect({ host: options.host ?? "127.0.0.1", port, allowHalfOpen: true });
    const chunks: Buffer[] = [];
    socket.on("data", (chunk: Buffer) => chunks.push(chunk));
    socket.on("end", () => {
      resolve(new Uint8Array(Buffer.concat(chunks)));
      socket!.end();
    });
    socket.on("error", reject);
    socket.on("close", () => reject(new Error(`connection to ${port} closed before its end`)));
    socket.on("connect", () => {
      socket!.write(bytes);
      if (options.halfClose ?? true) socket!.end();
    });
  });
  const unregister = register(() => void socket?.destroy());
  return withTimeout(done, timeoutMs, `round trip of ${bytes.length} bytes via port ${port}`)
    .finally(() => {
      socket?.destroy();
      unregister();
    });
}

/** Opens a plain TCP connection to 127.0.0.1:`port` (registered for cleanup). */
export function tcpConnect(port: number, host = "127.0.0.1"): Promise<Socket> {
  const socket = netConnect({ host, port, allowHalfOpen: true });
  socket.on("error", () => {});
  register(() => void socket.destroy());
  return withTimeout(
    new Promise<Socket>((resolve, reject) => {
      socket.once("connect", () => resolve(socket));
      socket.once("error", reject);
    }),
    DEFAULT_TIMEOUT_MS,
    `connect to ${host}:${port}`,
  );
}

/**
 * Tries to connect to 127.0.0.1:`port`: resolves `"refused"` (ECONNREFUSED), `"accepted"`
 * (the connection was made; it is closed at once) or `"error: CODE"`. Bounded.
 */
export function probePort(port: number, host = "127.0.0.1"): Promise<string> {
  return withTimeout(
    new Promise<string>((resolve) => {
      const socket = netConnect({ host, port });
      socket.once("connect", () => {
        socket.destroy();
        resolve("accepted");
      });
      socket.once("error", (error: Error & { code?: string }) => {
        socket.destroy();
        resolve(
          error.code === "ECONNREFUSED" ? "refused" : `error: ${error.code ?? error.message}`,
        );
      });
    }),
    DEFAULT_TIMEOUT_MS,
    `probe of ${host}:${port}`,
  );
}

/**
 * Resolves when `socket` is closed (by the peer, a reset or an error);
 * rejects after `timeoutMs`.
 */
export function socketClosed(socket: Socket, timeoutMs = DEFAULT_TIMEOUT_MS): Promise<void> {
  if (socket.destroyed) return Promise.resolve();
  return withTimeout(
    new Promise<void>((resolve) => socket.once("close", () => resolve())),
    timeoutMs,
    "socket to close",
  );
}

/** Makes an HTTP GET to 127.0.0.1:`port``path` with `fetch`; resolves status and body bytes. */
export async function httpGet(
  port: number,
  path: string,
  timeoutMs = DEFAULT_TIMEOUT_MS,
): Promise<{ status: number; body: Uint8Array; headers: Headers }> {
  const response = await fetch(`http://127.0.0.1:${port}${path}`, {
    signal: AbortSignal.timeout(timeoutMs),
  });
  const body = new Uint8Array(await response.arrayBuffer());
  return { status: response.status, body, headers: response.headers };
}
