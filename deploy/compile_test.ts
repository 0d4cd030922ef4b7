// The single binaries: `deno task compile` and `deno task compile:arm64` (Bun's `build --compile`
// of the one `tunnelmux` command for linux-x64 and, cross-compiled, linux-arm64; `deno compile`
// downloads its runtime and cannot run here, see docs/deploy.md). The x64 one must run the daemon:
// start, answer /healthz and drain on SIGTERM; the arm64 one must be an aarch64 executable. The
// tasks' command lines are read from deno.json, so the tasks themselves are what is tested. The
// binaries (about 105 MiB each) are cached in .cache/bin with a hash of their sources, and rebuilt
// only when those change; their sizes are printed as figures.

import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import {
  existsSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join, relative } from "node:path";
import { after, describe, it } from "node:test";
import { ROOT, runCommand, startCommand } from "../testing/mod.ts";

/** The directories the command is built from. */
const SOURCE_DIRS = [
  "cli",
  "client",
  "daemon",
  "util",
  "protocol",
  "transport",
  "tunnel",
  "tools",
  "bench",
];

/** Every input of the build, hashed: sources (tests excluded), manifests, and the task itself. */
function sourcesHash(task: string): string {
  const hash = createHash("sha256").update(task);
  const walk = (dir: string): string[] =>
    readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
      const path = join(dir, entry.name);
      if (entry.isDirectory()) return walk(path);
      // .js, .html and .css too: the dashboard's files are embedded in the binary as text imports.
      const source = /\.(ts|js|html|css)$/.test(entry.name) && !entry.name.endsWith("_test.ts");
      return source ? [path] : [];
    });
  const files = [
    ...SOURCE_DIRS.flatMap((d) => walk(join(ROOT, d))),
    join(ROOT, "deno.json"),
    join(ROOT, "package-lock.json"),
  ].sort();
  for (const file of files) {
    hash.update(relative(ROOT, file)).update("\0").update(readFileSync(file)).update("\0");
  }
  return hash.digest("hex");
}

/** Builds with deno task `name` unless the cached binary was built from the same sources. */
async function compiled(name: string): Promise<string> {
  const deno = JSON.parse(readFileSync(join(ROOT, "deno.json"), "utf8"));
  const task: string = deno.tasks[name];
  const [command, ...args] = task.split(/\s+/);
  const outfile = join(ROOT, args[args.indexOf("--outfile") + 1]);
  const stamp = `${outfile}.sources`;
  const digest = sourcesHash(task);
  const cached = existsSync(outfile) && existsSync(stamp) &&
    readFileSync(stamp, "utf8").trim() === digest;
  if (!cached) {
    rmSync(stamp, { force: true });
    const build = await runCommand(join(ROOT, command), args, { timeoutMs: 300_000 });
    assert.equal(build.code, 0, `${task}\n${build.stdout}${build.stderr}`);
    writeFileSync(stamp, digest + "\n");
  }
  console.log(`compile-figure ${JSON.stringify({ task: name, bytes: statSync(outfile).size })}`);
  return outfile;
}

describe("single binaries (deno task compile, compile:arm64)", () => {
  const dataDir = mkdtempSync(join(tmpdir(), "tunnelmux-bin-data-"));
  after(() => rmSync(dataDir, { recursive: true, force: true }));

  it("linux-x64: builds, runs the daemon, answers /healthz, and exits 0 on SIGTERM", async () => {
    const binary = await compiled("compile");
    const version = await runCommand(binary, ["version"]);
    assert.match(version.stdout, /^tunnelmux \d+\.\d+\.\d+ \(bun /);
    const daemon = startCommand(binary, [
      "daemon",
      "--listen-admin",
      "127.0.0.1:0",
      "--listen-tcp",
      "127.0.0.1:0",
      "--listen-ws",
      "127.0.0.1:0",
      "--data-dir",
      dataDir,
      "--log-format",
      "json",
    ]);
    try {
      const adminUrl = (await daemon.waitForStdout(/admin API on (\S+)/))[1];
      assert.match(daemon.stdout(), /tunnels over TCP on 127\.0\.0\.1:\d+/);
      const response = await fetch(`${adminUrl}/healthz`, { signal: AbortSignal.timeout(10_000) });
      assert.equal(response.status, 200);
      assert.deepEqual(await response.json(), { status: "ok" });
      const info = await fetch(`${adminUrl}/readyz`, { signal: AbortSignal.timeout(10_000) });
      assert.equal(info.status, 200, await info.text());

      // The binary carries its own healthcheck subcommand too.
      const probe = await runCommand(binary, ["healthcheck", "--url", `${adminUrl}/readyz`]);
      assert.equal(probe.code, 0, probe.stderr);

      assert.equal(await daemon.stop(), 0, daemon.stderr().slice(-1000));
    } finally {
      await daemon.stop().catch(() => {});
    }
  });

  it("linux-arm64: cross-compiles to an aarch64 executable", async () => {
    const binary = await compiled("compile:arm64");
    const head = readFileSync(binary).subarray(0, 20);
    assert.deepEqual([...head.subarray(0, 4)], [0x7f, 0x45, 0x4c, 0x46], "an ELF file");
    assert.equal(head.readUInt16LE(18), 0xb7, "e_machine is EM_AARCH64");
  });
});
