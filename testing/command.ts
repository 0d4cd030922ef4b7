/**
 * Test support: running a given executable (not a file under the test's own runtime, as
 * `process.ts` does): the pinned Deno for the image's command, the compiled binary for the
 * single-binary test. Every wait is bounded; a started process is SIGKILLed by `stop` if SIGTERM
 * is not enough.
 *
 * @module
 */

import { type ChildProcess, spawn } from "node:child_process";
import process from "node:process";
import { ROOT } from "./process.ts";
import { waitFor, withTimeout } from "./wait.ts";

/** How to run it. */
export interface RunOptions {
  /** The whole environment (default: this process's, less `TUNNELMUX_*`). */
  env?: Record<string, string>;
  /** Working directory (default the repository root). */
  cwd?: string;
  /** Bound on the run (default 60 s). */
  timeoutMs?: number;
  /** Written to its stdin, which then ends (default: no stdin). */
  input?: string;
}

/** A started process and its output so far. */
export interface Started {
  /** The child. */
  readonly child: ChildProcess;
  /** Stdout so far. */
  stdout(): string;
  /** Stderr so far. */
  stderr(): string;
  /** Resolves with the exit code (null if ended by a signal). */
  readonly exited: Promise<number | null>;
  /** Resolves with the first match of `pattern` on stdout; bounded. */
  waitForStdout(pattern: RegExp, timeoutMs?: number): Promise<RegExpExecArray>;
  /** SIGTERM; resolves with the exit code, or SIGKILLs and rejects after `graceMs`. */
  stop(graceMs?: number): Promise<number | null>;
  /** Sends a signal (nothing once it has exited). */
  signal(name: NodeJS.Signals): void;
}

/** This process's environment without `TUNNELMUX_*` (a developer's own settings stay out). */
export function baseEnv(): Record<string, string> {
  const env: Record<string, string> = { NO_COLOR: "1" };
  for (const [key, value] of Object.entries(process.env)) {
    if (value !== undefined && !key.startsWith("TUNNELMUX_")) env[key] = value;
  }
  return env;
}

/** Starts `command args`; stop it with {@linkcode Started.stop}. */
export function startCommand(command: string, args: string[], options: RunOptions = {}): Started {
  const child = spawn(command, args, {
    cwd: options.cwd ?? ROOT,
    env: options.env ?? baseEnv(),
    stdio: [options.input === undefined ? "ignore" : "pipe", "pipe", "pipe"],
  });
  if (options.input !== undefined) child.stdin!.end(options.input);
  let stdout = "";
  let stderr = "";
  child.stdout!.setEncoding("utf8");
  child.stderr!.setEncoding("utf8");
  child.stdout!.on("data", (chunk: string) => stdout += chunk);
  child.stderr!.on("data", (chunk: string) => stderr += chunk);
  const exited = new Promise<number | null>((resolve, reject) => {
    child.on("error", reject);
    child.on("close", (code) => resolve(code));
  });
  exited.catch(() => {});
  return {
    child,
    stdout: () => stdout,
    stderr: () => stderr,
    exited,
    waitForStdout: (pattern, timeoutMs = 30_000) =>
      waitFor(() => pattern.exec(stdout), {
        timeoutMs,
        message: `${pattern} on stdout of ${command} (stderr: ${stderr.slice(-800)})`,
      }),
    signal: (name) => signal(child, name),
    stop: async (graceMs = 20_000) => {
      if (child.exitCode !== null || child.signalCode !== null) return child.exitCode;
      signal(child, "SIGTERM");
      try {
        return await withTimeout(exited, graceMs, `${command} to exit after SIGTERM`);
      } catch (error) {
        signal(child, "SIGKILL");
        throw error;
      }
    },
  };
}

/**
 * Signals through `process.kill(pid)`, as `process.ts` does: Deno's `ChildProcess.kill()`
 * makes the exit report the signal it sent even when the program handled it and exited 0.
 */
function signal(child: ChildProcess, name: NodeJS.Signals): void {
  if (child.pid === undefined || child.exitCode !== null || child.signalCode !== null) return;
  try {
    process.kill(child.pid, name);
  } catch { /* already gone */ }
}

/** Runs `command args` to completion; bounded. */
export async function runCommand(
  command: string,
  args: string[],
  options: RunOptions = {},
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const started = startCommand(command, args, options);
  try {
    const code = await withTimeout(
      started.exited,
      options.timeoutMs ?? 60_000,
      `${command} ${args.join(" ")} to finish`,
    );
    return { code, stdout: started.stdout(), stderr: started.stderr() };
  } catch (error) {
    signal(started.child, "SIGKILL");
    throw error;
  }
}
