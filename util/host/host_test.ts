import { describe, it } from "node:test";
import assert from "node:assert/strict";
import process from "node:process";
import { realpathSync } from "node:fs";
import { pathToFileURL } from "node:url";
import { spawn } from "node:child_process";
import {
  hostArgs,
  hostCwd,
  hostEnv,
  isMainModule,
  LAUNCHER_PID_ENV,
  nodeBuiltin,
  SIGNAL_REPEAT_MS,
  stderrIsTerminal,
} from "./host.ts";
import { runtimeArgs } from "../../testing/process.ts";
import { sleep, waitFor } from "../../testing/wait.ts";

/** Starts util/host/_host_signals.ts with `env` added; its stdout lines so far. */
async function signalsProgram(env: Record<string, string> = {}) {
  const child = spawn(process.execPath, runtimeArgs("util/host/_host_signals.ts"), {
    stdio: ["ignore", "pipe", "inherit"],
    env: { ...process.env, ...env },
  });
  let out = "";
  child.stdout!.setEncoding("utf8").on("data", (chunk: string) => out += chunk);
  const lines = () => out.split("\n").filter((line) => line !== "");
  await waitFor(() => lines().some((l) => l.startsWith("ready")), "the program to be ready");
  return { child, lines, count: (line: string) => lines().filter((l) => l === line).length };
}

describe("host", () => {
  it("answers what node:process answers for the environment and the working directory", () => {
    assert.equal(hostEnv().PATH, process.env.PATH);
    assert.equal(hostCwd(), process.cwd());
    assert.ok(Array.isArray(hostArgs()));
    assert.equal(typeof stderrIsTerminal(), "boolean");
  });

  it("loads a Node built-in when asked", () => {
    assert.equal(
      nodeBuiltin("node:crypto").createHash("sha1").update("x").digest("hex").length,
      40,
    );
  });

  it("takes import.meta.main where there is one, else compares the started script's file", () => {
    assert.equal(isMainModule({ main: true, url: "file:///elsewhere.js" } as ImportMeta), true);
    assert.equal(isMainModule({ main: false, url: import.meta.url } as ImportMeta), false);
    // Without `main` (Node 20): the module is the program when it is process.argv[1]'s file.
    const started = pathToFileURL(realpathSync(process.argv[1])).href;
    assert.equal(isMainModule({ url: started } as ImportMeta), true);
    assert.equal(isMainModule({ url: `${started}.other.js` } as ImportMeta), false);
  });

  it("takes a copy of SIGTERM within the window as one signal, and every SIGHUP", async () => {
    const program = await signalsProgram();
    try {
      const pid = program.child.pid!;
      // One at a time: the kernel merges a signal still pending with its copy.
      process.kill(pid, "SIGHUP");
      await waitFor(() => program.count("SIGHUP") === 1, "the first SIGHUP");
      process.kill(pid, "SIGHUP");
      await waitFor(() => program.count("SIGHUP") === 2, "a SIGHUP right after is taken too");
      process.kill(pid, "SIGTERM");
      const first = performance.now();
      await waitFor(() => program.count("SIGTERM") === 1, "the first SIGTERM");
      const copyAfter = performance.now() - first;
      process.kill(pid, "SIGTERM");
      await sleep(Math.max(0, first + SIGNAL_REPEAT_MS + 50 - performance.now()));
      // The copy was sent within the window unless this machine stalled for that long.
      if (copyAfter < SIGNAL_REPEAT_MS) {
        assert.equal(program.count("SIGTERM"), 1, "the copy was taken as the same signal");
      }
      process.kill(pid, "SIGTERM");
      await waitFor(
        () => program.count("SIGTERM") === (copyAfter < SIGNAL_REPEAT_MS ? 2 : 3),
        "a later SIGTERM is a second one",
      );
    } finally {
      program.child.kill("SIGKILL");
    }
  });

  it("watches the launcher it is given, and hides the variable from its own children", async () => {
    // Its parent is this process: the launcher is there.
    const kept = await signalsProgram({ [LAUNCHER_PID_ENV]: String(process.pid) });
    // A launcher that is not its parent (gone, the program now under another): it stops.
    const orphan = await signalsProgram({ [LAUNCHER_PID_ENV]: "1" });
    try {
      await waitFor(() => orphan.count("launcher gone") === 1, "the orphan to see it");
      assert.equal(kept.count("launcher gone"), 0);
      assert.equal(kept.lines()[0], "ready unset", "the variable is gone once read");
    } finally {
      kept.child.kill("SIGKILL");
      orphan.child.kill("SIGKILL");
    }
  });
});
