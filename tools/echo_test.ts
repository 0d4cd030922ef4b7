// The echo tool as users run it: a separate process under the runtime running this test.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { type ChildProcess, spawn } from "node:child_process";
import process from "node:process";
import { fileURLToPath } from "node:url";
import { runGoClient, startGoServer } from "../interop/go_peer.ts";

const ECHO = fileURLToPath(new URL("./echo.ts", import.meta.url));
const RUNTIME_ARGS = "Deno" in globalThis ? ["run", "-A", ECHO] : [ECHO];

function echoProcess(args: string[]): ChildProcess {
  return spawn(process.execPath, [...RUNTIME_ARGS, ...args], { stdio: ["ignore", "pipe", "pipe"] });
}

/** Runs the tool to completion and returns its exit code and output. */
function runEcho(args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = echoProcess(args);
    let stdout = "";
    let stderr = "";
    child.stdout!.on("data", (chunk) => stdout += chunk);
    child.stderr!.on("data", (chunk) => stderr += chunk);
    const timer = setTimeout(() => child.kill("SIGKILL"), 60_000);
    child.on("error", reject);
    child.on("close", (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

/** Starts the echo server and resolves with its port once it printed `listening on`. */
function startEchoServer(): Promise<{ port: number; child: ChildProcess }> {
  return new Promise((resolve, reject) => {
    const child = echoProcess(["--listen", "127.0.0.1:0", "--quiet"]);
    let stdout = "";
    const timer = setTimeout(() => {
      child.kill("SIGKILL");
      reject(new Error(`no "listening on" line: ${stdout}`));
    }, 30_000);
    child.stdout!.on("data", (chunk) => {
      stdout += chunk;
      const match = /^listening on 127\.0\.0\.1:(\d+)$/m.exec(stdout);
      if (match) {
        clearTimeout(timer);
        resolve({ port: Number(match[1]), child });
      }
    });
    child.on("exit", (code) => reject(new Error(`echo exited early (${code}): ${stdout}`)));
  });
}

describe("echo tool (separate process)", () => {
  let server: { port: number; child: ChildProcess };
  before(async () => server = await startEchoServer());
  after(() => server.child.kill("SIGTERM"));

  it("serves a hashicorp/yamux client", async () => {
    const summary = await runGoClient("hashicorp", [
      "-connect",
      `127.0.0.1:${server.port}`,
      "-scenario",
      "concurrent",
      "-count",
      "50",
      "-max-size",
      "65536",
    ]);
    assert.equal(summary.streams, 50);
  });

  it("--connect checks our own server and prints one JSON line", async () => {
    const result = await runEcho(["--connect", `127.0.0.1:${server.port}`, "--streams", "40"]);
    assert.equal(result.code, 0, result.stderr);
    const summary = JSON.parse(result.stdout.trim());
    assert.equal(summary.ok, true);
    assert.equal(summary.streams, 40);
  });

  it("--connect checks a foreign (go-yamux) server", async () => {
    const go = await startGoServer("goyamux", []);
    try {
      const result = await runEcho([
        "--connect",
        go.address,
        "--streams",
        "40",
        "--max-size",
        "200000",
      ]);
      assert.equal(result.code, 0, result.stderr);
      assert.equal(JSON.parse(result.stdout.trim()).streams, 40);
    } finally {
      await go.close();
    }
  });

  it("--connect to a closed port fails with exit 1 and a message", async () => {
    const result = await runEcho(["--connect", "127.0.0.1:1", "--streams", "1"]);
    assert.notEqual(result.code, 0);
    assert.match(result.stderr, /echo/);
  });

  it("--help prints usage; a bad address exits 2", async () => {
    const help = await runEcho(["--help"]);
    assert.equal(help.code, 0);
    assert.match(help.stdout, /--listen HOST:PORT/);
    const bad = await runEcho(["--listen", "nowhere"]);
    assert.equal(bad.code, 2);
    assert.match(bad.stderr, /HOST:PORT/);
  });
});
