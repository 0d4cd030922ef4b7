// The client run from a config file, as a service manager runs it: the token in a secret file,
// tunnels, forwards and offers listed in JSONC, every problem reported by its path at once, and
// SIGHUP (or, with --watch-config, the file's own change) applying the file's changes without
// dropping the session or the connections on tunnels that stay.
import { after, describe, it } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import process from "node:process";
import {
  baseEnv,
  cleanup,
  daemonConfig,
  DEFAULT_TIMEOUT_MS,
  newToken,
  probePort,
  runCommand,
  runtimeArgs,
  startClient,
  startDaemon,
  startEchoServer,
  tcpConnect,
  tcpRoundTrip,
  waitFor,
  withTimeout,
} from "../testing/mod.ts";

const dir = mkdtempSync(join(tmpdir(), "tunnelmux-client-config-"));
after(async () => {
  await cleanup();
  rmSync(dir, { recursive: true, force: true });
});

/** Writes the client's config file (JSONC: a comment included on purpose). */
function writeClientConfig(path: string, settings: Record<string, unknown>): void {
  writeFileSync(path, `// written by the test\n${JSON.stringify(settings, null, 2)}\n`);
}

describe("client config file", () => {
  it("reports every problem with its path, and exits 1 before dialing", async () => {
    const file = join(dir, "broken.jsonc");
    writeClientConfig(file, {
      server: "tcp://127.0.0.1:1",
      tokenFile: "no-such-file",
      expose: ["80x=127.0.0.1:3000"],
      forward: ["15432=nohost"],
      retries: 3,
    });
    const result = await runCommand(
      process.execPath,
      runtimeArgs("client/main.ts", ["--config", file]),
    );
    assert.equal(result.code, 1, result.stderr);
    assert.match(result.stderr, /client: 4 problems \(config .*broken\.jsonc\):/);
    assert.match(result.stderr, /^ {2}retries: unknown setting/m);
    assert.match(result.stderr, /^ {2}tokenFile: cannot read .*no-such-file/m);
    assert.match(result.stderr, /^ {2}expose\[0\]: bad port in "80x=127\.0\.0\.1:3000"/m);
    assert.match(result.stderr, /^ {2}forward\[0\]: bad target "nohost"/m);
  });

  it("runs from the file with its token in a secret file; SIGHUP adds and removes tunnels, and the session and open connections stay", async () => {
    const token = newToken("config");
    const daemon = await startDaemon({ config: daemonConfig([{ name: "laptop", token }]) });
    const echo = await startEchoServer();
    const other = await startEchoServer();
    writeFileSync(join(dir, "token"), `${token}\n`);
    const file = join(dir, "client.jsonc");
    const first = `0=127.0.0.1:${echo.port}`;
    const second = `0=127.0.0.1:${other.port}`;
    writeClientConfig(file, { server: daemon.tcpUrl, tokenFile: "token", expose: [first] });
    // No TUNNELMUX_TOKEN: the token comes from the file the config names (relative to it).
    const client = await startClient({
      server: daemon.tcpUrl,
      token: "",
      args: ["--config", file],
    });
    const { port: firstPort } = await client.waitForTunnel();
    const held = await tcpConnect(firstPort);
    const echoed = (socket: typeof held, text: string) =>
      new Promise<string>((resolve, reject) => {
        socket.once("data", (chunk: Buffer) => resolve(chunk.toString()));
        socket.once("error", reject);
        socket.write(text);
      });
    assert.equal(await echoed(held, "before"), "before");

    // Reload 1: a second tunnel; the first keeps its port and its open connection.
    let from = client.logs().length;
    writeClientConfig(file, { server: daemon.tcpUrl, tokenFile: "token", expose: [first, second] });
    client.signal("SIGHUP");
    await client.waitForLog((e) => e.msg === "configuration reloaded", 15_000, from);
    const { port: secondPort } = await client.waitForTunnel(from);
    assert.notEqual(secondPort, firstPort);
    assert.equal(await echoed(held, "during"), "during", "the open connection survived");
    assert.equal(
      client.logs().filter((e) => e.msg === "session ready").length,
      1,
      "one session all along",
    );

    // Reload 2: the first tunnel goes; its port closes, the second stays.
    from = client.logs().length;
    writeClientConfig(file, { server: daemon.tcpUrl, tokenFile: "token", expose: [second] });
    client.signal("SIGHUP");
    await client.waitForLog((e) => e.msg === "configuration reloaded", 15_000, from);
    await waitFor(async () => (await probePort(firstPort)) === "refused", "the first port closed");
    const socket = await tcpConnect(secondPort);
    assert.equal(await echoed(socket, "second"), "second");
    socket.destroy();

    // Reload 3: a broken file is refused, and what runs keeps running.
    from = client.logs().length;
    writeFileSync(file, "{ not json");
    client.signal("SIGHUP");
    await client.waitForLog(
      (e) => e.msg === "reload refused: keeping the running settings",
      15_000,
      from,
    );
    assert.equal(await probePort(secondPort), "accepted");
    held.destroy();
    echo.close();
    other.close();
  });

  it("--watch-config applies the file's changes with no signal (Windows has none), saved by a rename as editors do", async () => {
    const alone = await runCommand(
      process.execPath,
      runtimeArgs("client/main.ts", [
        "--server",
        "tcp://127.0.0.1:1",
        "--expose",
        "0=127.0.0.1:1",
        "--watch-config",
      ]),
      { env: { ...baseEnv(), TUNNELMUX_TOKEN: newToken("alone") } },
    );
    assert.equal(alone.code, 2, alone.stderr);
    assert.match(alone.stderr, /--watch-config needs a config file/);

    const token = newToken("watch");
    const daemon = await startDaemon({ config: daemonConfig([{ name: "laptop", token }]) });
    const echo = await startEchoServer();
    const other = await startEchoServer();
    const file = join(dir, "watched.jsonc");
    const first = `0=127.0.0.1:${echo.port}`;
    writeClientConfig(file, { server: daemon.tcpUrl, expose: [first] });
    const client = await startClient({
      server: daemon.tcpUrl,
      token,
      args: ["--config", file, "--watch-config"],
    });
    await client.waitForTunnel();
    const from = client.logs().length;
    writeClientConfig(`${file}.new`, {
      server: daemon.tcpUrl,
      expose: [first, `0=127.0.0.1:${other.port}`],
    });
    renameSync(`${file}.new`, file);
    await client.waitForLog((e) => e.msg === "configuration reloaded", 15_000, from);
    const { port } = await client.waitForTunnel(from);
    const bytes = new TextEncoder().encode("after the file changed");
    assert.deepEqual(await tcpRoundTrip(port, bytes), bytes);
    assert.equal(client.logs().filter((e) => e.msg === "session ready").length, 1);
    echo.close();
    other.close();
  });

  it("a changed visitors policy is sent in place: same tunnel, its visitor stays, the next meet it", async () => {
    const token = newToken("policy");
    const daemon = await startDaemon({ config: daemonConfig([{ name: "laptop", token }]) });
    const echo = await startEchoServer();
    const file = join(dir, "policy.jsonc");
    const expose = [`0=127.0.0.1:${echo.port}`];
    writeClientConfig(file, { server: daemon.tcpUrl, expose, visitors: { deny: ["127.0.0.3"] } });
    const client = await startClient({
      server: daemon.tcpUrl,
      token,
      args: ["--config", file, "--watch-config"],
    });
    const { port } = await client.waitForTunnel();
    /** Sends `text` from a socket and resolves what comes back before it echoes or closes. */
    const exchange = (socket: Awaited<ReturnType<typeof tcpConnect>>, text: string) =>
      withTimeout(
        new Promise<string>((resolve) => {
          let got = "";
          const onData = (d: Uint8Array) => {
            got += new TextDecoder().decode(d);
            if (got === text) (socket.off("data", onData), resolve(got));
          };
          socket.on("data", onData);
          // The daemon's close of a refused visitor arrives as an end (half-open sockets).
          socket.once("end", () => resolve(got));
          socket.once("close", () => resolve(got));
          socket.write(text);
        }),
        DEFAULT_TIMEOUT_MS,
        "an echo or a close",
      );
    const visit = async (from: string) => {
      const socket = await tcpConnect(port, "127.0.0.1", from);
      const got = await exchange(socket, "hi");
      socket.destroy();
      return got === "hi" ? "echo" : "closed";
    };
    assert.equal(await visit("127.0.0.2"), "echo");
    assert.equal(await visit("127.0.0.3"), "closed");
    const stays = await tcpConnect(port, "127.0.0.1", "127.0.0.2");
    assert.equal(await exchange(stays, "one"), "one");
    const from = client.logs().length;
    writeClientConfig(`${file}.new`, {
      server: daemon.tcpUrl,
      expose,
      visitors: { deny: ["127.0.0.2"] },
    });
    renameSync(`${file}.new`, file);
    await client.waitForLog((e) => e.msg === "visitor policy changed", 15_000, from);
    assert.equal(await visit("127.0.0.2"), "closed");
    assert.equal(await visit("127.0.0.3"), "echo");
    assert.equal(await exchange(stays, "two"), "two", "the connected visitor stays");
    assert.equal(client.logs().filter((e) => e.msg === "tunnel up").length, 1, "never re-exposed");
    stays.destroy();
    echo.close();
  });
});
