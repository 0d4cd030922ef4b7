/**
 * One tunnel measurement, all in fresh processes: the backend, the tunnel's server and client
 * sides, and the load generator. The load warms up, says "ready" and waits; the tunnel's CPU
 * counters are read then and again when the load reports, so CPU covers exactly the timed part.
 *
 * @module
 */

import { spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Tunnel, TunnelImpl } from "./impls.ts";
import { cpuSeconds, freePort, type LongProcess, rssMiB, startProcess } from "./procs.ts";
import { parseHostPort } from "../../util/net/address.ts";
import { loadArgs, type TunnelScenario, type TunnelWorkload } from "./scenarios.ts";

/** What one tunnel measurement produced. */
export type TunnelOutcome =
  | {
    ok: true;
    /** The headline value in the scenario's unit. */
    value: number;
    /** p99 (T3, T4, U4). */
    p99?: number;
    /** Daemon + client CPU seconds per the scenario's CPU unit (T1, T2; not for direct). */
    cpu?: number;
    /** The server side's RSS in MiB after the timed part (T2; not for direct). */
    rssServerMiB?: number;
    /** The client side's RSS in MiB after the timed part. */
    rssClientMiB?: number;
  }
  | { ok: false; error: string };

/**
 * Runs the load generator with the ready/go handshake: `onReady` runs between the two (when it
 * returns a promise, "go" waits for it; if it rejects, the load is killed and the run rejects),
 * and the promise resolves as soon as the result line arrives (before the load's sockets close).
 */
export function runLoad(
  argv: string[],
  timeoutMs: number,
  onReady: () => void | Promise<void>,
): Promise<Record<string, unknown>> {
  return new Promise((resolve, reject) => {
    const child = spawn(argv[0], argv.slice(1), { stdio: ["pipe", "pipe", "pipe"] });
    let out = "";
    let err = "";
    let result: Record<string, unknown> | undefined;
    const timer = setTimeout(() => child.kill("SIGKILL"), timeoutMs);
    child.stdin!.on("error", () => {});
    child.stderr!.setEncoding("utf8").on("data", (d: string) => (err = (err + d).slice(-2000)));
    child.stdout!.setEncoding("utf8").on("data", (d: string) => {
      out += d;
      let nl: number;
      while ((nl = out.indexOf("\n")) >= 0) {
        const line = out.slice(0, nl).trim();
        out = out.slice(nl + 1);
        try {
          result = JSON.parse(line);
        } catch {
          continue;
        }
        if (result!.phase === "ready") {
          const go = () => void child.stdin!.write("go\n");
          const waited = onReady();
          if (waited instanceof Promise) {
            waited.then(go, (error) => {
              reject(error);
              child.kill("SIGKILL");
            });
          } else go();
        } else if (result!.ok === true) {
          resolve(result!);
        }
      }
    });
    child.on("error", (e) => reject(e));
    child.on("close", (code, signal) => {
      clearTimeout(timer);
      if (result?.ok === true) return;
      if (signal === "SIGKILL") return reject(new Error(`load: timeout after ${timeoutMs} ms`));
      const why = typeof result?.error === "string" ? result.error : `exit ${code}: ${err.trim()}`;
      reject(new Error(why.slice(0, 300)));
    });
  });
}

/**
 * Starts the load generator's backend and `impl`'s tunnel to it, files in `dir`; every process
 * started goes into `started` (the backend first), for the caller to stop.
 */
export async function startWithBackend(
  loadgen: string,
  impl: TunnelImpl,
  dir: string,
  started: LongProcess[],
): Promise<Tunnel> {
  const udp = impl.udp ? ["-udp"] : [];
  const backend = await startProcess([loadgen, "serve", ...udp, "-listen", "127.0.0.1:0"], {
    ready: /listening on (\S+)/,
    timeoutMs: 10_000,
  });
  started.push(backend);
  return await impl.start(backend.ready[1], dir);
}

/** Runs `argv` to its end (killed after `timeoutMs`); resolves with its output, whatever its exit. */
function runToEnd(argv: string[], timeoutMs: number): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn(argv[0], argv.slice(1), { stdio: ["ignore", "pipe", "pipe"] });
    let out = "";
    const timer = setTimeout(() => child.kill("SIGKILL"), timeoutMs);
    child.stdout!.setEncoding("utf8").on("data", (d: string) => (out += d));
    child.stderr!.setEncoding("utf8").on("data", (d: string) => (out += d));
    child.on("error", (e) => reject(e));
    child.on("close", (_code, signal) => {
      clearTimeout(timer);
      if (signal === "SIGKILL") reject(new Error(`${argv[0]}: timeout after ${timeoutMs} ms`));
      else resolve(out);
    });
  });
}

/**
 * The receiver's summary line of `iperf3 -u`'s text output (`… 0.066 ms  43/4165 (1%)  receiver`):
 * jitter in ms, datagrams lost and sent. Throws with iperf3's error when there is none. (Its JSON
 * output, `-J`, lost the control connection at the results exchange through every tunnel tried.)
 */
export function parseIperf3(
  out: string,
): { jitter_ms: number; lost_percent: number; packets: number } {
  const line = /([\d.]+) ms\s+(\d+)\/(\d+) \([^)]*\)\s+receiver/.exec(out);
  if (!line) {
    const error = /iperf3: error - (.*)/.exec(out)?.[1];
    throw new Error(`iperf3: ${error ?? `no receiver line in ${JSON.stringify(out.slice(-200))}`}`);
  }
  const [lost, packets] = [Number(line[2]), Number(line[3])];
  return {
    jitter_ms: Number(line[1]),
    lost_percent: packets > 0 ? (100 * lost) / packets : 100,
    packets,
  };
}

/**
 * An `iperf3 -u` scenario through a fresh `impl` tunnel: `iperf3 -s` is the backend, its client
 * goes through the tunnel (TCP control and UDP data on the tunnel's one public port), and the
 * headline is the server's reading (`field`) as the client prints it. CPU and RSS as for the
 * load generator's scenarios, over the whole iperf3 run.
 */
async function measureIperf3(
  impl: TunnelImpl,
  scenario: TunnelScenario,
  timeoutMs: number,
): Promise<TunnelOutcome> {
  const { bitrate, seconds, length } = scenario.iperf3!;
  const dir = mkdtempSync(join(tmpdir(), "tunnelmux-bench-"));
  const started: LongProcess[] = [];
  try {
    const port = await freePort();
    started.push(
      await startProcess([
        "iperf3",
        "-s",
        "-1",
        "--forceflush",
        "-B",
        "127.0.0.1",
        "-p",
        String(port),
      ], {
        ready: /Server listening on/,
        timeoutMs: 10_000,
      }),
    );
    const tunnel = await impl.start(`127.0.0.1:${port}`, dir, { tcpToo: true });
    const sides = [tunnel.server, tunnel.client].filter((p): p is LongProcess => !!p);
    started.push(...sides);
    const { hostname, port: publicPort } = parseHostPort(tunnel.address);
    const cpuBefore = sides.reduce((sum, p) => sum + cpuSeconds(p.pid), 0);
    const iperf = () =>
      runToEnd([
        "iperf3",
        "-c",
        hostname,
        "-p",
        String(publicPort),
        "-u",
        "-b",
        bitrate,
        "-l",
        String(length),
        "-t",
        String(seconds),
      ], Math.min(timeoutMs, (seconds + 30) * 1000));
    // A tunnel may say it is up a moment before its TCP side carries: a few tries, 0.5 s apart.
    let out = await iperf();
    for (
      let retry = 0;
      retry < 4 && /error - .*(busy|control socket|unable to connect)/.test(out);
      retry++
    ) {
      await new Promise((resolve) => setTimeout(resolve, 500));
      out = await iperf();
    }
    const cpu = sides.reduce((sum, p) => sum + cpuSeconds(p.pid), 0) - cpuBefore;
    const rss = sides.map((p) => rssMiB(p.pid));
    const reading = parseIperf3(out);
    const value = reading[scenario.field as keyof typeof reading];
    const packets = reading.packets;
    const measured = sides.length > 0;
    return {
      ok: true,
      value,
      ...(measured && scenario.cpu && packets > 0 ? { cpu: cpu / (packets / 1e5) } : {}),
      ...(measured && scenario.rss ? { rssServerMiB: rss[0], rssClientMiB: rss[1] } : {}),
    };
  } catch (error) {
    return { ok: false, error: (error as Error).message.slice(0, 300) };
  } finally {
    await Promise.all(started.reverse().map((p) => p.stop(1000)));
    rmSync(dir, { recursive: true, force: true });
  }
}

/** Runs `scenario` at `work` through a fresh `impl` tunnel. Never throws. */
export async function measureTunnel(
  loadgen: string,
  impl: TunnelImpl,
  scenario: TunnelScenario,
  work: TunnelWorkload,
  timeoutMs: number,
): Promise<TunnelOutcome> {
  if (scenario.iperf3) return measureIperf3(impl, scenario, timeoutMs);
  const dir = mkdtempSync(join(tmpdir(), "tunnelmux-bench-"));
  const started: LongProcess[] = [];
  try {
    const tunnel = await startWithBackend(loadgen, impl, dir, started);
    const sides = [tunnel.server, tunnel.client].filter((p): p is LongProcess => !!p);
    const others = tunnel.others ?? [];
    started.push(...others, ...sides);
    const cpuNow = () => [...sides, ...others].reduce((sum, p) => sum + cpuSeconds(p.pid), 0);
    let cpuBefore = NaN;
    let cpuAfter = NaN;
    let rss: number[] = [];
    const line = await runLoad(
      [
        loadgen,
        "run",
        "-target",
        tunnel.address,
        ...(tunnel.host === undefined ? [] : ["-http", tunnel.host]),
        ...loadArgs(scenario, work),
        "-handshake",
        "-timeout",
        `${Math.round(timeoutMs / 1000)}s`,
      ],
      timeoutMs + 5_000,
      () => {
        cpuBefore = cpuNow();
      },
    ).then((result) => {
      cpuAfter = cpuNow();
      rss = sides.map((p) => rssMiB(p.pid));
      return result;
    });
    const latency = line.p50_us !== undefined;
    const value = Number(
      scenario.field
        ? line[scenario.field]
        : latency
        ? line.p50_us
        : line.mb_per_s ?? line.conn_per_s,
    );
    const measured = sides.length > 0;
    return {
      ok: true,
      value,
      ...(latency ? { p99: Number(line.p99_us) } : {}),
      ...(measured && scenario.cpu ? { cpu: (cpuAfter - cpuBefore) / scenario.cpu.per(work) } : {}),
      ...(measured && scenario.rss ? { rssServerMiB: rss[0], rssClientMiB: rss[1] } : {}),
    };
  } catch (error) {
    return { ok: false, error: (error as Error).message.slice(0, 300) };
  } finally {
    await Promise.all(started.reverse().map((p) => p.stop(1000)));
    rmSync(dir, { recursive: true, force: true });
  }
}
