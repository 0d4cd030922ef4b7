// The image's command line, run on the host, so it cannot silently rot: no Docker engine is needed
// (none runs here). The root Dockerfile's ENTRYPOINT + CMD run under the pinned Deno with the
// image's ENV, the image's paths mapped onto the repository (WORKDIR) and a temp dir (/data); the
// HEALTHCHECK command must pass against it, a minted token must land in the data volume (so the
// narrow --allow-write is right), and SIGTERM must drain and exit 0.
//
// Listeners: the image binds 0.0.0.0 on the EXPOSEd ports; here they are rewritten to
// 127.0.0.1 on free ports, the only change to the image's environment.
//
// Runs under `deno test -A` and `bun test` alike: whatever runs the test, the image runs Deno.

import assert from "node:assert/strict";
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, relative } from "node:path";
import { fileURLToPath } from "node:url";
import { after, describe, it } from "node:test";
import { baseEnv, closedPort, ROOT, runCommand, startCommand } from "../testing/mod.ts";
import { mapPaths, parseDockerfile } from "./dockerfile.ts";

const DENO = join(ROOT, "node_modules", ".bin", "deno");
const spec = parseDockerfile(readFileSync(join(ROOT, "Dockerfile"), "utf8"));
const dataDir = mkdtempSync(join(tmpdir(), "tunnelmux-image-data-"));
after(() => rmSync(dataDir, { recursive: true, force: true }));

/** Image paths → host paths. */
const paths: Record<string, string> = { [spec.workdir]: ROOT, "/data": dataDir };

/** The image's command on the host: tini dropped (no init here), deno → the pinned binary. */
function hostCommand(argv: string[]): string[] {
  const args = argv[0] === "/tini" ? argv.slice(argv.indexOf("--") + 1) : argv;
  assert.equal(args[0], "deno", `the image runs deno, got ${args[0]}`);
  return [DENO, ...args.slice(1).map((a) => mapPaths(a, paths))];
}

/** The image's environment on the host, listeners on 127.0.0.1 at the given ports. */
function hostEnv(ports: Record<string, number>): Record<string, string> {
  const env = baseEnv();
  for (const [key, value] of Object.entries(spec.env)) env[key] = mapPaths(value, paths);
  for (const [key, port] of Object.entries(ports)) env[key] = `127.0.0.1:${port}`;
  return env;
}

describe("Dockerfile", () => {
  it("pins the base image to the Deno of package.json, and runs as a numeric non-root user", () => {
    const pkg = JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8"));
    const deno = pkg.devDependencies.deno as string;
    assert.equal(spec.from, `denoland/deno:debian-${deno}`);
    assert.match(spec.user, /^[1-9][0-9]*(:[0-9]+)?$/);
    assert.deepEqual(spec.entrypoint.slice(0, 2), ["/tini", "--"], "tini as PID 1");
    assert.deepEqual(spec.volumes, ["/data"]);
    assert.equal(spec.env.TUNNELMUX_DATA_DIR, "/data");
  });

  it("copies every module the daemon loads; its npm packages are the dependencies", async () => {
    const info = await runCommand(DENO, ["info", "--json", "daemon/main.ts"]);
    assert.equal(info.code, 0, info.stderr);
    const modules = (JSON.parse(info.stdout).modules as { specifier: string }[])
      .map((m) => m.specifier)
      .filter((s) => s.startsWith("file:"))
      .map((s) => relative(ROOT, fileURLToPath(s)));
    const npm = new Set<string>();
    for (const path of modules) {
      const inNodeModules = /^node_modules\/((?:@[^/]+\/)?[^/]+)\//.exec(path);
      if (inNodeModules) {
        npm.add(inNodeModules[1]);
        continue;
      }
      const covered = spec.copied.some((c) => path === c || path.startsWith(c + "/"));
      assert.ok(covered, `${path} is loaded by the daemon but no COPY brings it into the image`);
      // .dockerignore keeps tests and fixtures out of the context: the daemon must not need them.
      assert.doesNotMatch(path, /(_test\.ts|\/_[^/]*fixture\.ts)$/);
    }
    const pkg = JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8"));
    assert.deepEqual([...npm].sort(), Object.keys(pkg.dependencies).sort());
    assert.match(
      readFileSync(join(ROOT, "Dockerfile"), "utf8"),
      /npm ci --omit=dev --omit=optional/,
    );
  });

  it("listens on 0.0.0.0 inside the container, on the EXPOSEd ports", () => {
    const listens = ["TUNNELMUX_LISTEN_TCP", "TUNNELMUX_LISTEN_WS", "TUNNELMUX_LISTEN_ADMIN"]
      .map((k) => spec.env[k]);
    assert.deepEqual(listens, ["0.0.0.0:7000", "0.0.0.0:7080", "0.0.0.0:7081"]);
    assert.deepEqual(spec.expose, [7000, 7080, 7081]);
  });

  it("runs the image's command: starts, passes its HEALTHCHECK, keeps tokens in /data, drains on SIGTERM", async () => {
    // Free ports: bound then released (the admin port must be known to the healthcheck's env).
    const env = hostEnv({
      TUNNELMUX_LISTEN_TCP: await closedPort(),
      TUNNELMUX_LISTEN_WS: await closedPort(),
      TUNNELMUX_LISTEN_ADMIN: await closedPort(),
    });
    env.TUNNELMUX_ADMIN_TOKEN = "image-test-admin-token-0123456789";
    const [command, ...args] = hostCommand([...spec.entrypoint, ...spec.cmd]);
    const daemon = startCommand(command, args, { env });
    try {
      const adminUrl = (await daemon.waitForStdout(/admin API on (\S+)/))[1];

      const [hcCommand, ...hcArgs] = hostCommand(spec.healthcheck);
      const healthy = await runCommand(hcCommand, hcArgs, { env });
      assert.equal(healthy.code, 0, `healthcheck: ${healthy.stdout}${healthy.stderr}`);
      assert.match(healthy.stdout, /readyz: 200/);

      const minted = await fetch(`${adminUrl}/v1/tokens`, {
        method: "POST",
        headers: {
          authorization: `Bearer ${env.TUNNELMUX_ADMIN_TOKEN}`,
          "content-type": "application/json",
        },
        body: JSON.stringify({ name: "image-test" }),
      });
      assert.equal(minted.status, 201, await minted.text());
      assert.ok(existsSync(join(dataDir, "tokens.json")), "the token file is in the data dir");

      const code = await daemon.stop();
      assert.equal(code, 0, daemon.stderr().slice(-1000));
      assert.match(daemon.stderr(), /signal: draining/);
    } finally {
      await daemon.stop().catch(() => {});
    }
  });

  it("a config file outside the image's read paths is refused, naming the permission and where to mount it", async () => {
    const outside = join(mkdtempSync(join(tmpdir(), "tunnelmux-outside-")), "tunnelmux.json");
    writeFileSync(outside, "{}");
    const env = hostEnv({
      TUNNELMUX_LISTEN_TCP: await closedPort(),
      TUNNELMUX_LISTEN_WS: await closedPort(),
      TUNNELMUX_LISTEN_ADMIN: await closedPort(),
    });
    env.TUNNELMUX_CONFIG = outside;
    const [command, ...args] = hostCommand([...spec.entrypoint, ...spec.cmd]);
    const refused = await runCommand(command, args, { env });
    assert.equal(refused.code, 1);
    assert.match(refused.stderr, /cannot read config file .*not allowed to read it/);
    assert.match(refused.stderr, /mount the file under \/etc\/tunnelmux/);
    rmSync(dirname(outside), { recursive: true, force: true });
  });
});
