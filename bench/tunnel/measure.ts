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
import { cpuSeconds, type LongProcess, rssMiB, startProcess } from "./procs.ts";
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

/** Runs `scenario` at `work` through a fresh `impl` tunnel. Never throws. */
export async function measureTunnel(
  loadgen: string,
  impl: TunnelImpl,
  scenario: TunnelScenario,
  work: TunnelWorkload,
  timeoutMs: number,
): Promise<TunnelOutcome> {
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
