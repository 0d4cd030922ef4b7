// The runnable examples in examples/, run as users would, against a daemon process, so they
// cannot rot.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import process from "node:process";
import {
  cleanup,
  daemonConfig,
  type DaemonProcess,
  newToken,
  ROOT,
  runtimeArgs,
  startDaemon,
  startEchoServer,
  tcpRoundTrip,
  type TestServer,
  waitFor,
} from "../testing/mod.ts";

/**
 * Runs an example with the token in its environment. With `until`, the example is interrupted
 * (SIGINT) once `until` resolves, or killed if it fails.
 */
function runExample(
  file: string,
  args: string[],
  token: string,
  until?: (output: () => string) => Promise<void>,
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const child = spawn(process.execPath, runtimeArgs(file, args), {
    cwd: ROOT,
    env: { ...process.env, TUNNELMUX_TOKEN: token, NO_COLOR: "1" },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let stdout = "";
  let stderr = "";
  child.stdout!.setEncoding("utf8");
  child.stderr!.setEncoding("utf8");
  child.stdout!.on("data", (chunk: string) => stdout += chunk);
  child.stderr!.on("data", (chunk: string) => stderr += chunk);
  const killer = setTimeout(() => child.kill("SIGKILL"), 30_000);
  const done = new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) => {
    child.on("close", (code) => {
      clearTimeout(killer);
      resolve({ code, stdout, stderr });
    });
  });
  // process.kill, not child.kill: Deno's child.kill() reports a caught signal as a kill.
  const signal = (name: "SIGINT" | "SIGKILL") => child.pid && process.kill(child.pid, name);
  if (until) until(() => stdout).then(() => signal("SIGINT"), () => signal("SIGKILL"));
  return done;
}

describe("examples/", () => {
  let daemon: DaemonProcess;
  let echo: TestServer;
  const token = newToken("examples");
  before(async () => {
    echo = await startEchoServer();
    daemon = await startDaemon({
      config: daemonConfig([{ name: "examples", token, forward: [`127.0.0.1:${echo.port}`] }]),
    });
  });
  after(cleanup);

  it("forward.ts: a raw stream and a Web Streams stream through the daemon", async () => {
    const result = await runExample("examples/forward.ts", [
      daemon.tcpUrl,
      `127.0.0.1:${echo.port}`,
    ], token);
    assert.equal(result.code, 0, result.stderr);
    assert.match(result.stdout, /6 bytes from 127\.0\.0\.1:\d+/);
    assert.match(result.stdout, /12 bytes \(Web Streams\)/);
  });

  it("forward.ts: a refused target is reported in words", async () => {
    const result = await runExample("examples/forward.ts", [daemon.tcpUrl, "127.0.0.1:1"], token);
    assert.match(result.stderr, /NotAllowed/);
  });

  it("expose.ts: visitors of the announced port reach the local service", async () => {
    let checked = false;
    const result = await runExample(
      "examples/expose.ts",
      [daemon.wsUrl, `127.0.0.1:${echo.port}`],
      token,
      async (outputOf) => {
        let port = 0;
        await waitFor(() => {
          const match = /visitors of 127\.0\.0\.1:(\d+) reach/.exec(outputOf());
          port = match ? Number(match[1]) : 0;
          return port > 0;
        }, { timeoutMs: 20_000 });
        const bytes = new TextEncoder().encode("through the tunnel");
        assert.deepEqual(await tcpRoundTrip(port, bytes), bytes);
        checked = true;
      },
    );
    assert.equal(checked, true, result.stdout + result.stderr);
    assert.equal(result.code, 0, result.stderr);
  });
});
