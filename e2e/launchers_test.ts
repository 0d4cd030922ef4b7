/**
 * Signals through the launchers the README starts the daemon with: `npm start` (npm → the
 * runtime), `npx tunnelmux daemon` (npm → sh → Node's bin/tunnelmux.mjs → the runtime),
 * `node_modules/.bin/tunnelmux daemon` (Node → the runtime) and `bunx --bun tunnelmux daemon`
 * (bun x → Bun running bin/tunnelmux.mjs). Each is started in its own process
 * group, as a terminal's foreground job is, and signalled the way a terminal (the whole group) or
 * a process manager (the launcher's pid) does. The daemon must act on each signal once, and when
 * it stops, nothing of the group may be left and its port must be free.
 */

import { after, describe, it } from "node:test";
import assert from "node:assert/strict";
import { type ChildProcess, spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import process from "node:process";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { connect } from "../client/mod.ts";
import {
  baseEnv,
  probePort,
  ROOT,
  sleep,
  startEchoServer,
  tcpConnect,
  waitFor,
  withTimeout,
} from "../testing/mod.ts";
import type { Socket } from "node:net";
import { SIGNAL_REPEAT_MS } from "../util/host/host.ts";

const TOKEN = "launcher-test-token-0123456789";
const dataDir = mkdtempSync(join(tmpdir(), "tunnelmux-launchers-"));
const groups: number[] = [];
after(() => {
  for (const group of groups) signalGroup(group, "SIGKILL");
  rmSync(dataDir, { recursive: true, force: true });
});

/** Sends `signal` to every process of the group `group` (nothing if it is empty). */
function signalGroup(group: number, signal: NodeJS.Signals): void {
  try {
    process.kill(-group, signal);
  } catch { /* the group is empty */ }
}

/** True while any process of the group `group` exists. */
function groupAlive(group: number): boolean {
  try {
    process.kill(-group, 0);
    return true;
  } catch (error) {
    return (error as { code?: string }).code === "EPERM";
  }
}

/** A launcher running the daemon, leading its own process group. */
interface Launched {
  child: ChildProcess;
  /** The tunnel port the daemon announced. */
  port: number;
  /** The `msg` of each JSON log line so far. */
  messages(): string[];
  /** How many log lines had the message `msg`. */
  count(msg: string): number;
}

/** Starts `command args` (a README way of starting the daemon) in a new process group. */
async function launch(command: string, args: string[]): Promise<Launched> {
  const child = spawn(command, args, {
    cwd: ROOT,
    detached: true, // its own process group, as a shell's foreground job
    stdio: ["ignore", "pipe", "pipe"],
    env: {
      ...baseEnv(),
      TUNNELMUX_LISTEN_TCP: "127.0.0.1:0",
      TUNNELMUX_LISTEN_WS: "127.0.0.1:0",
      TUNNELMUX_LISTEN_ADMIN: "127.0.0.1:0",
      TUNNELMUX_DATA_DIR: dataDir,
      TUNNELMUX_LOG_FORMAT: "json",
      TUNNELMUX_TOKEN: TOKEN,
      TUNNELMUX_ADMIN_TOKEN: "launcher-test-admin-0123456789",
    },
  });
  groups.push(child.pid!);
  let stdout = "";
  let stderr = "";
  child.stdout!.setEncoding("utf8").on("data", (chunk: string) => stdout += chunk);
  child.stderr!.setEncoding("utf8").on("data", (chunk: string) => stderr += chunk);
  const messages = () =>
    stderr.split("\n").flatMap((line) => {
      try {
        return [JSON.parse(line).msg as string];
      } catch {
        return [];
      }
    });
  const port = await waitFor(() => /tunnels over TCP on 127\.0\.0\.1:(\d+)/.exec(stdout)?.[1], {
    timeoutMs: 60_000,
    message: `the daemon under ${command} to listen (stderr: ${stderr.slice(-600)})`,
  });
  return {
    child,
    port: Number(port),
    messages,
    count: (msg) => messages().filter((m) => m === msg).length,
  };
}

/** Waits until no process of the launcher's group is left, then checks its port is free. */
async function gone(launched: Launched, what: string): Promise<void> {
  const group = launched.child.pid!;
  await waitFor(() => !groupAlive(group), {
    timeoutMs: 20_000,
    message: `${what}: every process of the group to exit (log: ${launched.messages()})`,
  });
  assert.equal(await probePort(launched.port), "refused", `${what}: the tunnel port is free`);
  assert.equal(launched.count("daemon stopped"), 1, `${what}: the daemon stopped`);
}

/** A visitor of `port` whose stream reaches the echo service (one byte went there and back). */
async function echoing(port: number): Promise<Socket> {
  const visitor = await tcpConnect(port);
  const back = new Promise((resolve) => visitor.once("data", resolve));
  visitor.write("x");
  await withTimeout(back, 15_000, "the visitor's byte back through the tunnel");
  return visitor;
}

/**
 * Sends one Ctrl-C (SIGINT to the launcher's whole group) while a visitor's stream is in flight,
 * which keeps the drain open so a copy of the signal acted on would stop the daemon at once
 * ("second signal"); checks it drained once and went.
 */
async function oneCtrlC(daemon: Awaited<ReturnType<typeof launch>>, what: string): Promise<void> {
  const echo = await startEchoServer();
  const client = await connect(`tcp://127.0.0.1:${daemon.port}`, { token: TOKEN });
  const tunnel = await client.expose({ local: `127.0.0.1:${echo.port}`, remotePort: 0 });
  const visitor = await echoing(tunnel.remotePort);
  try {
    signalGroup(daemon.child.pid!, "SIGINT");
    await waitFor(() => daemon.count("draining") === 1, "the drain to start");
    // The launcher's copy of the SIGINT arrives within milliseconds.
    await sleep(SIGNAL_REPEAT_MS * 2);
    assert.equal(daemon.count("daemon stopped"), 0, "still draining for its visitor");
  } finally {
    visitor.destroy();
    await client.close();
    await echo.close();
  }
  await gone(daemon, what);
  assert.equal(daemon.count("signal: draining"), 1);
  assert.equal(daemon.count("second signal: stopping now"), 0, "the copy was taken as one");
}

const NPM_START = ["npm", ["start", "--ignore-scripts", "--silent"]] as const;
const NPX = ["npx", ["tunnelmux", "daemon"]] as const;
const BUNX = [join(ROOT, "node_modules", ".bin", "bun"), [
  "x",
  "--bun",
  "tunnelmux",
  "daemon",
]] as const;
const BIN = ["node", [join(ROOT, "node_modules", ".bin", "tunnelmux"), "daemon"]] as const;

describe("signals through the launchers", () => {
  it("npm start: one Ctrl-C (SIGINT to the whole group) drains once", async () => {
    await oneCtrlC(await launch(NPM_START[0], [...NPM_START[1]]), "npm start, Ctrl-C");
  });

  it("npm start: SIGHUP to npm (which dies of it) leaves no daemon behind", async () => {
    const daemon = await launch(NPM_START[0], [...NPM_START[1]]);
    process.kill(daemon.child.pid!, "SIGHUP");
    await gone(daemon, "npm start, SIGHUP to npm");
    assert.equal(daemon.count("launcher gone: draining"), 1);
  });

  it("npx tunnelmux daemon: SIGTERM to npm drains once and leaves nothing", async () => {
    const daemon = await launch(NPX[0], [...NPX[1]]);
    process.kill(daemon.child.pid!, "SIGTERM");
    await gone(daemon, "npx, SIGTERM to npm");
    assert.equal(daemon.count("signal: draining"), 1);
  });

  it("bin/tunnelmux.mjs: SIGHUP reloads once, SIGTERM drains once", async () => {
    const daemon = await launch(BIN[0], [...BIN[1]]);
    process.kill(daemon.child.pid!, "SIGHUP");
    await waitFor(() => daemon.count("configuration reloaded") === 1, "a reload");
    process.kill(daemon.child.pid!, "SIGTERM");
    await gone(daemon, "bin, SIGTERM");
    assert.equal(daemon.count("configuration reloaded"), 1, "the hangup reloaded once");
    assert.equal(daemon.count("signal: draining"), 1);
    assert.equal(daemon.count("second signal: stopping now"), 0);
  });

  it("bin/tunnelmux.mjs: one Ctrl-C (SIGINT to node and the runtime) drains once", async () => {
    await oneCtrlC(await launch(BIN[0], [...BIN[1]]), "bin, Ctrl-C");
  });

  it("bunx --bun tunnelmux daemon: SIGHUP to bunx reloads, SIGTERM drains once", async () => {
    const daemon = await launch(BUNX[0], [...BUNX[1]]);
    process.kill(daemon.child.pid!, "SIGHUP");
    await waitFor(() => daemon.count("configuration reloaded") === 1, "a reload");
    process.kill(daemon.child.pid!, "SIGTERM");
    await gone(daemon, "bunx, SIGTERM");
    assert.equal(daemon.count("signal: draining"), 1);
  });

  it("bin/tunnelmux.mjs: Node SIGKILLed, the daemon drains and stops", async () => {
    const daemon = await launch(BIN[0], [...BIN[1]]);
    process.kill(daemon.child.pid!, "SIGKILL");
    await gone(daemon, "bin, SIGKILL to node");
    assert.equal(daemon.count("launcher gone: draining"), 1);
  });

  it("bin/tunnelmux.mjs echo: Node SIGKILLed, the echo server ends too", async () => {
    const child = spawn("node", [
      join(ROOT, "bin", "tunnelmux.mjs"),
      "echo",
      "--listen",
      "127.0.0.1:0",
    ], {
      cwd: ROOT,
      detached: true,
      stdio: ["ignore", "pipe", "ignore"],
      env: baseEnv(),
    });
    groups.push(child.pid!);
    let out = "";
    child.stdout!.setEncoding("utf8").on("data", (chunk: string) => out += chunk);
    const port = await waitFor(() => /listening on 127\.0\.0\.1:(\d+)/.exec(out)?.[1], "echo");
    process.kill(child.pid!, "SIGKILL");
    await waitFor(() => !groupAlive(child.pid!), "the echo server to end with its launcher");
    assert.equal(await probePort(Number(port)), "refused");
  });
});
