// End to end: `tunnelmux client --socks` as a process, in front of a daemon process, used by curl
// (skipped where curl is not installed) to reach an HTTP server on 127.0.0.1 by way of the daemon,
// and by the `socks` npm client for UDP ASSOCIATE to a UDP echo; and the command's own refusals of
// settings that would make an open proxy.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import process from "node:process";
import { Buffer } from "node:buffer";
import { execFile, spawnSync } from "node:child_process";
import type { Socket } from "node:net";
import { SocksClient } from "socks";
import { openUdp, type UdpSocket } from "../transport/udp.ts";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  baseEnv,
  cleanup,
  type ClientProcess,
  daemonConfig,
  type DaemonProcess,
  newToken,
  pattern,
  register,
  runCommand,
  runtimeArgs,
  startClient,
  startDaemon,
  startHttpServer,
  type TestServer,
  waitFor,
  withTimeout,
} from "../testing/mod.ts";

after(cleanup);

const HAVE_CURL = !spawnSync("curl", ["--version"]).error;

/** Runs curl with `args`; its exit code, stdout as bytes, and stderr. */
function curl(args: string[]): Promise<{ code: number; stdout: Buffer; stderr: string }> {
  return new Promise((resolve) => {
    execFile(
      "curl",
      ["-sS", "--max-time", "30", ...args],
      { encoding: "buffer", timeout: 60_000, maxBuffer: 64 * 1024 * 1024 },
      (error, stdout, stderr) => {
        const code = error ? Number((error as { code?: unknown }).code ?? -1) : 0;
        resolve({ code, stdout, stderr: stderr.toString() });
      },
    );
  });
}

/** The port of the client's "socks5 listening" line. */
async function socksPort(client: ClientProcess): Promise<number> {
  const entry = await client.waitForLog((e) => e.msg === "socks5 listening");
  return Number(String(entry.listen).split(":").pop());
}

describe("tunnelmux client --socks, used by curl", { skip: !HAVE_CURL && "curl is absent" }, () => {
  const token = newToken("socks");
  let web: TestServer;
  let daemon: DaemonProcess;
  let open: ClientProcess;
  let guarded: ClientProcess;
  before(async () => {
    web = await startHttpServer();
    daemon = await startDaemon({
      config: daemonConfig([{ name: "alice", token, forward: [`127.0.0.1:${web.port}`] }]),
    });
    open = await startClient({
      server: daemon.tcpUrl,
      token,
      args: ["--socks", "127.0.0.1:0"],
    });
    guarded = await startClient({
      server: daemon.tcpUrl,
      token,
      args: ["--socks", "127.0.0.1:0", "--socks-user", "alice"],
      env: { TUNNELMUX_SOCKS_PASSWORD: "correct horse" },
    });
  });
  after(async () => {
    await Promise.all([open.stop(), guarded.stop()]);
    await daemon.stop();
    await web.close();
  });

  it("reaches an allowlisted server with curl --socks5-hostname, a 4 MiB body intact", async () => {
    const port = await socksPort(open);
    const hello = await curl([
      "--socks5-hostname",
      `127.0.0.1:${port}`,
      `http://127.0.0.1:${web.port}/hello`,
    ]);
    assert.equal(hello.code, 0, hello.stderr);
    assert.equal(hello.stdout.toString(), "hello");
    const size = 4 * 1024 * 1024 + 3;
    const bulk = await curl([
      "--socks5-hostname",
      `127.0.0.1:${port}`,
      `http://127.0.0.1:${web.port}/bytes?n=${size}&seed=9`,
    ]);
    assert.equal(bulk.code, 0, bulk.stderr);
    assert.ok(bulk.stdout.equals(Buffer.from(pattern(size, 9))), "the body came through intact");
  });

  it("passes a name through unresolved, and the allowlist refuses it: reply 2", async () => {
    const port = await socksPort(open);
    const from = open.logs().length;
    // curl would resolve localhost itself to 127.0.0.1, which is allowlisted; the daemon gets the
    // name, and a host name never reaches loopback.
    const got = await curl([
      "--socks5-hostname",
      `127.0.0.1:${port}`,
      `http://localhost:${web.port}/hello`,
    ]);
    assert.equal(got.code, 97, got.stderr);
    assert.match(got.stderr, /connection to localhost\. \(2\)/);
    const warned = await open.waitForLog(
      (e) => /socks CONNECT localhost:/.test(e.msg ?? ""),
      15_000,
      from,
    );
    assert.match(String(warned.msg), /NotAllowed/);
  });

  it("asks for the username and password when set", async () => {
    const port = await socksPort(guarded);
    const url = `http://127.0.0.1:${web.port}/hello`;
    const right = await curl(["-x", `socks5h://alice:correct%20horse@127.0.0.1:${port}`, url]);
    assert.equal(right.code, 0, right.stderr);
    assert.equal(right.stdout.toString(), "hello");
    const wrong = await curl(["-x", `socks5h://alice:battery@127.0.0.1:${port}`, url]);
    assert.equal(wrong.code, 97, wrong.stderr);
    const none = await curl(["-x", `socks5h://127.0.0.1:${port}`, url]);
    assert.equal(none.code, 97, none.stderr);
  });

  it("takes a new password from its file on SIGHUP, and the old one no longer works", async () => {
    const dir = mkdtempSync(join(tmpdir(), "tunnelmux-socks-"));
    register(() => rmSync(dir, { recursive: true, force: true }));
    const file = join(dir, "client.jsonc");
    writeFileSync(join(dir, "socks-password"), "pw-one-7f3a\n");
    writeFileSync(
      file,
      JSON.stringify({
        socks: "127.0.0.1:0",
        socksUser: "bob",
        socksPasswordFile: "socks-password",
      }),
    );
    const client = await startClient({ server: daemon.tcpUrl, token, args: ["--config", file] });
    try {
      const url = `http://127.0.0.1:${web.port}/hello`;
      const first = await socksPort(client);
      const before = await curl(["-x", `socks5h://bob:pw-one-7f3a@127.0.0.1:${first}`, url]);
      assert.equal(before.stdout.toString(), "hello", before.stderr);
      const from = client.logs().length;
      writeFileSync(join(dir, "socks-password"), "pw-two-9c1e\n");
      client.signal("SIGHUP");
      await client.waitForLog((e) => e.msg === "configuration reloaded", 15_000, from);
      const entry = await client.waitForLog((e) => e.msg === "socks5 listening", 15_000, from);
      const port = Number(String(entry.listen).split(":").pop());
      const old = await curl(["-x", `socks5h://bob:pw-one-7f3a@127.0.0.1:${port}`, url]);
      assert.equal(old.code, 97, old.stderr);
      const now = await curl(["-x", `socks5h://bob:pw-two-9c1e@127.0.0.1:${port}`, url]);
      assert.equal(now.stdout.toString(), "hello", now.stderr);
      assert.ok(
        !client.stderr().includes("pw-one-7f3a") && !client.stderr().includes("pw-two-9c1e"),
        "the password is not logged",
      );
    } finally {
      await client.stop();
    }
  });
});

describe("tunnelmux client --socks, UDP ASSOCIATE from the socks client", () => {
  it("carries datagrams to an allowlisted UDP echo and back, until the TCP connection closes", async () => {
    const token = newToken("socks-udp");
    const echo: UdpSocket = await openUdp({
      onMessage: (bytes, remote) => echo.send(bytes, remote.hostname, remote.port),
    });
    register(() => echo.close());
    const got: Uint8Array[] = [];
    const mine = await openUdp({ onMessage: (bytes) => got.push(bytes) });
    register(() => mine.close());
    const daemon = await startDaemon({
      config: daemonConfig([{ name: "alice", token, forward: [`127.0.0.1:${echo.local.port}`] }]),
    });
    const client = await startClient({
      server: daemon.tcpUrl,
      token,
      args: ["--socks", "127.0.0.1:0"],
    });
    try {
      const socksClient = new SocksClient({
        proxy: { host: "127.0.0.1", port: await socksPort(client), type: 5 },
        command: "associate",
        destination: { host: "127.0.0.1", port: mine.local.port },
        timeout: 15_000,
      });
      const established = new Promise<{ control: Socket; relay: { host: string; port: number } }>(
        (resolve, reject) => {
          socksClient.once("established", ({ socket, remoteHost }) => {
            socket.on("data", () => {});
            socket.on("error", () => {});
            resolve({ control: socket, relay: remoteHost! });
          });
          socksClient.once("error", reject);
        },
      );
      socksClient.connect();
      const { control, relay } = await withTimeout(established, 20_000, "the association");
      const sizes = [1, 1200, 9000];
      for (const [i, size] of sizes.entries()) {
        const frame = SocksClient.createUDPFrame({
          remoteHost: { host: "127.0.0.1", port: echo.local.port },
          data: Buffer.from(pattern(size, i)),
        });
        mine.send(frame, relay.host, relay.port);
        await waitFor(() => got.length === i + 1, `the echo of ${size} bytes`);
        const back = SocksClient.parseUDPFrame(Buffer.from(got[i]));
        assert.deepEqual(back.remoteHost, { host: "127.0.0.1", port: echo.local.port });
        assert.ok(Buffer.from(back.data).equals(Buffer.from(pattern(size, i))), `${size} bytes`);
      }
      control.destroy();
      // The association ended with its connection: its relay port can be bound again.
      await waitFor(async () => {
        (await openUdp({ port: relay.port, onMessage: () => {} })).close();
        return true;
      }, "the relay port to be released");
    } finally {
      await client.stop();
      await daemon.stop();
    }
  });
});

describe("tunnelmux client --socks, refused settings", () => {
  const run = (args: string[]) => {
    const env = baseEnv();
    env.TUNNELMUX_TOKEN = "a-token-of-24-characters-or-more";
    return runCommand(process.execPath, runtimeArgs("client/main.ts", args), {
      env,
      timeoutMs: 60_000,
    });
  };

  it("refuses a public address without credentials before connecting, saying why", async () => {
    const result = await run(["--server", "tcp://127.0.0.1:9", "--socks", "0.0.0.0:0"]);
    assert.equal(result.code, 1);
    assert.match(result.stderr, /--socks: 0\.0\.0\.0:0 is not a loopback address/);
    assert.match(result.stderr, /TUNNELMUX_SOCKS_PASSWORD|username and password/);
  });

  it("takes a bare --socks as the default address, and refuses a password flag", async () => {
    // A username without its password: the settings fail before anything binds 1080.
    const bare = await run(["--server", "tcp://127.0.0.1:9", "--socks-user", "a", "--socks"]);
    assert.equal(bare.code, 1);
    assert.match(bare.stderr, /--socks-user: a SOCKS username needs its password/);
    const flag = await run(["--server", "tcp://127.0.0.1:9", "--socks", "--socks-password", "x"]);
    assert.equal(flag.code, 2);
    assert.match(flag.stderr, /TUNNELMUX_SOCKS_PASSWORD/);
  });
});
