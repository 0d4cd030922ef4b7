// The first minutes of a user: a mistyped flag, a flag that does not exist, a URL pointed at the
// wrong thing, a tunnel another client holds. Each is named in one line, and the exit status says
// what happened.
import { after, describe, it } from "node:test";
import assert from "node:assert/strict";
import process from "node:process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { hasOpenssl, makeTestIdentity } from "../transport/_test_certificate.ts";
import { request } from "node:http";
import { connect } from "../client/mod.ts";
import { portOf, startDaemonInProcess } from "./_in_process_daemon.ts";
import {
  baseEnv,
  cleanup,
  closedPort,
  daemonConfig,
  type LogEntry,
  newToken,
  runCommand,
  runtimeArgs,
  startClient,
  startDaemon,
  startHttpServer,
  startTcpServer,
  waitFor,
} from "../testing/mod.ts";

after(cleanup);

/** Runs `file args` under this runtime to its end, the token (if any) in the environment. */
function run(file: string, args: string[], token?: string) {
  const env = baseEnv();
  if (token !== undefined) env.TUNNELMUX_TOKEN = token;
  return runCommand(process.execPath, runtimeArgs(file, args), { env, timeoutMs: 60_000 });
}

/** The client's JSON log lines on `stderr` (anything else is left out). */
function logLines(stderr: string): LogEntry[] {
  return stderr.split("\n").flatMap((line) => {
    try {
      return [JSON.parse(line) as LogEntry];
    } catch {
      return [];
    }
  });
}

/** Runs the client against `server` until it exits; its code and its error-level lines. */
async function clientAt(server: string, token: string, extra: string[] = []) {
  const result = await run("client/main.ts", [
    "--server",
    server,
    "--log-format",
    "json",
    "--expose",
    "0=127.0.0.1:1",
    ...extra,
  ], token);
  const errors = logLines(result.stderr).filter((e) => e.level === "error").map((e) => e.msg);
  return { ...result, errors };
}

describe("flags", () => {
  it("a mistyped flag is answered with the flag meant, in one line, exit 2", async () => {
    const client = await run("client/main.ts", [
      "--server",
      "tcp://127.0.0.1:1",
      "--expsoe",
      "1=127.0.0.1:2",
    ]);
    assert.equal(client.code, 2, client.stderr);
    assert.equal(
      client.stderr.trim(),
      "client: unknown option --expsoe (did you mean --expose?) (see tunnelmux client --help)",
    );
    const daemon = await run("daemon/main.ts", ["--listen-tpc", "127.0.0.1:0"]);
    assert.equal(daemon.code, 2, daemon.stderr);
    assert.equal(
      daemon.stderr.trim(),
      "daemon: unknown option --listen-tpc (did you mean --listen-tcp?) (see tunnelmux daemon --help)",
      "one line, not the whole help",
    );
    const command = await run("daemon/main.ts", ["chekc"]);
    assert.equal(command.code, 2, command.stderr);
    assert.match(
      command.stderr.trim(),
      /^daemon: unknown command "chekc" \(did you mean "check"\?\)[^\n]*$/,
    );
  });

  it("--token points to TUNNELMUX_TOKEN and --token-file", async () => {
    const daemon = await run("daemon/main.ts", ["--token=abc"]);
    assert.equal(daemon.code, 2, daemon.stderr);
    assert.match(daemon.stderr, /^daemon: unknown option --token: .*TUNNELMUX_TOKEN/);
    const result = await run("client/main.ts", ["--server", "tcp://127.0.0.1:1", "--token", "abc"]);
    assert.equal(result.code, 2, result.stderr);
    assert.match(
      result.stderr,
      /^client: unknown option --token: .*TUNNELMUX_TOKEN.*--token-file FILE/,
    );
  });

  it("the usage lines name the command as it is typed", async () => {
    const daemon = await run("daemon/main.ts", ["--help"]);
    assert.match(daemon.stdout, /^ {2}tunnelmux daemon \[options\] /m);
    const client = await run("client/main.ts", ["--help"]);
    assert.match(client.stdout, /^ {2}tunnelmux client --server URL \[options\]$/m);
  });
});

describe("connecting to the wrong thing", () => {
  it("each wrong listener is named once with the URL to use, and the client exits 1 at once", async () => {
    const token = newToken("mistakes");
    const daemon = await startDaemon({
      config: daemonConfig([{ name: "laptop", token }]),
      args: ["--listen-admin", "127.0.0.1:0"],
    });
    const admin = await waitFor(() => /admin API on http:\/\/(\S+)/.exec(daemon.stdout())?.[1], {
      timeoutMs: 30_000,
      message: "the admin address",
    });
    const tcp = daemon.tcpAddress;
    const ws = daemon.wsAddress;
    const cases: [string, RegExp][] = [
      [`tcp://${ws}`, new RegExp(`answered in HTTP: .*use ws://${ws}/tunnel`)],
      [
        `ws://${tcp}/tunnel`,
        new RegExp(`TCP \\(yamux\\) listener, not a WebSocket one: use tcp://${tcp}$`),
      ],
      [`ws://${admin}/tunnel`, /answered HTTP 401: this looks like the admin API port/],
      [`tls://${tcp}`, new RegExp(`did not answer in TLS: .*use tcp://${tcp} \\(`)],
      [`wss://${ws}/tunnel`, new RegExp(`did not answer in TLS: .*use ws://${ws}/tunnel$`)],
    ];
    const results = await Promise.all(cases.map(([url]) => clientAt(url, token)));
    cases.forEach(([url, expected], i) => {
      const { code, errors, stderr } = results[i];
      assert.equal(code, 1, `${url}: ${stderr}`);
      assert.equal(errors.length, 1, `${url}: one error line, got ${stderr}`);
      assert.match(String(errors[0]), expected, url);
    });
  });

  it("tcp:// at a TLS listener names tls://", {
    skip: hasOpenssl ? false : "openssl is not installed",
  }, async () => {
    const identity = makeTestIdentity();
    const dir = mkdtempSync(join(tmpdir(), "tunnelmux-mistakes-tls-"));
    try {
      writeFileSync(join(dir, "cert.pem"), identity.cert);
      writeFileSync(join(dir, "key.pem"), identity.key);
      const token = newToken("tls");
      const daemon = await startDaemonInProcess({
        listen: { tcp: "127.0.0.1:0", websocket: null, admin: null },
        tls: { cert: join(dir, "cert.pem"), key: join(dir, "key.pem") },
        clients: [{ name: "laptop", token }],
      });
      const address = daemon.addresses.tcp!;
      try {
        const { code, errors, stderr } = await clientAt(`tcp://${address}`, token);
        assert.equal(code, 1, stderr);
        assert.equal(errors.length, 1, stderr);
        assert.match(String(errors[0]), new RegExp(`use tls://${address}$`));
      } finally {
        daemon.stop();
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("a server that accepts and never answers (an HTTP server waiting for a request) is named", async () => {
    const silent = await startTcpServer((socket) => socket.on("data", () => {}));
    try {
      const { code, errors, stderr } = await clientAt(`tcp://${silent.address}`, newToken());
      assert.equal(code, 1, stderr);
      assert.equal(errors.length, 1, stderr);
      assert.match(String(errors[0]), /never answered: it is not a tunnelmux TCP listener/);
    } finally {
      await silent.close();
    }
  });

  it("a daemon not running: retried until --ready-timeout-ms, then exit 1 naming the last error", async () => {
    const port = await closedPort();
    const { code, errors, stderr } = await clientAt(`tcp://127.0.0.1:${port}`, newToken(), [
      "--ready-timeout-ms",
      "1500",
    ]);
    assert.equal(code, 1, stderr);
    assert.equal(errors.length, 1, stderr);
    assert.match(
      String(errors[0]),
      /^no session with tcp:\/\/127\.0\.0\.1:\d+ within 1500 ms \(last error: cannot reach /,
    );
    const retries = logLines(stderr).filter((e) => e.msg === "state: backoff").length;
    assert.ok(retries >= 1, `retried before giving up: ${stderr}`);
  });
});

/** GET `path` on the daemon's HTTP port as host `host`: status and body. */
function getAs(
  port: number,
  host: string,
  path: string,
): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request({ host: "127.0.0.1", port, path, headers: { host } }, (res) => {
      let body = "";
      res.setEncoding("utf8").on("data", (d: string) => (body += d));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.setTimeout(30_000, () => req.destroy(new Error("no answer in 30 s")));
    req.on("error", reject);
    req.end();
  });
}

describe("a daemon not running, --ready-timeout-ms 0", () => {
  it("keeps trying, and SIGTERM stops it cleanly: exit 0, no error", async () => {
    const port = await closedPort();
    const client = await startClient({
      server: `tcp://127.0.0.1:${port}`,
      token: newToken(),
      args: ["--expose", "0=127.0.0.1:1", "--ready-timeout-ms", "0"],
    });
    for (let attempt = 0, from = 0; attempt < 3; attempt++) {
      await client.waitForLog((e) => e.msg === "state: backoff", 30_000, from);
      from = client.logs().length;
    }
    assert.equal(await client.stop(), 0, client.stderr());
    assert.deepEqual(client.logs().filter((e) => e.level === "error"), []);
  });
});

describe("one bad tunnel", () => {
  it("is reported with its reason and the others run; with none standing the client exits 1", async () => {
    const [holder, user] = [newToken("holder"), newToken("user")];
    const daemon = await startDaemonInProcess({
      listen: { tcp: "127.0.0.1:0", websocket: null, admin: null, http: "127.0.0.1:0" },
      http: { domain: "tunnels.test" },
      clients: [
        { name: "holder", token: holder, expose: { hosts: ["*"] } },
        { name: "user", token: user, expose: { hosts: ["*"] } },
      ],
    });
    const app = await startHttpServer();
    const server = `tcp://${daemon.addresses.tcp}`;
    const other = await connect(server, { token: holder, reconnect: false });
    try {
      await other.expose({ local: app.address, http: "myapp" });
      const client = await startClient({
        server,
        token: user,
        args: ["--http", `hdrs=${app.address}`, "--http", `myapp=${app.address}`],
      });
      const refused = await client.waitForLog((e) => e.level === "error");
      assert.match(String(refused.msg), new RegExp(`^cannot start http myapp=${app.address}: `));
      assert.equal(refused.code, "conflict", JSON.stringify(refused));
      await client.waitForLog((e) => /could not be started; the others run/.test(String(e.msg)));
      const answer = await getAs(portOf(daemon.addresses.http), "hdrs.tunnels.test", "/hello");
      assert.deepEqual(answer, { status: 200, body: "hello" }, "hdrs stands");
      assert.equal(client.hasExited, false);
      assert.equal(await client.stop(), 0);

      // clientAt adds an --expose this client may not have: two refused, none standing.
      const alone = await clientAt(server, user, ["--http", `myapp=${app.address}`]);
      assert.equal(alone.code, 1, alone.stderr);
      assert.deepEqual(alone.errors.map((m) => String(m).replace(/: .*/, "")), [
        "cannot start expose 0=127.0.0.1:1",
        `cannot start http myapp=${app.address}`,
        "nothing could be started (2 failed); exiting",
      ]);
    } finally {
      await other.close();
      await app.close();
      daemon.stop();
    }
  });
});
