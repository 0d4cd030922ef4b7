// The runnable examples in examples/, run as users would, against a daemon process, so they
// cannot rot.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import process from "node:process";
import {
  baseEnv,
  cleanup,
  daemonConfig,
  type DaemonProcess,
  newToken,
  runtimeArgs,
  startCommand,
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
async function runExample(
  file: string,
  args: string[],
  token: string,
  until?: (output: () => string) => Promise<void>,
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const example = startCommand(process.execPath, runtimeArgs(file, args), {
    env: { ...baseEnv(), TUNNELMUX_TOKEN: token },
  });
  const killer = setTimeout(() => example.signal("SIGKILL"), 30_000);
  if (until) {
    until(example.stdout).then(() => example.signal("SIGINT"), () => example.signal("SIGKILL"));
  }
  const code = await example.exited;
  clearTimeout(killer);
  return { code, stdout: example.stdout(), stderr: example.stderr() };
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

  it("expose.ts without TUNNELMUX_TOKEN fails at once, saying the token is empty", async () => {
    const result = await runExample(
      "examples/expose.ts",
      [daemon.tcpUrl, `127.0.0.1:${echo.port}`],
      "",
    );
    assert.notEqual(result.code, 0);
    assert.match(result.stderr, /token is empty/);
  });
});
