/**
 * Builds the tunnel benchmark's load generator and backend (`bench/tunnel/loadgen`, Go, stdlib
 * only) into `.cache/bench/`, once per source change, the way `interop/go_peer.ts` builds the Go
 * yamux peers. Go serves both sides because it is cheap in CPU: on a 2-core machine the load and
 * the backend share the cores with the daemon and the client under test.
 *
 * @module
 */

import { execFile } from "node:child_process";
import { createHash } from "node:crypto";
import {
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  renameSync,
  writeFileSync,
} from "node:fs";
import { dirname, join } from "node:path";
import process from "node:process";
import { fileURLToPath } from "node:url";

const SOURCE = join(dirname(fileURLToPath(import.meta.url)), "loadgen");
const CACHE = join(dirname(dirname(dirname(SOURCE))), ".cache", "bench");

function run(cmd: string, args: string[], cwd: string): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile(cmd, args, { cwd }, (error, stdout, stderr) => {
      if (error) reject(new Error(`${cmd} ${args.join(" ")}: ${stderr || error.message}`));
      else resolve(stdout);
    });
  });
}

let built: Promise<string> | undefined;

/** The load generator's binary path, built first if its sources or `go version` changed. */
export function buildLoadgen(): Promise<string> {
  built ??= (async () => {
    const goVersion = await run("go", ["version"], SOURCE).catch((error) => {
      throw new Error(`the tunnel bench needs Go on PATH to build its load generator: ${error}`);
    });
    const hash = createHash("sha256").update(goVersion);
    for (const file of readdirSync(SOURCE).filter((f) => /\.(go|mod)$/.test(f)).sort()) {
      hash.update(`\0${file}\0`).update(readFileSync(join(SOURCE, file)));
    }
    const key = hash.digest("hex");
    const bin = join(CACHE, "loadgen");
    const keyFile = `${bin}.key`;
    if (existsSync(bin) && existsSync(keyFile) && readFileSync(keyFile, "utf8") === key) return bin;
    mkdirSync(CACHE, { recursive: true });
    // A private temp name, then rename: a concurrent bench never runs a half-written binary.
    const tmp = `${bin}.tmp-${process.pid}`;
    await run("go", ["build", "-trimpath", "-o", tmp, "."], SOURCE);
    renameSync(tmp, bin);
    writeFileSync(keyFile, key);
    return bin;
  })();
  built.catch(() => (built = undefined));
  return built;
}
