#!/usr/bin/env node
// The `tunnelmux` command as npm and Bun install it (`npx tunnelmux …`, `bunx tunnelmux …`, a
// global install). Started by Bun, it runs cli/main.ts in this process. Started by Node, it runs
// cli/main.ts in a child: on Bun (the pinned `bun` npm package) when tunnelmux is an installed
// package (Deno does not run TypeScript from under node_modules), on Deno (the `deno` package,
// with the permissions the command needs) in a checkout. Signals are passed on (a process
// manager's SIGTERM drains the daemon) and the child's exit code is ours.
import { spawn, spawnSync } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { constants } from "node:os";
import { createRequire } from "node:module";
import { dirname, join, sep } from "node:path";
import { fileURLToPath } from "node:url";

/**
 * A 2 MiB young generation (V8's default grows to 16 MiB): the daemon's RSS after 2000 short
 * connections 82 → 72 MiB and its peak during a 256 MiB transfer 154 → 137 MiB, for 2–3 % more CPU
 * (docs/performance.md). The same flag is in `npm start`, the deno tasks and the Dockerfile.
 */
const SEMI_SPACE = "--v8-flags=--max-semi-space-size=2";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const entry = join(root, "cli", "main.ts");
const args = process.argv.slice(2);

if (process.versions.bun) {
  const { run } = await import(entry);
  await run(args);
} else {
  const installed = root.split(sep).includes("node_modules");
  const runtime = installed ? bunCommand() : denoCommand() ?? bunCommand();
  if (!runtime) {
    console.error(
      "tunnelmux: neither the bun nor the deno npm package is installed next to tunnelmux " +
        "(npm install bun)",
    );
    process.exit(1);
  }
  // The child stops by itself if this process dies without passing a signal on (SIGKILL): it
  // watches that its parent is still the pid named here (util/host.ts, watchLauncher).
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
