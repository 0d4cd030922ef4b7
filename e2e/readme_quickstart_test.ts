/**
 * The README's quickstart, run exactly as written: its `sh` block is read from README.md, each
 * command but the last started in its own process group (a terminal of its own), the last one run
 * until it prints what the README says it prints. Then one Ctrl-C to each: all of them stop, the
 * daemon drains once, and the ports are free. It binds the fixed ports the quickstart names (the
 * daemon's defaults 7000, 7080 and 7081, and 3000 and 8080).
 */

import { after, describe, it } from "node:test";
import assert from "node:assert/strict";
import { type ChildProcess, spawn, spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import process from "node:process";
import { join } from "node:path";
import { baseEnv, probePort, ROOT, waitFor } from "../testing/mod.ts";

const started: ChildProcess[] = [];
after(() => {
  for (const child of started) signalGroup(child, "SIGKILL");
});

/** Sends `signal` to the process group `child` leads (nothing if it is empty). */
function signalGroup(child: ChildProcess, signal: NodeJS.Signals): void {
  try {
    process.kill(-child.pid!, signal);
  } catch { /* the group is empty */ }
}

/** True while any process of the group `child` leads exists. */
function groupAlive(child: ChildProcess): boolean {
  try {
    process.kill(-child.pid!, 0);
    return true;
  } catch {
    return false;
  }
}

/** The quickstart's commands and what its last one prints, from README.md. */
function quickstart(readme: string): { commands: string[]; prints: string } {
  const section = readme.split(/^## Quickstart\n/m)[1]?.split(/^## /m)[0];
  assert.ok(section, "README.md has a Quickstart section");
  const block = /```sh\n([\s\S]*?)```/.exec(section)?.[1];
  assert.ok(block, "the Quickstart has a sh block");
  const lines = block.split("\n").filter((line) => line.trim() !== "");
  const prints = /prints: (.+)$/.exec(lines.filter((l) => l.startsWith("#")).at(-1) ?? "")?.[1];
  assert.ok(prints, "the last step says what it prints");
  return { commands: lines.filter((line) => !line.startsWith("#")), prints };
}

describe("the README's quickstart", () => {
  it("works as written", async () => {
    const { commands, prints } = quickstart(readFileSync(join(ROOT, "README.md"), "utf8"));
    assert.ok(commands.length >= 2, "a few commands");
    for (const port of [7000, 7080, 7081, 3000, 8080]) {
      assert.equal(await probePort(port), "refused", `port ${port}, which it uses, is free`);
    }
    const outputs: string[] = [];
    for (const command of commands.slice(0, -1)) {
      const child = spawn("sh", ["-c", command], {
        cwd: ROOT,
        detached: true, // a terminal of its own: its own process group
        stdio: ["ignore", "pipe", "pipe"],
        env: baseEnv(),
      });
      started.push(child);
      const at = outputs.push("") - 1;
      child.stdout!.setEncoding("utf8").on("data", (chunk: string) => outputs[at] += chunk);
      child.stderr!.setEncoding("utf8").on("data", (chunk: string) => outputs[at] += chunk);
    }
    const last = commands.at(-1)!;
    const visit = () => spawnSync("sh", ["-c", last], { cwd: ROOT, encoding: "utf8" });
    let got = "";
    await waitFor(() => {
      got = visit().stdout ?? "";
      return got.trim() === prints;
    }, {
      timeoutMs: 120_000,
      intervalMs: 500,
      message: `"${last}" to print "${prints}" (last: "${got}"; output of the others:\n${
        outputs.map((o) => o.slice(-600)).join("\n--\n")
      })`,
    });
    // One Ctrl-C in each terminal.
    for (const child of started) signalGroup(child, "SIGINT");
    for (const child of started) {
      await waitFor(() => !groupAlive(child), {
        timeoutMs: 40_000,
        message: `every process started by "${child.spawnargs.at(-1)}" to exit`,
      });
    }
    const daemonLog = outputs[0];
    assert.equal(daemonLog.match(/"msg":"signal: draining"/g)?.length, 1, daemonLog.slice(-800));
    assert.doesNotMatch(daemonLog, /second signal/);
    for (const port of [7000, 7080, 7081, 3000, 8080]) {
      assert.equal(await probePort(port), "refused", `port ${port} is free again`);
    }
  });
});
