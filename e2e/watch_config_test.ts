// The daemon's --watch-config: its config file's changes applied when the file is saved, as
// SIGHUP applies them, for Windows, which has no SIGHUP (the client's own: client_config_test.ts).
import { after, describe, it } from "node:test";
import assert from "node:assert/strict";
import process from "node:process";
import {
  baseEnv,
  cleanup,
  daemonConfig,
  newToken,
  runCommand,
  runtimeArgs,
  startClient,
  startDaemon,
  startEchoServer,
  tcpRoundTrip,
} from "../testing/mod.ts";

after(cleanup);

describe("daemon --watch-config", () => {
  it("needs a config file", async () => {
    const alone = await runCommand(
      process.execPath,
      runtimeArgs("daemon/main.ts", ["--listen-tcp", "127.0.0.1:0", "--watch-config"]),
      { env: baseEnv() },
    );
    assert.equal(alone.code, 2, alone.stderr);
    assert.match(alone.stderr, /--watch-config needs a config file/);
  });

  it("a client added to the saved file connects, with no signal sent", async () => {
    const [first, second] = [newToken("first"), newToken("second")];
    const daemon = await startDaemon({
      config: daemonConfig([{ name: "first", token: first }]),
      args: ["--watch-config"],
    });
    await daemon.waitForLog((e) => e.msg === "watching the config file for changes");
    const from = daemon.logs().length;
    daemon.writeConfig(
      daemonConfig([{ name: "first", token: first }, { name: "second", token: second }]),
    );
    const reloaded = await daemon.waitForLog(
      (e) => e.msg === "configuration reloaded",
      15_000,
      from,
    );
    assert.equal(reloaded.clients, 2);
    const echo = await startEchoServer();
    const client = await startClient({
      server: daemon.tcpUrl,
      token: second,
      args: ["--expose", `0=127.0.0.1:${echo.port}`],
    });
    const { port } = await client.waitForTunnel();
    const bytes = new TextEncoder().encode("a client the file added");
    assert.deepEqual(await tcpRoundTrip(port, bytes), bytes);
    echo.close();
  });
});
