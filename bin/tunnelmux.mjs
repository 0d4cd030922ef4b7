#!/usr/bin/env node
// The `tunnelmux` command as npm and Bun install it (`npx tunnelmux …`, `bunx tunnelmux …`, a
// global install). An installed package holds the built JavaScript (dist/): Node and Bun run it in
// this process, except the daemon under Node, which needs Bun's or Deno's HTTP server and runs on
// Bun when the `bun` npm package is installed beside tunnelmux. A checkout holds the TypeScript
// sources: Bun runs cli/main.ts in this process, Node runs it in a child on Deno (the `deno`
// devDependency, with the permissions the command needs), else on Bun. Signals are passed on to a
// child (a process manager's SIGTERM drains the daemon) and the child's exit code is ours.
import { spawn, spawnSync } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { constants } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

/**
 * A 2 MiB young generation (V8's default grows to 16 MiB): the daemon's RSS after 2000 short
 * connections 82 → 72 MiB and its peak during a 256 MiB transfer 154 → 137 MiB, for 2–3 % more CPU
 * (docs/performance.md). The same flag is in `npm start`, the deno tasks and the Dockerfile.
 */
const SEMI_SPACE = "--v8-flags=--max-semi-space-size=2";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const source = join(root, "cli", "main.ts");
const args = process.argv.slice(2);
const fromSource = existsSync(source);
const entry = fromSource ? source : join(root, "dist", "cli", "main.js");
/** The commands that serve HTTP (the WebSocket listener, the admin API): Bun or Deno only. */
const NEEDS_BUN_OR_DENO = new Set(["daemon"]);

/** The runtime to run the entry in a child, or undefined to run it in this process. */
function childRuntime() {
  if (process.versions.bun) return undefined;
  if (fromSource) return denoCommand() ?? bunCommand() ?? missing("the deno or the bun");
  if (!NEEDS_BUN_OR_DENO.has(args[0]) || args.includes("--help") || args.includes("-h")) {
    return undefined;
  }
  return bunCommand() ?? missing("the bun");
}

/** Says what to install when the runtime a command needs is not there, and exits. */
function missing(what) {
  console.error(
    `tunnelmux: ${args[0] ?? "this command"} needs ${what} npm package next to tunnelmux ` +
      "(npm install bun), or run it with bunx tunnelmux",
  );
  process.exit(1);
}

const runtime = childRuntime();
if (!runtime) {
  // Run here under npm exec/npx, this process is left under init if npm dies or passes a signal
  // to its sh only (see watchNpm): it then stops as a SIGTERM stops it.
  if (process.env.npm_lifecycle_event !== undefined) {
    watchNpm(() => process.kill(process.pid, "SIGTERM"));
  }
  const { run } = await import(pathToFileURL(entry).href);
  await run(args);
} else {
  // The child stops by itself if this process dies without passing a signal on (SIGKILL): it
  // watches that its parent is still the pid named here (util/host/host.ts, watchLauncher).
  const child = spawn(runtime[0], [...runtime.slice(1), entry, ...args], {
    stdio: "inherit",
    env: { ...process.env, TUNNELMUX_LAUNCHER_PID: String(process.pid) },
  });
  // Each signal is passed on as it comes; the program takes copies of one signal that arrive
  // together (Ctrl-C reaches both processes) as one.
  let stopping = false;
  for (const signal of ["SIGINT", "SIGTERM", "SIGHUP"]) {
    process.on(signal, () => {
      if (signal !== "SIGHUP") stopping = true;
      child.kill(signal);
    });
  }
  if (process.env.npm_lifecycle_event !== undefined) {
    watchNpm(() => stopping || child.kill("SIGTERM"));
  }
  child.on("error", (error) => {
    console.error(`tunnelmux: cannot start ${runtime[0]}: ${error.message}`);
    process.exit(1);
  });
  child.on("exit", (code, signal) => {
    process.exit(code ?? 128 + (constants.signals[signal] ?? 0));
  });
}

/**
 * Under `npm exec`/`npx` this process runs as npm → sh → node: npm passes SIGTERM and SIGINT to
 * the sh only, which dies of it without passing it on, and npm itself dies of SIGHUP. Either
 * way the wrapper would be left under init with the program listening: it calls `gone` once
 * its parent or its parent's parent is gone (polled; the timer does not keep it alive).
 */
function watchNpm(gone) {
  const watched = [process.ppid, parentOf(process.ppid)].filter((pid) => pid > 1);
  const parent = process.ppid;
  const timer = setInterval(() => {
    const alive = (pid) => {
      try {
        process.kill(pid, 0);
        return true;
      } catch (error) {
        return error.code === "EPERM";
      }
    };
    if (process.ppid === parent && watched.every(alive)) return;
    clearInterval(timer);
    gone();
  }, 250);
  timer.unref();
}

/** The parent pid of `pid` (Linux /proc, else ps), or 0 when it cannot be told. */
function parentOf(pid) {
  try {
    return Number(readFileSync(`/proc/${pid}/stat`, "utf8").replace(/^.*\) /s, "").split(" ")[1]);
  } catch {
    const ps = spawnSync("ps", ["-o", "ppid=", "-p", String(pid)], { encoding: "utf8" });
    return Number(ps.stdout?.trim()) || 0;
  }
}

/** The binary an npm package installs at `path` inside it, if it is there. */
function packageBinary(name, path) {
  try {
    const require = createRequire(join(root, "package.json"));
    const binary = join(dirname(require.resolve(`${name}/package.json`)), path);
    return existsSync(binary) ? binary : undefined;
  } catch {
    return undefined;
  }
}

/** How to run the entry on Bun, if the `bun` package is installed. */
function bunCommand() {
  const bun = packageBinary("bun", join("bin", "bun.exe"));
  return bun && [bun];
}

/** How to run the entry on Deno, if the `deno` package is installed. */
function denoCommand() {
  const deno = packageBinary("deno", process.platform === "win32" ? "deno.exe" : "deno");
  return deno &&
    [
      deno,
      "run",
      "--quiet",
      SEMI_SPACE,
      `--config=${join(root, "deno.json")}`,
      ...permissions(args[0]),
    ];
}

/** What each command may touch (Deno's permissions), no more. */
function permissions(command) {
  switch (command) {
    case "bench":
      return ["--allow-all"]; // it starts and measures other programs
    case "echo":
      return ["--allow-net", "--allow-env"];
    case "client":
      return ["--allow-net", "--allow-env", "--allow-read", "--allow-sys"];
    default: // daemon, check, healthcheck, token, version, help
      return ["--allow-net", "--allow-env", "--allow-read", "--allow-write", "--allow-sys"];
  }
}
