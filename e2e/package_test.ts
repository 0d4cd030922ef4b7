// The npm package as users get it: a copy of this checkout packed with `npm pack` (its prepack
// builds dist/ in the copy, never here), installed from the tarball into an empty project, then
// the SDK imported by name under Node, Deno and Bun and the `tunnelmux` command on plain Node,
// each exposing a port of a real daemon that a visitor's bytes cross. Slow: one pack and one
// `npm install` (from the npm cache or the registry), shared by every test below.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { copyFileSync, mkdirSync, mkdtempSync, rmSync, statSync, symlinkSync } from "node:fs";
import { readdirSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import {
  baseEnv,
  cleanup,
  daemonConfig,
  type DaemonProcess,
  newToken,
  ROOT,
  runCommand,
  startCommand,
  startDaemon,
  startEchoServer,
  tcpRoundTrip,
  type TestServer,
  waitFor,
} from "../testing/mod.ts";

const BUN = join(ROOT, "node_modules", ".bin", "bun");
const DENO = join(ROOT, "node_modules", ".bin", "deno");
const work = mkdtempSync(join(tmpdir(), "tunnelmux-package-"));
const app = join(work, "app");

/** The SDK as a user's script uses it: expose `local` on any port, print the port. */
const SDK_SCRIPT = `import process from "node:process";
import { connect } from "tunnelmux/client";
const [server, local] = process.argv.slice(2);
const client = await connect(server, { token: process.env.TUNNELMUX_TOKEN });
const tunnel = await client.expose({ local, remotePort: 0 });
console.log(\`exposed \${tunnel.remotePort}\`);
process.on("SIGINT", () => client.close().then(() => process.exit(0)));
`;

/** Bytes of every file under `dir`. */
function treeBytes(dir: string): number {
  let total = 0;
  for (const entry of readdirSync(dir, { withFileTypes: true, recursive: true })) {
    if (entry.isFile()) total += statSync(join(entry.parentPath, entry.name)).size;
  }
  return total;
}

describe("the npm package, packed and installed in an empty project", () => {
  let tarball: string;
  let listing: string[];
  let daemon: DaemonProcess;
  let echo: TestServer;
  const token = newToken("package");

  before(async () => {
    // The working tree (tracked and new files, not ignored ones) copied, so the pack's build
    // writes into the copy; node_modules linked, for the build's deno, esbuild and tsc.
    const copy = join(work, "checkout");
    const files = await runCommand("git", ["ls-files", "-co", "--exclude-standard", "-z"]);
    assert.equal(files.code, 0, files.stderr);
    for (const file of files.stdout.split("\0").filter((f) => f !== "")) {
      try {
        if (!statSync(join(ROOT, file)).isFile()) continue;
      } catch {
        continue; // deleted in the working tree
      }
      mkdirSync(dirname(join(copy, file)), { recursive: true });
      copyFileSync(join(ROOT, file), join(copy, file));
    }
    symlinkSync(join(ROOT, "node_modules"), join(copy, "node_modules"));
    const packed = await runCommand("npm", ["pack", "--pack-destination", work, "--silent"], {
      cwd: copy,
      timeoutMs: 180_000,
    });
    assert.equal(packed.code, 0, packed.stderr);
    tarball = join(work, packed.stdout.trim().split("\n").at(-1)!);
    const listed = await runCommand("tar", ["-tzf", tarball]);
    listing = listed.stdout.split("\n").filter((l) => l !== "").map((l) =>
      l.replace(/^package\//, "")
    );
    mkdirSync(app);
    writeFileSync(
      join(app, "package.json"),
      JSON.stringify({ name: "app", private: true, type: "module" }),
    );
    const installed = await runCommand(
      "npm",
      ["install", "--no-audit", "--no-fund", "--loglevel=error", tarball],
      { cwd: app, timeoutMs: 300_000 },
    );
    assert.equal(installed.code, 0, installed.stderr);
    const figure = {
      registry: "npm",
      files: listing.length,
      bytes: statSync(tarball).size,
      installedBytes: treeBytes(join(app, "node_modules")),
    };
    console.log(`package-figure ${JSON.stringify(figure)}`);
    writeFileSync(join(app, "sdk.mjs"), SDK_SCRIPT);
    writeFileSync(
      join(app, "sdk_deno.mjs"),
      SDK_SCRIPT.replace('"tunnelmux/client"', '"npm:tunnelmux/client"'),
    );
    echo = await startEchoServer();
    daemon = await startDaemon({ config: daemonConfig([{ name: "package", token }]) });
  });
  after(async () => {
    await cleanup();
    rmSync(work, { recursive: true, force: true });
  });

  /** Runs `command` in the project until it prints its tunnel's port, then checks an echo. */
  async function exposeThrough(command: string, args: string[], pattern: RegExp) {
    const program = startCommand(command, args, {
      cwd: app,
      env: { ...baseEnv(), TUNNELMUX_TOKEN: token },
    });
    try {
      // The SDK script prints on stdout, the command logs on stderr.
      const found = await waitFor(() => pattern.exec(program.stdout() + program.stderr()), {
        timeoutMs: 60_000,
        message: `${pattern} from ${command} (stderr: ${program.stderr().slice(-800)})`,
      });
      const port = Number(found[1]);
      const bytes = new TextEncoder().encode(`through ${command} ${args[0]}`);
      assert.deepEqual(await tcpRoundTrip(port, bytes), bytes);
      program.signal("SIGINT");
      assert.equal(await program.exited, 0, program.stderr());
    } finally {
      program.signal("SIGKILL");
    }
  }

  it("ships built JavaScript with declarations and the examples, no TypeScript sources or tests", () => {
    for (const file of ["dist/client/mod.js", "dist/client/mod.d.ts", "dist/cli/main.js"]) {
      assert.ok(listing.includes(file), `${file} is in the tarball`);
    }
    assert.ok(listing.includes("dist/transport/node/tcp.js"), "Node's own TCP adapter ships");
    assert.ok(
      listing.includes("examples/expose.ts") && listing.includes("dist/examples/expose.js"),
    );
    const sources = listing.filter((f) =>
      f.endsWith(".ts") && !f.endsWith(".d.ts") && !f.startsWith("examples/")
    );
    assert.deepEqual(sources, []);
    assert.deepEqual(listing.filter((f) => /_test\.|\/_[^/]*$/.test(f)), []);
    const manifest = JSON.parse(
      readFileSync(join(app, "node_modules/tunnelmux/package.json"), "utf8"),
    );
    assert.equal(manifest.dependencies.bun, undefined, "Bun is not a dependency");
    assert.throws(() => statSync(join(app, "node_modules", "bun")), "the install pulled no Bun");
  });

  for (const runtime of ["node", "deno", "bun"] as const) {
    it(`the SDK imported by name exposes a port that a visitor's bytes cross (${runtime})`, async () => {
      const [command, args] = runtime === "node"
        ? ["node", ["sdk.mjs"]]
        : runtime === "bun"
        ? [BUN, ["sdk.mjs"]]
        : [DENO, ["run", "--allow-all", "sdk_deno.mjs"]]; // Deno spells it npm:tunnelmux/client
      await exposeThrough(
        command,
        [...args, daemon.tcpUrl, `127.0.0.1:${echo.port}`],
        /exposed (\d+)/,
      );
    });
  }

  it("the shipped example runs as built: dist/examples/expose.js on Node", async () => {
    await exposeThrough(
      "node",
      ["node_modules/tunnelmux/dist/examples/expose.js", daemon.tcpUrl, `127.0.0.1:${echo.port}`],
      /visitors of \S+:(\d+) reach/,
    );
  });

  it("the command runs on plain Node: version, token, a client exposing a port over WebSocket", async () => {
    const version = await runCommand("npx", ["--no-install", "tunnelmux", "version"], { cwd: app });
    assert.match(version.stdout, /^tunnelmux 0\.1\.0 \(node 20\./, version.stderr);
    const made = await runCommand("npx", ["--no-install", "tunnelmux", "token"], { cwd: app });
    assert.match(made.stdout, /^config +sha256:[0-9a-f]{64}$/m, made.stderr);
    await exposeThrough("node", [
      "node_modules/tunnelmux/dist/cli/main.js",
      "client",
      "--server",
      daemon.wsUrl, // WebSocket here, TCP in the SDK tests: both transports on plain Node
      "--expose",
      `0=127.0.0.1:${echo.port}`,
      "--log-format",
      "json",
    ], /"remote":"127\.0\.0\.1:(\d+)"/);
  });

  it("the command says what the daemon needs without Bun, and that the bench runs from a checkout", async () => {
    const daemonRun = await runCommand("node", ["node_modules/.bin/tunnelmux", "daemon"], {
      cwd: app,
    });
    assert.equal(daemonRun.code, 1);
    assert.match(daemonRun.stderr, /daemon needs the bun npm package/);
    const bench = await runCommand("npx", ["--no-install", "tunnelmux", "bench"], { cwd: app });
    assert.equal(bench.code, 2);
    assert.match(bench.stderr, /runs from a checkout/);
  });

  it("the declarations type a consumer of every entry: tsc accepts right use, refuses a wrong type", async () => {
    writeFileSync(
      join(app, "consumer.ts"),
      'import { connect, type Tunnel } from "tunnelmux/client";\n' +
        'import { Session } from "tunnelmux/protocol";\n' +
        'import * as transportApi from "tunnelmux/transport";\n' +
        'import * as tunnelApi from "tunnelmux/tunnel";\n' +
        'const client = await connect("tcp://127.0.0.1:7000", { token: "t" });\n' +
        'const tunnel: Tunnel = await client.expose({ local: "127.0.0.1:3000", remotePort: 0 });\n' +
        "const port: number = tunnel.remotePort;\n" +
        "const wrong: string = tunnel.remotePort;\n" +
        "console.log(port, wrong, typeof Session, transportApi.connectTcp, tunnelApi);\n",
    );
    const tsc = await runCommand("node", [
      join(ROOT, "node_modules", "typescript", "bin", "tsc"),
      "--noEmit",
      "--strict",
      "--module",
      "nodenext",
      "--target",
      "es2022",
      "--typeRoots",
      join(ROOT, "node_modules", "@types"),
      "--types",
      "node",
      "consumer.ts",
    ], { cwd: app, timeoutMs: 120_000 });
    const errors = tsc.stdout.split("\n").filter((l) => /error TS/.test(l));
    assert.equal(errors.length, 1, tsc.stdout);
    assert.match(errors[0], /^consumer\.ts\(8,7\): error TS2322/);
  });
});
