/**
 * Builds the `tunnelmux` command as single executables for the platforms tunnel clients run on:
 * Linux x64 and arm64, macOS x64 and arm64, Windows x64. Bun's `build --compile` takes each
 * target's runtime from the npm registry (cached under ~/.bun) and appends the bundled command.
 *
 *   node_modules/.bin/deno run -A tools/build_binaries.ts OUT_DIR [TARGET…]   (npm run binaries)
 *
 * Files are named `tunnelmux-<target>` (`.exe` for Windows). Windows has no SIGHUP: there the
 * client applies its config file's changes with `--watch-config` (docs/package.md).
 *
 * @module
 */

import { spawnSync } from "node:child_process";
import { closeSync, mkdirSync, openSync, readSync } from "node:fs";
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const ROOT = fileURLToPath(new URL("..", import.meta.url));

/** The platforms a binary is built for, as Bun's `--target=bun-<target>` names them. */
export const TARGETS = [
  "linux-x64",
  "linux-arm64",
  "darwin-x64",
  "darwin-arm64",
  "windows-x64",
] as const;

/** One of {@linkcode TARGETS}. */
export type Target = typeof TARGETS[number];

/** What an executable's header says it is: its container format and its CPU. */
export interface ExecutableFormat {
  /** ELF (Linux), Mach-O (macOS) or PE (Windows). */
  format: "elf" | "mach-o" | "pe";
  /** The instruction set. */
  cpu: "x64" | "arm64";
}

/** The file name of `target`'s binary. */
export function binaryName(target: Target): string {
  return `tunnelmux-${target}${target.startsWith("windows") ? ".exe" : ""}`;
}

/** The format and CPU each target's binary must have. */
export function expectedFormat(target: Target): ExecutableFormat {
  const [os, cpu] = target.split("-") as [string, "x64" | "arm64"];
  return { format: os === "linux" ? "elf" : os === "darwin" ? "mach-o" : "pe", cpu };
}

/**
 * Reads an executable's format and CPU from its first bytes (at least 64, and for PE the whole
 * DOS header and the PE header it points to), or undefined when they are none of the three.
 */
export function executableFormat(head: Uint8Array): ExecutableFormat | undefined {
  const view = new DataView(head.buffer, head.byteOffset, head.byteLength);
  if (head.length < 64) return undefined;
  // ELF: 0x7f "ELF", 64-bit little-endian, e_machine at 18 (62 x86-64, 183 AArch64).
  if (view.getUint32(0) === 0x7f454c46) {
    const machine = view.getUint16(18, true);
    return machine === 62
      ? { format: "elf", cpu: "x64" }
      : machine === 183
      ? { format: "elf", cpu: "arm64" }
      : undefined;
  }
  // Mach-O 64-bit, little-endian: magic 0xfeedfacf (bytes cf fa ed fe), cputype at 4
  // (0x01000007 x86-64, 0x0100000c arm64).
  if (view.getUint32(0, true) === 0xfeedfacf) {
    const cpu = view.getUint32(4, true);
    return cpu === 0x01000007
      ? { format: "mach-o", cpu: "x64" }
      : cpu === 0x0100000c
      ? { format: "mach-o", cpu: "arm64" }
      : undefined;
  }
  // PE: "MZ", the PE header's offset at 0x3c, "PE\0\0" there, then the machine (0x8664 x64,
  // 0xaa64 arm64).
  if (head[0] === 0x4d && head[1] === 0x5a) {
    const at = view.getUint32(0x3c, true);
    if (at + 6 > head.length || view.getUint32(at) !== 0x50450000) return undefined;
    const machine = view.getUint16(at + 4, true);
    return machine === 0x8664
      ? { format: "pe", cpu: "x64" }
      : machine === 0xaa64
      ? { format: "pe", cpu: "arm64" }
      : undefined;
  }
  return undefined;
}

/** The first `bytes` bytes of the file at `path`. */
export function readHead(path: string, bytes = 4096): Uint8Array {
  const fd = openSync(path, "r");
  try {
    const head = new Uint8Array(bytes);
    return head.subarray(0, readSync(fd, head, 0, bytes, 0));
  } finally {
    closeSync(fd);
  }
}

/** The outcome of building one target. */
export interface BuildResult {
  /** The binary's path, when the build succeeded. */
  path?: string;
  /** Bun's output (its error, when the build failed). */
  output: string;
}

/**
 * Builds `target`'s binary into `outDir` with the checkout's Bun. Does not throw on a failed
 * build: a target's runtime comes from the network, so the caller decides what a failure means.
 */
export function buildBinary(target: Target, outDir: string, root: string = ROOT): BuildResult {
  mkdirSync(outDir, { recursive: true });
  const path = join(outDir, binaryName(target));
  const built = spawnSync(join(root, "node_modules", ".bin", "bun"), [
    "build",
    "--compile",
    // Compiled ahead to JavaScriptCore's bytecode (ESM, for the CLI's top-level await): a fresh
    // daemon accepts 22–26 ms after its spawn and the first echo crosses a fresh client at 51–59
    // ms, against 94–97 and 205–224 ms when the binary parses its bundled modules at each start
    // (bench:startup --binary).
    "--bytecode",
    "--format=esm",
    `--target=bun-${target}`,
    join(root, "cli", "main.ts"),
    "--outfile",
    path,
  ], { cwd: root, encoding: "utf8", timeout: 300_000 });
  const output = `${built.stdout ?? ""}${built.stderr ?? ""}${built.error?.message ?? ""}`;
  return built.status === 0 ? { path, output } : { output };
}

if (import.meta.main) {
  const [out, ...asked] = Deno.args;
  if (!out) {
    console.error(`usage: build_binaries.ts OUT_DIR [${TARGETS.join("|")}…]`);
    Deno.exit(2);
  }
  const unknown = asked.filter((t) => !(TARGETS as readonly string[]).includes(t));
  if (unknown.length > 0) {
    console.error(`unknown target ${unknown.join(", ")}: one of ${TARGETS.join(", ")}`);
    Deno.exit(2);
  }
  let failed = 0;
  for (const target of (asked.length > 0 ? asked : TARGETS) as Target[]) {
    const result = buildBinary(target, resolve(out));
    const format = result.path && executableFormat(readHead(result.path));
    const expected = expectedFormat(target);
    if (!format || format.format !== expected.format || format.cpu !== expected.cpu) {
      failed++;
      console.error(`${target}: failed\n${result.output}`);
    } else console.log(`${target}: ${result.path} (${format.format} ${format.cpu})`);
  }
  Deno.exit(failed > 0 ? 1 : 0);
}
