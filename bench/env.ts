/**
 * The machine and toolchain a benchmark ran on, recorded with every result.
 *
 * @module
 */

import { execFileSync } from "node:child_process";
import os from "node:os";
import { RUNTIME_BIN } from "./impls.ts";

/** Where and with what the numbers were taken. */
export interface BenchEnv {
  /** ISO date and time of the start. */
  date: string;
  /** Logical CPUs. */
  cpus: number;
  /** CPU model string. */
  cpuModel: string;
  /** `os.platform()`-`os.arch()` and kernel release. */
  os: string;
  /** `deno --version` first line. */
  deno: string;
  /** `bun --version`. */
  bun: string;
  /** `go version`. */
  go: string;
}

function version(cmd: string, args: string[]): string {
  try {
    return execFileSync(cmd, args, { encoding: "utf8", stdio: ["ignore", "pipe", "ignore"] })
      .split("\n")[0].trim();
  } catch {
    return "unavailable";
  }
}

/** Collects the environment (spawns `deno`, `bun` and `go` once each). */
export function benchEnv(): BenchEnv {
  const cpus = os.cpus();
  return {
    date: new Date().toISOString(),
    cpus: cpus.length,
    cpuModel: cpus[0]?.model ?? "unknown",
    os: `${os.platform()}-${os.arch()} ${os.release()}`,
    deno: version(RUNTIME_BIN.deno, ["--version"]),
    bun: version(RUNTIME_BIN.bun, ["--version"]),
    go: version("go", ["version"]),
  };
}
