/**
 * `npm run cluster`, run for real: two nodes on a NATS server it builds and starts. Killing one
 * node leaves the other and the tool running (failover can be tried), the tokens are the same
 * from one start to the next, and one Ctrl-C stops everything. It binds the fixed ports the tool
 * prints (710i, 718i, 719i, 709i).
 */

import { after, describe, it } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import process from "node:process";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { baseEnv, closedPort, probePort, ROOT, waitFor } from "../testing/mod.ts";
import { clusterSecrets } from "./local_cluster.ts";

const work = mkdtempSync(join(tmpdir(), "tunnelmux-local-cluster-"));
const groups: number[] = [];
after(() => {
  for (const group of groups) {
    try {
      process.kill(-group, "SIGKILL");
    } catch { /* gone */ }
  }
  rmSync(work, { recursive: true, force: true });
});

/** True while any process of the group `group` exists. */
function groupAlive(group: number): boolean {
  try {
    process.kill(-group, 0);
    return true;
  } catch {
    return false;
  }
}

describe("npm run cluster", () => {
  it("keeps its secrets from one start to the next", () => {
    const file = join(work, "secrets.json");
    const first = clusterSecrets(file);
    assert.deepEqual(clusterSecrets(file), first);
    assert.ok(first.token.length >= 24 && first.adminToken !== first.token);
  });

  it("one node killed leaves the others running; Ctrl-C stops them all", async () => {
    const deno = join(ROOT, "node_modules", ".bin", "deno");
    const natsPort = await closedPort();
    const args = ["run", "-A", "tools/local_cluster.ts", "--nodes", "2", "--nats-port"];
    const tool = spawn(deno, [...args, String(natsPort)], {
      cwd: ROOT,
      detached: true, // its own process group, as in a terminal
      stdio: ["ignore", "pipe", "pipe"],
      env: baseEnv(),
    });
    groups.push(tool.pid!);
    let out = "";
    tool.stdout!.setEncoding("utf8").on("data", (chunk: string) => out += chunk);
    tool.stderr!.setEncoding("utf8").on("data", (chunk: string) => out += chunk);
    const pids = await waitFor(() => {
      const found = [...out.matchAll(/^ {2}n\d: .* pid (\d+)$/gm)].map((m) => Number(m[1]));
      return found.length === 2 ? found : undefined;
    }, { timeoutMs: 300_000, message: `the cluster to start (output: ${out.slice(-1500)})` });
    assert.match(out, /Try: TUNNELMUX_TOKEN=\S+ npx tunnelmux client/);
    await waitFor(async () => await probePort(7102) === "accepted", "n2's TCP listener");
    process.kill(pids[0], "SIGKILL");
    await waitFor(() => /node n1 exited \(SIGKILL\); 1 still running/.test(out), {
      message: `the tool to report n1's death (output: ${out.slice(-800)})`,
    });
    assert.equal(tool.exitCode, null, "the tool is still running");
    assert.equal(await probePort(7102), "accepted", "n2 still listens");
    process.kill(-tool.pid!, "SIGINT");
    await waitFor(() => !groupAlive(tool.pid!), {
      timeoutMs: 40_000,
      message: `every process of the cluster to exit (output: ${out.slice(-800)})`,
    });
    assert.equal(await probePort(7102), "refused");
    assert.doesNotMatch(out, /second signal/, "one Ctrl-C drains once");
  });
});
