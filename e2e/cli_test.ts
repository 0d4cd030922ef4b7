// The one `tunnelmux` command, as users run it from a checkout: bin/tunnelmux.mjs started by Node
// (which runs the command on Deno) and by Bun (in process). The packed package: package_test.ts.
import { after, describe, it } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { hashToken } from "../daemon/config/token_hash.ts";
import { baseEnv, probePort, ROOT, runCommand, startCommand, waitFor } from "../testing/mod.ts";

const BUN = join(ROOT, "node_modules", ".bin", "bun");
const BIN = join(ROOT, "bin", "tunnelmux.mjs");
const work = mkdtempSync(join(tmpdir(), "tunnelmux-cli-"));
after(() => rmSync(work, { recursive: true, force: true }));

/** Runs `tunnelmux args` with `launcher` (node or bun). */
function tunnelmux(launcher: "node" | "bun", args: string[], input?: string) {
  return runCommand(launcher === "node" ? "node" : BUN, [BIN, ...args], { input });
}

describe("the tunnelmux command", () => {
  for (const launcher of ["node", "bun"] as const) {
    it(`answers --help at each level, and refuses what it does not know (${launcher})`, async () => {
      const top = await tunnelmux(launcher, ["--help"]);
      assert.equal(top.code, 0, top.stderr);
      for (const command of ["daemon", "client", "check", "token", "echo", "bench", "version"]) {
        assert.match(top.stdout, new RegExp(`^  ${command} `, "m"), `${command} is listed`);
      }
      const expected: Record<string, RegExp> = {
        daemon: /^tunnelmux daemon:/,
        client: /^tunnelmux client:|client --server URL/,
        token: /^tunnelmux token:/,
        echo: /^tunnelmux echo:/,
      };
      for (const [command, pattern] of Object.entries(expected)) {
        const help = await tunnelmux(launcher, [command, "--help"]);
        assert.equal(help.code, 0, `${command} --help: ${help.stderr}`);
        assert.match(help.stdout, pattern, command);
      }
      const version = await tunnelmux(launcher, ["version"]);
      const runtime = launcher === "node" ? "deno" : "bun";
      assert.match(version.stdout, new RegExp(`^tunnelmux 0\\.1\\.0 \\(${runtime} `));
      const unknown = await tunnelmux(launcher, ["serve"]);
      assert.equal(unknown.code, 2);
      assert.match(unknown.stderr, /unknown command "serve"/);
      const bare = await tunnelmux(launcher, []);
      assert.equal(bare.code, 2, "no command: usage, exit 2");
    });
  }

  it("token prints a token and the sha256 form the daemon's config takes; check accepts it", async () => {
    const made = await tunnelmux("node", ["token"]);
    assert.equal(made.code, 0, made.stderr);
    const token = /^token +(\S+)$/m.exec(made.stdout)?.[1];
    const hash = /^config +(\S+)$/m.exec(made.stdout)?.[1];
    assert.ok(token && hash, made.stdout);
    assert.equal(hash, hashToken(token));
    const again = await tunnelmux("bun", ["token", "hash"], `${token}\n`);
    assert.equal(again.stdout.trim(), hash, "token hash reads stdin");
    const config = join(work, "tunnelmux.json");
    writeFileSync(config, JSON.stringify({ clients: [{ name: "laptop", token: hash }] }));
    const checked = await tunnelmux("node", ["check", "--config", config]);
    assert.equal(checked.code, 0, checked.stderr);
  });

  it("SIGTERM to the command drains the daemon and frees its port", async () => {
    const daemon = startCommand("node", [BIN, "daemon"], {
      env: {
        ...baseEnv(),
        TUNNELMUX_LISTEN_TCP: "127.0.0.1:0",
        TUNNELMUX_LISTEN_WS: "off",
        TUNNELMUX_LISTEN_ADMIN: "off",
        TUNNELMUX_DATA_DIR: join(work, "data"),
        TUNNELMUX_LOG_FORMAT: "json",
      },
    });
    try {
      const port = Number(
        (await daemon.waitForStdout(/tunnels over TCP on 127\.0\.0\.1:(\d+)/))[1],
      );
      daemon.signal("SIGTERM");
      assert.equal(await daemon.exited, 0);
      await waitFor(() => /daemon stopped/.test(daemon.stderr()), "the daemon's last line");
      assert.equal(await probePort(port), "refused");
    } finally {
      daemon.signal("SIGKILL");
    }
  });
});
