// The single-binary build: `deno task compile` (Bun's `build --compile`, since `deno compile`
// downloads its runtime and cannot run here; see docs/deploy.md) must produce a daemon that
// starts, answers /healthz and drains on SIGTERM. The task's command line is read from deno.json,
// so the task itself is what is tested. The binary (about 100 MB) is cached in .cache/bin with a
// hash of its sources, and rebuilt only when they change.

import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, relative } from "node:path";
import { after, describe, it } from "node:test";
import { ROOT, runCommand, startCommand } from "../testing/mod.ts";

/** The directories the daemon is built from. */
const SOURCE_DIRS = ["daemon", "util", "protocol", "transport", "tunnel"];

/** Every input of the build, hashed: sources (tests excluded), manifests, and the task itself. */
function sourcesHash(task: string): string {
  const hash = createHash("sha256").update(task);
  const walk = (dir: string): string[] =>
    readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
      const path = join(dir, entry.name);
      if (entry.isDirectory()) return walk(path);
      return entry.name.endsWith(".ts") && !entry.name.endsWith("_test.ts") ? [path] : [];
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

/** Builds with `deno task compile` unless the cached binary was built from the same sources. */
async function compiled(): Promise<string> {
  const deno = JSON.parse(readFileSync(join(ROOT, "deno.json"), "utf8"));
  const task: string = deno.tasks.compile;
  const [command, ...args] = task.split(/\s+/);
  const outfile = join(ROOT, args[args.indexOf("--outfile") + 1]);
  const stamp = `${outfile}.sources`;
  const digest = sourcesHash(task);
  const cached = existsSync(outfile) && existsSync(stamp) &&
    readFileSync(stamp, "utf8").trim() === digest;
  if (!cached) {
    rmSync(stamp, { force: true });
    const build = await runCommand(join(ROOT, command), args, { timeoutMs: 120_000 });
    assert.equal(build.code, 0, `${task}\n${build.stdout}${build.stderr}`);
    writeFileSync(stamp, digest + "\n");
  }
  return outfile;
}

describe("single binary (deno task compile)", () => {
  const dataDir = mkdtempSync(join(tmpdir(), "tunnelmux-bin-data-"));
  after(() => rmSync(dataDir, { recursive: true, force: true }));

  it("builds, starts, answers /healthz, and exits 0 on SIGTERM", async () => {
    const binary = await compiled();
    const daemon = startCommand(binary, [
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
});
