/**
 * `npm start` under a process manager: SIGTERM or SIGINT to npm must reach the daemon, which
 * drains and exits, leaving no process behind and its ports free (the start script execs the
 * daemon, and npm forwards signals to its child). Pre-scripts are skipped: `npm ci` would
 * reinstall node_modules under the tests running beside this one.
 */

import { after, describe, it } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import process from "node:process";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { baseEnv, probePort, startCommand, waitFor } from "../testing/mod.ts";

const dataDir = mkdtempSync(join(tmpdir(), "tunnelmux-npm-start-"));
after(() => rmSync(dataDir, { recursive: true, force: true }));

/** True while a process with `pid` exists. */
function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

describe("npm start", () => {
  for (const signal of ["SIGTERM", "SIGINT"] as const) {
    it(`${signal} to npm stops the daemon and frees its ports`, async () => {
      const npm = startCommand("npm", ["start", "--ignore-scripts", "--silent"], {
        env: {
          ...baseEnv(),
          TUNNELMUX_LISTEN_TCP: "127.0.0.1:0",
          TUNNELMUX_LISTEN_WS: "127.0.0.1:0",
          TUNNELMUX_LISTEN_ADMIN: "127.0.0.1:0",
          TUNNELMUX_DATA_DIR: dataDir,
          TUNNELMUX_LOG_FORMAT: "json",
        },
      });
      try {
        const tcp = (await npm.waitForStdout(/tunnels over TCP on 127\.0\.0\.1:(\d+)/))[1];
        const daemonPid = await waitFor(() => childOf(npm.child.pid!), "the daemon's pid");
        npm.signal(signal);
        await npm.exited;
        await waitFor(() => !alive(daemonPid), `the daemon (pid ${daemonPid}) to exit`);
        // Its last words may still be in the pipe when it is gone.
        await waitFor(() => /daemon stopped/.test(npm.stderr()), 'the daemon\'s "daemon stopped"');
        assert.equal(await probePort(Number(tcp)), "refused", "the tunnel port is free");
      } finally {
        npm.signal("SIGKILL");
      }
    });
  }
});

/** The pid of the (only) child of `pid`, from /proc. */
function childOf(pid: number): number | undefined {
  try {
    const children = readFileSync(`/proc/${pid}/task/${pid}/children`, "utf8").trim();
    return children ? Number(children.split(/\s+/)[0]) : undefined;
  } catch {
    return undefined;
  }
}
