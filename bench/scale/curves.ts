/**
 * The scale bench's three curves, each a list of steps (N) measured on one growing setup:
 *
 * - **sessions**: N idle client sessions on one daemon (keepalive pings every second on both
 *   sides): the daemon's RSS, its RSS per session, its CPU per second per 1000 sessions (the cost
 *   of keepalives) and the time to accept each step's new sessions;
 * - **tunnels**: N reverse tunnels on one daemon from one client: RSS per tunnel on both sides and
 *   (in a second pass, so visitors' garbage does not count as tunnels) a visitor's latency through
 *   the newest tunnel (new connection's first byte, T4; round trip on
 *   an open one, T3) with the same Go load generator as the tunnel suite;
 * - **streams**: N concurrent yamux streams on one session between two processes: µs per open at
 *   each level (stays flat when opening is O(1)), RSS per stream of the serving side, µs per
 *   close of them all.
 *
 * rathole and frp run the sessions and tunnels curves on the same load where they can, restarted
 * per step. rathole has one control channel per service, so its "session" is a service (with its
 * public listener) and its tunnels are services of one client. frp's session is one frpc process
 * (so its sessions curve stops at 100), its tunnels are proxies of one frpc over one multiplexed
 * connection. Neither has a streams curve.
 *
 * @module
 */

import { execFile } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { daemonConfig, newToken, ROOT } from "../../testing/mod.ts";
import { type JsRuntime, RUNTIME_BIN } from "../impls.ts";
import { createServer } from "node:net";
import { cpuSeconds, rssMiB } from "../tunnel/procs.ts";
import { Child } from "./child.ts";

/** One measured step of a curve. */
export interface CurvePoint {
  /** The step's count (sessions, tunnels or streams). */
  n: number;
  /** Measures by name (see {@linkcode MEASURES}); absent where not measured. */
  values: Record<string, number>;
}

/** One implementation's run of one curve. */
export interface CurveRun {
  /** `sessions`, `tunnels` or `streams`. */
  curve: CurveId;
  /** `tunnelmux-deno`, `tunnelmux-bun`, `rathole`. */
  impl: string;
  /** Steps in increasing N; a step that failed ends the run. */
  points: CurvePoint[];
  /** Why the run stopped early, if it did. */
  error?: string;
}

/** The three curves. */
export type CurveId = "sessions" | "tunnels" | "streams";

/** What each measure means, for tables and plots. */
export const MEASURES: Record<string, { title: string; unit: string }> = {
  rssMiB: { title: "daemon RSS", unit: "MiB" },
  rssPerKiB: { title: "daemon RSS per unit", unit: "KiB" },
  clientRssMiB: { title: "client RSS", unit: "MiB" },
  keepaliveCpuMs: { title: "daemon CPU per second per 1000 sessions (pings 1/s)", unit: "ms" },
  acceptUs: { title: "time to accept, per new session", unit: "µs" },
  exposeUs: { title: "time to open, per new tunnel", unit: "µs" },
  t4P50Us: { title: "visitor's first byte on a new connection (T4 p50)", unit: "µs" },
  t3P50Us: { title: "round trip on an open connection (T3 p50)", unit: "µs" },
  openUs: { title: "time per stream open at this level", unit: "µs" },
  closeUs: { title: "time per stream close (all at once)", unit: "µs" },
  serverRssMiB: { title: "serving side RSS", unit: "MiB" },
};

/** How long to let a step settle before reading memory. */
const SETTLE_MS = 1500;
/** The window in which idle CPU is read. */
const CPU_WINDOW_MS = 5000;
/** Bound on any one step. */
const STEP_MS = 300_000;

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

function runtimeArgv(runtime: JsRuntime, file: string): string[] {
  const path = join(ROOT, file);
  return runtime === "deno" ? [RUNTIME_BIN.deno, "run", "-A", path] : [RUNTIME_BIN.bun, path];
}

/** CPU milliseconds per second of `pid` over the next `ms`. */
async function cpuRate(pid: number, ms: number): Promise<number> {
  const before = cpuSeconds(pid);
  const started = performance.now();
  await sleep(ms);
  return (cpuSeconds(pid) - before) * 1000 / ((performance.now() - started) / 1000);
}

/** Runs the Go load generator once; its JSON result. */
function loadgen(bin: string, args: string[]): Promise<Record<string, number>> {
  return new Promise((resolve, reject) => {
    execFile(bin, ["run", ...args, "-timeout", "60s"], { timeout: 90_000 }, (error, stdout) => {
      if (error) return reject(new Error(`loadgen ${args.join(" ")}: ${error.message}`));
      const line = stdout.trim().split("\n").pop()!;
      resolve(JSON.parse(line));
    });
  });
}

/** T4 and T3 medians through `address`. */
async function visitorLatency(bin: string, address: string): Promise<Record<string, number>> {
  const t4 = await loadgen(bin, ["-target", address, "-scenario", "T4", "-count", "200"]);
  const t3 = await loadgen(bin, ["-target", address, "-scenario", "T3", "-count", "1000"]);
  return { t4P50Us: t4.p50_us, t3P50Us: t3.p50_us };
}

/** Where the curves' programs are, and what runs. */
export interface CurveContext {
  /** The load generator (also the backend). */
  loadgen: string;
  /** The backend's address (`loadgen serve`). */
  backend: string;
  /** Progress lines. */
  log(line: string): void;
  /** Wait before reading memory after a step (default 1500 ms; tests make it short). */
  settleMs?: number;
  /** Window of the idle CPU reading (default 5000 ms). */
  cpuWindowMs?: number;
}

/** A tunnelmux daemon on TCP with room for the curves' counts; keepalive pings every second. */
async function startDaemon(runtime: JsRuntime, dir: string, token: string): Promise<{
  daemon: Child;
  url: string;
}> {
  const config = daemonConfig([{ name: "bench", token }], {
    dataDir: join(dir, "data"),
    log: { level: "warn", format: "json" },
    limits: {
      sessions: 20_000,
      tunnelsPerClient: 5_000,
      pendingHandshakes: 20_000,
      pendingHandshakesPerSource: 20_000,
      keepAliveIntervalMs: 1000,
    },
  });
  writeFileSync(join(dir, "daemon.json"), JSON.stringify(config));
  const daemon = new Child([
    ...runtimeArgv(runtime, "daemon/main.ts"),
    ...["--config", join(dir, "daemon.json"), "--listen-tcp", "127.0.0.1:0"],
    ...["--listen-ws", "off", "--listen-admin", "off", "--log-level", "info"],
  ]);
  const ready = await daemon.waitFor(/tunnels over TCP on (\S+)$/, 30_000);
  return { daemon, url: `tcp://${ready[1]}` };
}

/** The tunnelmux side of the sessions and tunnels curves. */
async function tunnelmuxCurve(
  curve: "sessions" | "tunnels",
  runtime: JsRuntime,
  steps: readonly number[],
  context: CurveContext,
  latency = false,
): Promise<CurveRun> {
  const run: CurveRun = { curve, impl: `tunnelmux-${runtime}`, points: [] };
  const dir = mkdtempSync(join(tmpdir(), "tunnelmux-scale-"));
  const token = newToken("scale");
  const children: Child[] = [];
  try {
    const { daemon, url } = await startDaemon(runtime, dir, token);
    children.push(daemon);
    await sleep(context.settleMs ?? SETTLE_MS);
    const idle = rssMiB(daemon.pid);
    const holder = new Child([
      ...runtimeArgv(runtime, "bench/scale/holder.ts"),
      ...["--server", url, "--token", token, "--keepalive-ms", "1000"],
    ]);
    children.push(holder);
    await holder.waitFor(/^holder ready$/, 30_000);
    let previous = 0;
    for (const n of steps) {
      const values: Record<string, number> = {};
      if (curve === "sessions") {
        const { ms } = await holder.request({ op: "sessions", count: n }, STEP_MS);
        values.acceptUs = (ms as number) * 1000 / (n - previous);
        await sleep(context.settleMs ?? SETTLE_MS);
        values.rssMiB = rssMiB(daemon.pid);
        values.rssPerKiB = (values.rssMiB - idle) * 1024 / n;
        values.keepaliveCpuMs = await cpuRate(daemon.pid, context.cpuWindowMs ?? CPU_WINDOW_MS) /
          (n / 1000);
      } else {
        const { ms, ports } = await holder.request(
          { op: "tunnels", count: n, local: context.backend },
          STEP_MS,
        );
        if (latency) {
          const last = (ports as number[]).at(-1)!;
          Object.assign(values, await visitorLatency(context.loadgen, `127.0.0.1:${last}`));
        } else {
          values.exposeUs = (ms as number) * 1000 / (n - previous);
          await sleep(context.settleMs ?? SETTLE_MS);
          values.rssMiB = rssMiB(daemon.pid);
          values.rssPerKiB = (values.rssMiB - idle) * 1024 / n;
          values.clientRssMiB = rssMiB(holder.pid);
        }
      }
      run.points.push({ n, values });
      context.log(`${curve} ${run.impl} ${n}: ${format(values)}`);
      previous = n;
    }
  } catch (error) {
    run.error = (error as Error).message;
    context.log(`${curve} ${run.impl}: ${run.error}`);
  } finally {
    await Promise.all(children.reverse().map((child) => child.stop()));
    rmSync(dir, { recursive: true, force: true });
  }
  return run;
}

/** Below Linux's default ephemeral range (32768–60999), so outgoing connections cannot take them. */
const FIXED_PORTS_FROM = 20_000;

/** Whether `port` on 127.0.0.1 can be bound now. */
function canBind(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = createServer();
    server.once("error", () => resolve(false));
    server.listen(port, "127.0.0.1", () => server.close(() => resolve(true)));
  });
}

/**
 * `count` ports for rathole's control channel and services, free now and outside the ephemeral
 * range: with thousands of control channels, ports picked by the kernel (port 0) would be taken by
 * those channels' own outgoing connections before the server binds them.
 */
async function ports(count: number): Promise<number[]> {
  const out: number[] = [];
  for (let port = FIXED_PORTS_FROM; out.length < count && port < 32768; port++) {
    if (await canBind(port)) out.push(port);
  }
  if (out.length < count) throw new Error(`only ${out.length} free ports below 32768`);
  return out;
}

/**
 * rathole with `n` services of one client, started fresh; resolves once all are up, with the
 * time the client took and the server's RSS before the client came (its idle size).
 */
async function startRathole(
  bin: string,
  n: number,
  backend: string,
  dir: string,
  heartbeat: boolean,
  settleMs: number,
): Promise<{ server: Child; client: Child; ports: number[]; ms: number; idleMiB: number }> {
  const [control, ...publicPorts] = await ports(n + 1);
  const token = newToken("scale");
  let server = `[server]\nbind_addr = "127.0.0.1:${control}"\n` +
    (heartbeat ? "heartbeat_interval = 1\n" : "");
  let client = `[client]\nremote_addr = "127.0.0.1:${control}"\n` +
    (heartbeat ? "heartbeat_timeout = 5\n" : "");
  for (let i = 0; i < n; i++) {
    server += `[server.services.s${i}]\ntoken = "${token}"\n` +
      `bind_addr = "127.0.0.1:${publicPorts[i]}"\n`;
    client += `[client.services.s${i}]\ntoken = "${token}"\nlocal_addr = "${backend}"\n`;
  }
  writeFileSync(join(dir, "server.toml"), server);
  writeFileSync(join(dir, "client.toml"), client);
  const serverChild = new Child([bin, "--server", join(dir, "server.toml")]);
  await serverChild.waitFor(/Listening at/, 30_000);
  await sleep(settleMs);
  const idleMiB = rssMiB(serverChild.pid);
  const started = performance.now();
  const clientChild = new Child([bin, "--client", join(dir, "client.toml")]);
  try {
    await clientChild.waitFor(/Control channel established/, STEP_MS, n);
  } catch (error) {
    await Promise.all([clientChild.stop(), serverChild.stop()]);
    throw error;
  }
  return {
    server: serverChild,
    client: clientChild,
    ports: publicPorts,
    ms: performance.now() - started,
    idleMiB,
  };
}

/** rathole's side of the sessions and tunnels curves (one fresh pair per step). */
async function ratholeCurve(
  curve: "sessions" | "tunnels",
  bin: string,
  steps: readonly number[],
  context: CurveContext,
): Promise<CurveRun> {
  const run: CurveRun = { curve, impl: "rathole", points: [] };
  const dir = mkdtempSync(join(tmpdir(), "rathole-scale-"));
  try {
    for (const n of steps) {
      const started = await startRathole(
        bin,
        n,
        context.backend,
        dir,
        curve === "sessions",
        context.settleMs ?? SETTLE_MS,
      );
      try {
        const values: Record<string, number> = {};
        if (curve === "sessions") values.acceptUs = started.ms * 1000 / n;
        else values.exposeUs = started.ms * 1000 / n;
        await sleep(context.settleMs ?? SETTLE_MS);
        values.rssMiB = rssMiB(started.server.pid);
        values.rssPerKiB = (values.rssMiB - started.idleMiB) * 1024 / n;
        if (curve === "sessions") {
          values.keepaliveCpuMs =
            await cpuRate(started.server.pid, context.cpuWindowMs ?? CPU_WINDOW_MS) / (n / 1000);
        } else {
          values.clientRssMiB = rssMiB(started.client.pid);
          const last = started.ports.at(-1)!;
          Object.assign(values, await visitorLatency(context.loadgen, `127.0.0.1:${last}`));
        }
        run.points.push({ n, values });
        context.log(`${curve} rathole ${n}: ${format(values)}`);
      } finally {
        await Promise.all([started.client.stop(), started.server.stop()]);
      }
    }
  } catch (error) {
    run.error = (error as Error).message;
    context.log(`${curve} rathole: ${run.error}`);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  return run;
}

/** frps on a fixed control port, started and ready; with keepalives every second for `sessions`. */
async function startFrps(bin: string, dir: string, control: number, token: string): Promise<Child> {
  writeFileSync(
    join(dir, "frps.toml"),
    `bindAddr = "127.0.0.1"\nbindPort = ${control}\nauth.token = "${token}"\n` +
      `transport.tcpMuxKeepaliveInterval = 1\nlog.level = "info"\n`,
  );
  const server = new Child([bin, "-c", join(dir, "frps.toml")]);
  await server.waitFor(/frps started successfully/, 30_000);
  return server;
}

/** One frpc with `proxies` TCP proxies to `backend` on the given remote ports. */
function startFrpc(
  bin: string,
  file: string,
  control: number,
  token: string,
  backend: string,
  remotePorts: readonly number[],
): Child {
  const [localIP, localPort] = [
    backend.slice(0, backend.lastIndexOf(":")),
    backend.split(":").pop(),
  ];
  let config = `serverAddr = "127.0.0.1"\nserverPort = ${control}\nauth.token = "${token}"\n` +
    `transport.tcpMuxKeepaliveInterval = 1\nlog.level = "info"\n`;
  remotePorts.forEach((port, i) => {
    config += `\n[[proxies]]\nname = "p${i}"\ntype = "tcp"\nlocalIP = "${localIP}"\n` +
      `localPort = ${localPort}\nremotePort = ${port}\n`;
  });
  writeFileSync(file, config);
  return new Child([bin, "-c", file]);
}

/**
 * frp's side of the sessions and tunnels curves, a fresh frps per step: for sessions, N frpc
 * processes with no proxy (one frpc holds one session); for tunnels, one frpc with N proxies
 * (all over its one multiplexed connection, as tunnelmux's tunnels share one session).
 */
async function frpCurve(
  curve: "sessions" | "tunnels",
  bins: { frps: string; frpc: string },
  steps: readonly number[],
  context: CurveContext,
): Promise<CurveRun> {
  const run: CurveRun = { curve, impl: "frp", points: [] };
  const dir = mkdtempSync(join(tmpdir(), "frp-scale-"));
  try {
    for (const n of steps) {
      const [control, ...publicPorts] = await ports(curve === "tunnels" ? n + 1 : 1);
      const token = newToken("scale");
      const server = await startFrps(bins.frps, dir, control, token);
      const clients: Child[] = [];
      try {
        await sleep(context.settleMs ?? SETTLE_MS);
        const idle = rssMiB(server.pid);
        const started = performance.now();
        if (curve === "sessions") {
          for (let i = 0; i < n; i++) {
            clients.push(
              startFrpc(bins.frpc, join(dir, `c${i}.toml`), control, token, context.backend, []),
            );
          }
          await Promise.all(clients.map((c) => c.waitFor(/login to server success/, STEP_MS)));
        } else {
          const client = startFrpc(
            bins.frpc,
            join(dir, "frpc.toml"),
            control,
            token,
            context.backend,
            publicPorts,
          );
          clients.push(client);
          await client.waitFor(/start proxy success/, STEP_MS, n);
        }
        const ms = performance.now() - started;
        const values: Record<string, number> = {};
        if (curve === "sessions") values.acceptUs = ms * 1000 / n;
        else values.exposeUs = ms * 1000 / n;
        await sleep(context.settleMs ?? SETTLE_MS);
        values.rssMiB = rssMiB(server.pid);
        values.rssPerKiB = (values.rssMiB - idle) * 1024 / n;
        if (curve === "sessions") {
          values.keepaliveCpuMs = await cpuRate(server.pid, context.cpuWindowMs ?? CPU_WINDOW_MS) /
            (n / 1000);
        } else {
          values.clientRssMiB = rssMiB(clients[0].pid);
          const last = `127.0.0.1:${publicPorts.at(-1)}`;
          Object.assign(values, await visitorLatency(context.loadgen, last));
        }
        run.points.push({ n, values });
        context.log(`${curve} frp ${n}: ${format(values)}`);
      } finally {
        await Promise.all([...clients.map((c) => c.stop()), server.stop()]);
      }
    }
  } catch (error) {
    run.error = (error as Error).message;
    context.log(`${curve} frp: ${run.error}`);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  return run;
}

/** The streams curve for one runtime. */
async function streamsCurve(
  runtime: JsRuntime,
  steps: readonly number[],
  context: CurveContext,
): Promise<CurveRun> {
  const run: CurveRun = { curve: "streams", impl: `tunnelmux-${runtime}`, points: [] };
  const children: Child[] = [];
  try {
    const server = new Child([...runtimeArgv(runtime, "bench/scale/streams_worker.ts"), "--serve"]);
    children.push(server);
    const ready = await server.waitFor(/listening on (\S+)/, 30_000);
    const client = new Child([
      ...runtimeArgv(runtime, "bench/scale/streams_worker.ts"),
      ...["--connect", ready[1]],
    ]);
    children.push(client);
    await client.waitFor(/^connected$/, 30_000);
    await sleep(context.settleMs ?? SETTLE_MS);
    const idle = rssMiB(server.pid);
    let previous = 0;
    for (const n of steps) {
      const { ms } = await client.request({ op: "open", count: n }, STEP_MS);
      const values: Record<string, number> = { openUs: (ms as number) * 1000 / (n - previous) };
      await sleep(context.settleMs ?? SETTLE_MS);
      values.serverRssMiB = rssMiB(server.pid);
      values.rssPerKiB = (values.serverRssMiB - idle) * 1024 / n;
      run.points.push({ n, values });
      context.log(`streams ${run.impl} ${n}: ${format(values)}`);
      previous = n;
    }
    const { ms } = await client.request({ op: "close" }, STEP_MS);
    run.points.at(-1)!.values.closeUs = (ms as number) * 1000 / previous;
    context.log(`streams ${run.impl}: close ${(ms as number).toFixed(0)} ms`);
  } catch (error) {
    run.error = (error as Error).message;
    context.log(`streams ${run.impl}: ${run.error}`);
  } finally {
    await Promise.all(children.reverse().map((child) => child.stop()));
  }
  return run;
}

function format(values: Record<string, number>): string {
  return Object.entries(values).map(([k, v]) => `${k} ${v.toFixed(1)}`).join(", ");
}

/** What {@linkcode runCurve} runs. */
export interface CurveRequest {
  /** Which curve. */
  curve: CurveId;
  /** `deno`, `bun`, `rathole` (with `ratholeBin`) or `frp` (with `frpBins`). */
  impl: JsRuntime | "rathole" | "frp";
  /** The counts, increasing. */
  steps: readonly number[];
  /** rathole's binary, for `impl: "rathole"`. */
  ratholeBin?: string;
  /** frps and frpc, for `impl: "frp"`. */
  frpBins?: { frps: string; frpc: string };
}

/** Runs one implementation's curve. */
export function runCurve(request: CurveRequest, context: CurveContext): Promise<CurveRun> {
  if (request.impl === "frp") {
    if (request.curve === "streams") throw new Error("frp has no streams curve here");
    return frpCurve(request.curve, request.frpBins!, request.steps, context);
  }
  if (request.impl === "rathole") {
    if (request.curve === "streams") throw new Error("rathole has no multiplexed streams");
    return ratholeCurve(request.curve, request.ratholeBin!, request.steps, context);
  }
  if (request.curve === "streams") return streamsCurve(request.impl, request.steps, context);
  if (request.curve === "sessions") {
    return tunnelmuxCurve("sessions", request.impl, request.steps, context);
  }
  return tunnelsTwice(request.impl, request.steps, context);
}

/**
 * The tunnels curve in two passes on fresh daemons: memory first, then latency, so the garbage
 * of one step's visitors does not count as the next step's tunnels.
 */
async function tunnelsTwice(
  runtime: JsRuntime,
  steps: readonly number[],
  context: CurveContext,
): Promise<CurveRun> {
  const memory = await tunnelmuxCurve("tunnels", runtime, steps, context);
  const latency = await tunnelmuxCurve("tunnels", runtime, steps, context, true);
  for (const point of memory.points) {
    Object.assign(point.values, latency.points.find((p) => p.n === point.n)?.values);
  }
  return { ...memory, error: memory.error ?? latency.error };
}
