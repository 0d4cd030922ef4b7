/**
 * The processes of one tunnel measurement: starting a long-running program and waiting until it
 * says it is ready, stopping it for sure, and reading its CPU time and resident memory from
 * `/proc` (Linux only; elsewhere the resource figures are left out).
 *
 * @module
 */

import { type ChildProcess, spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { connect, createServer } from "node:net";
import process from "node:process";
import { parseHostPort } from "../../util/net/address.ts";
import { openUdp } from "../../transport/udp.ts";

/** A started program. */
export interface LongProcess {
  /** Its pid, for {@linkcode cpuSeconds} and {@linkcode rssMiB}. */
  readonly pid: number;
  /** The first match of the readiness pattern in its output. */
  readonly ready: RegExpExecArray;
  /** Its output so far (stdout and stderr, the last few KiB). */
  output(): string;
  /** Ends it: closes stdin, SIGTERM, then SIGKILL after `graceMs`; resolves once it exited. */
  stop(graceMs?: number): Promise<void>;
}

/** Options of {@linkcode startProcess}. */
export interface StartOptions {
  /** Ready once stdout or stderr matches this. */
  ready: RegExp;
  /** Bound on the wait for `ready`. */
  timeoutMs: number;
  /** Environment (default: this process's). */
  env?: Record<string, string>;
  /** Working directory. */
  cwd?: string;
}

// Every process this module started and that still runs: killed if the bench itself exits.
const running = new Set<ChildProcess>();
let exitHook = false;

/** Starts `argv` and resolves once its output matches `options.ready`; kills it on failure. */
export function startProcess(argv: string[], options: StartOptions): Promise<LongProcess> {
  if (!exitHook) {
    exitHook = true;
    process.on("exit", () => running.forEach((child) => child.kill("SIGKILL")));
  }
  return new Promise((resolve, reject) => {
    const child = spawn(argv[0], argv.slice(1), {
      stdio: ["pipe", "pipe", "pipe"],
      env: options.env ?? process.env as Record<string, string>,
      cwd: options.cwd,
    });
    running.add(child);
    let out = "";
    let settled = false;
    let exited = false;
    const exit = new Promise<void>((done) =>
      child.on("close", () => {
        exited = true;
        running.delete(child);
        done();
      })
    );
    const stop = async (graceMs = 3000) => {
      if (exited) return;
      child.stdin!.end();
      child.kill("SIGTERM");
      const timer = setTimeout(() => child.kill("SIGKILL"), graceMs);
      await exit;
      clearTimeout(timer);
    };
    const fail = (why: string) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      void stop(0);
      const tail = out.trim().split("\n").slice(-3).join(" | ");
      reject(new Error(`${argv[0].split("/").pop()} ${why}: ${tail}`.slice(0, 400)));
    };
    const timer = setTimeout(
      () => fail(`not ready after ${options.timeoutMs} ms`),
      options.timeoutMs,
    );
    const onData = (data: string) => {
      out = (out + data).slice(-8000);
      const match = options.ready.exec(out);
      if (!match || settled) return;
      settled = true;
      clearTimeout(timer);
      resolve({ pid: child.pid!, ready: match, output: () => out, stop });
    };
    child.stdin!.on("error", () => {}); // a program that exits before reading its stdin
    child.stdout!.setEncoding("utf8").on("data", onData);
    child.stderr!.setEncoding("utf8").on("data", onData);
    child.on("error", (error) => fail(error.message));
    child.on("close", (code) => fail(`exited (${code}) before it was ready`));
  });
}

/** User + system CPU seconds of process `pid` so far (all its threads), NaN where unknown. */
export function cpuSeconds(pid: number): number {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    // Fields after the command name (which may hold spaces) start at its closing parenthesis;
    // utime and stime are fields 14 and 15, in clock ticks (100 per second on Linux).
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    return (Number(fields[11]) + Number(fields[12])) / 100;
  } catch {
    return NaN;
  }
}

/** Resident set size of process `pid` in MiB (`VmRSS`), NaN where unknown. */
export function rssMiB(pid: number): number {
  try {
    const kb = /^VmRSS:\s+(\d+)\s+kB/m.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
    return kb ? Number(kb[1]) / 1024 : NaN;
  } catch {
    return NaN;
  }
}

/** A TCP port on 127.0.0.1 that was free a moment ago, for programs that cannot take port 0. */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.on("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
}

/**
 * Resolves once `address` accepts a TCP connection (probed every 50 ms, at most `timeoutMs`):
 * for tunnels whose public port opens only when their client has registered.
 */
export async function waitForPort(address: string, timeoutMs: number): Promise<void> {
  const { hostname: host, port } = parseHostPort(address);
  const tries = Math.ceil(timeoutMs / 50);
  for (let i = 0; i < tries; i++) {
    const ok = await new Promise<boolean>((resolve) => {
      const socket = connect({ host, port });
      socket.on("connect", () => {
        socket.destroy();
        resolve(true);
      });
      socket.on("error", () => resolve(false));
    });
    if (ok) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`${address} not accepting connections after ${timeoutMs} ms`);
}

/**
 * Resolves once a datagram sent to `address` (a UDP tunnel's public side, in front of an echo)
 * comes back; tries every 100 ms, rejects after `timeoutMs`.
 */
export async function waitForUdpEcho(address: string, timeoutMs: number): Promise<void> {
  const { hostname, port } = parseHostPort(address);
  let back = false;
  const socket = await openUdp({ onMessage: () => (back = true) });
  try {
    const deadline = Date.now() + timeoutMs;
    // The probe is 8 zero bytes: sequence 0 and nothing else, which no scenario's check trips on.
    while (!back && Date.now() < deadline) {
      socket.send(new Uint8Array(8), hostname, port);
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  } finally {
    socket.close();
  }
  if (!back) throw new Error(`no echo through ${address} within ${timeoutMs} ms`);
}
