/**
 * Builds a Go program of this repository (the interop peers, the bench's load generator) into a
 * cache directory, once: a binary is reused while a hash of its sources and `go version` is
 * unchanged, and built to a private temp name then renamed, so concurrent builders (test files run
 * in parallel, two bench runs) never run a half-written binary.
 *
 * @example
 * ```ts ignore
 * import { buildGoProgram } from "./go_build.ts";
 * const bin = await buildGoProgram({
 *   name: "loadgen",
 *   packageDir: "bench/tunnel/loadgen",
 *   sourceDirs: ["bench/tunnel/loadgen"],
 *   cacheDir: ".cache/bench",
 * });
 * ```
 *
 * @module
 */

import { execFile } from "node:child_process";
import { createHash, randomBytes } from "node:crypto";
import {
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import { join } from "node:path";
import process from "node:process";

/** What to build and where. */
export interface GoProgram {
  /** The binary's name in `cacheDir` (`.exe` is added on Windows). */
  name: string;
  /** The directory `go build` runs in: the main package. */
  packageDir: string;
  /** Every directory whose `.go`, `go.mod` and `go.sum` files go into the binary (the hash). */
  sourceDirs: readonly string[];
  /** Where binaries are kept. */
  cacheDir: string;
}

const builds = new Map<string, Promise<string>>();

function go(args: string[], cwd: string): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile("go", args, { cwd, maxBuffer: 16 << 20 }, (error, stdout, stderr) => {
      if (error) reject(new Error(`go ${args.join(" ")} in ${cwd}: ${stderr || error.message}`));
      else resolve(stdout);
    });
  });
}

function sourceKey(program: GoProgram, goVersion: string): string {
  const hash = createHash("sha256").update(goVersion);
  for (const dir of program.sourceDirs) {
    const files = readdirSync(dir)
      .filter((f) => f === "go.mod" || f === "go.sum" || f.endsWith(".go"))
      .sort();
    for (const f of files) hash.update(`\0${dir}/${f}\0`).update(readFileSync(join(dir, f)));
  }
  return hash.digest("hex");
}

async function build(program: GoProgram, bin: string): Promise<string> {
  const version = await go(["version"], program.packageDir).catch((error) => {
    throw new Error(
      `building ${program.name} needs Go >= 1.23 on PATH: ${(error as Error).message}`,
    );
  });
  const key = sourceKey(program, version.trim());
  const keyFile = `${bin}.key`;
  if (existsSync(bin) && existsSync(keyFile) && readFileSync(keyFile, "utf8") === key) return bin;
  mkdirSync(program.cacheDir, { recursive: true });
  const tag = `${process.pid}-${randomBytes(4).toString("hex")}`;
  const tmp = `${bin}.tmp-${tag}`;
  try {
    await go(["build", "-trimpath", "-o", tmp, "."], program.packageDir);
  } catch (error) {
    rmSync(tmp, { force: true });
    throw error;
  }
  renameSync(tmp, bin);
  writeFileSync(`${keyFile}.tmp-${tag}`, key);
  renameSync(`${keyFile}.tmp-${tag}`, keyFile);
  return bin;
}

/**
 * Resolves with the path of `program`'s binary, building it first when its sources or
 * `go version` changed. One build per binary per process; a failed build is retried on the next
 * call. Rejects with go's stderr, or a clear message when `go` is missing.
 */
export function buildGoProgram(program: GoProgram): Promise<string> {
  const exe = process.platform === "win32" ? ".exe" : "";
  const bin = join(program.cacheDir, program.name + exe);
  let pending = builds.get(bin);
  if (!pending) {
    pending = build(program, bin);
    builds.set(bin, pending);
    pending.catch(() => builds.delete(bin));
  }
  return pending;
}

/** A Go program published as a module, installed at a pinned version (toxiproxy, nats-server). */
export interface GoTool {
  /** The binary's name in `cacheDir`, e.g. `toxiproxy-server`. */
  name: string;
  /** The main package with its version, e.g. `github.com/Shopify/toxiproxy/v2/cmd/server@v2.12.0`. */
  pkg: string;
  /** Where binaries are kept. */
  cacheDir: string;
}

async function install(tool: GoTool, bin: string): Promise<string> {
  const version = await go(["version"], process.cwd()).catch((error) => {
    throw new Error(`installing ${tool.name} needs Go on PATH: ${(error as Error).message}`);
  });
  const key = `${tool.pkg}\n${version.trim()}`;
  const keyFile = `${bin}.key`;
  if (existsSync(bin) && existsSync(keyFile) && readFileSync(keyFile, "utf8") === key) return bin;
  mkdirSync(tool.cacheDir, { recursive: true });
  const tag = `${process.pid}-${randomBytes(4).toString("hex")}`;
  // `go install` names the binary after the package's last path element ("server"), so it goes to
  // a private directory first and is renamed into place.
  const gobin = join(tool.cacheDir, `.install-${tag}`);
  mkdirSync(gobin);
  try {
    await new Promise<void>((resolve, reject) => {
      execFile(
        "go",
        ["install", "-trimpath", tool.pkg],
        { env: { ...process.env, GOBIN: gobin, CGO_ENABLED: "0" }, maxBuffer: 16 << 20 },
        (error, _stdout, stderr) => {
          if (error) reject(new Error(`go install ${tool.pkg}: ${stderr || error.message}`));
          else resolve();
        },
      );
    });
    const [built] = readdirSync(gobin);
    if (!built) throw new Error(`go install ${tool.pkg} produced no binary`);
    renameSync(join(gobin, built), bin);
  } finally {
    rmSync(gobin, { recursive: true, force: true });
  }
  writeFileSync(`${keyFile}.tmp-${tag}`, key);
  renameSync(`${keyFile}.tmp-${tag}`, keyFile);
  return bin;
}

/**
 * Resolves with the path of `tool`'s binary, installing it from the Go module proxy first when it
 * is missing or was built for another version or toolchain. One install per binary per process.
 *
 * @example
 * ```ts ignore
 * import { installGoTool } from "./go_build.ts";
 * const bin = await installGoTool({
 *   name: "toxiproxy-server",
 *   pkg: "github.com/Shopify/toxiproxy/v2/cmd/server@v2.12.0",
 *   cacheDir: ".cache/tools",
 * });
 * ```
 */
export function installGoTool(tool: GoTool): Promise<string> {
  const exe = process.platform === "win32" ? ".exe" : "";
  const bin = join(tool.cacheDir, tool.name + exe);
  let pending = builds.get(bin);
  if (!pending) {
    pending = install(tool, bin);
    builds.set(bin, pending);
    pending.catch(() => builds.delete(bin));
  }
  return pending;
}
