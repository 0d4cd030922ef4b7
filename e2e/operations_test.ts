// Operating the daemon, end to end: the daemon runs as a separate process (as users run it); the
// clients too, or in-process through the SDK where a test needs to look inside the session.
// Named services between clients, SIGTERM drain, SIGHUP reload, `daemon check`, the handshake and
// authentication rules, limits, and the embedded default configuration.
//
// Runs under `deno test -A e2e/operations_test.ts` and
// `bun test --timeout 120000 e2e/operations_test.ts`. Every wait is bounded; nothing asserts on
// durations except "well before the grace period" bounds that are an order of magnitude wide.

import assert from "node:assert/strict";
import { writeFileSync } from "node:fs";
import { afterEach, describe, it } from "node:test";
import { type Client, connect } from "../client/mod.ts";
import { ResetReason } from "../tunnel/stream/reset_reasons.ts";
import type { Stream } from "../protocol/stream.ts";
import { connectWebSocket } from "../transport/mod.ts";
import { parseHostPort } from "../util/net/address.ts";
import {
  assertSameBytes,
  cleanup,
  type ClientEntry,
  type ClientProcess,
  daemonConfig,
  type DaemonProcess,
  newToken,
  pattern,
  probePort,
  sleep,
  startClient,
  startDaemon,
  startEchoServer,
  tcpConnect,
  tcpRoundTrip,
  waitFor,
  withTimeout,
} from "../testing/mod.ts";
import { SIGNAL_REPEAT_MS } from "../util/host/host.ts";
import {
  collectStream,
  openWithHeader,
  peerClosed,
  RawControl,
  rawTcpSession,
  rawWsSession,
  readAll,
  runProgram,
  slowSource,
  upgradeStatus,
} from "./_ops_util.ts";

// ---- Local helpers (in-process SDK clients and small checks) ----

/** Things this file started outside the harness (SDK clients, raw sessions, servers). */
const local: (() => unknown)[] = [];

afterEach(async () => {
  for (const close of local.splice(0).reverse()) {
    try {
      await close();
    } catch { /* best effort */ }
  }
  await cleanup();
});

/** Connects an in-process SDK client (no reconnect), closed after the test. */
async function sdk(url: string, token: string): Promise<Client> {
  const client = await withTimeout(
    connect(url, { token, reconnect: false, connectTimeoutMs: 10_000 }),
    15_000,
    `SDK connect to ${url}`,
  );
  local.push(() => closeClient(client));
  return client;
}

/** Closes an SDK client without waiting on open streams. */
async function closeClient(client: Client): Promise<void> {
  client.session?.destroy();
  await withTimeout(client.close(), 6_000, "SDK client close").catch(() => {});
}

/** Writes `bytes` on a stream, half-closes, and collects the answer until the stream closes. */
async function roundTrip(stream: Stream, bytes: Uint8Array, ms = 15_000) {
  const outcome = collectStream(stream, ms);
  stream.write(bytes);
  stream.end();
  return await outcome;
}

/** `describeResetReason`-style name of a reset code, for assertion messages. */
function reasonName(code: number | undefined): string {
  const entry = Object.entries(ResetReason).find(([, c]) => c === code);
  return entry ? entry[0] : `code ${code}`;
}

/** The local port of a client CLI's `--use LISTEN=NAME` for service `name`. */
async function usingPort(client: ClientProcess, name: string): Promise<number> {
  const entry = await client.waitForLog((e) => e.msg === "using service" && e.service === name);
  return parseHostPort(String(entry.listen)).port;
}

/** Connects to a local port, writes `bytes`, half-closes, and waits until the connection closes. */
async function refusedConnection(port: number, bytes: Uint8Array): Promise<Uint8Array> {
  const socket = await tcpConnect(port);
  const reader = readAll(socket, 15_000);
  socket.write(bytes);
  socket.end();
  const { data } = await reader.done;
  return data;
}

function portOf(address: string): number {
  return parseHostPort(address).port;
}

/** The number of log lines so far: pass it as `from` to wait for a line after this point. */
const mark = (p: { logs(): unknown[] }) => p.logs().length;

/** Starts a daemon with `clients` and `extra` top-level config. */
function daemonWith(clients: ClientEntry[], extra: Record<string, unknown> = {}) {
  return startDaemon({ config: daemonConfig(clients, extra) });
}

/** Waits for the daemon's "configuration reloaded" (or refusal) after a SIGHUP. */
async function reload(daemon: DaemonProcess, config: Record<string, unknown>) {
  const from = mark(daemon);
  daemon.writeConfig(config);
  daemon.signal("SIGHUP");
  await daemon.waitForLog((e) => e.msg === "configuration reloaded", 10_000, from);
}

// ---- Named services ----

describe("named services between two client processes", () => {
  it("B reaches A's service by name; a client not allowed is refused (NotAllowed); an unknown service is refused (UnknownService); A and B keep working", async () => {
    const [ta, tb, tc] = [newToken("a"), newToken("b"), newToken("c")];
    const daemon = await daemonWith([
      { name: "a", token: ta, services: { offer: ["ssh-box"] } },
      { name: "b", token: tb, services: { use: ["ssh-box"] } },
      { name: "c", token: tc, services: { use: ["nobody-*"] } },
    ]);
    const echo = await startEchoServer();
    const a = await startClient({
      server: daemon.tcpUrl,
      token: ta,
      args: ["--offer", `ssh-box=${echo.address}`],
    });
    await a.waitForLog((e) => e.msg === "offering service" && e.service === "ssh-box");
    const b = await startClient({
      server: daemon.wsUrl,
      token: tb,
      args: ["--use", "127.0.0.1:0=ssh-box"],
    });
    const bPort = await usingPort(b, "ssh-box");

    const payload = pattern(300_000, 11);
    assertSameBytes(await tcpRoundTrip(bPort, payload), payload, "through ssh-box");
    assert.equal(echo.connections, 1, "A dialled its local service once");

    // C may use only nobody-*: ssh-box is refused by policy, nobody-home is offered by nobody.
    const c = await startClient({
      server: daemon.tcpUrl,
      token: tc,
      args: ["--use", "127.0.0.1:0=ssh-box", "--use", "127.0.0.1:0=nobody-home"],
    });
    const deniedPort = await usingPort(c, "ssh-box");
    const unknownPort = await usingPort(c, "nobody-home");

    let from = mark(c);
    const daemonFrom = mark(daemon);
    const denied = await refusedConnection(deniedPort, new TextEncoder().encode("hello?"));
    assert.equal(denied.length, 0, "nothing came back through a refused service");
    const deniedLog = await c.waitForLog((e) => /NotAllowed/.test(String(e.msg)), 10_000, from);
    assert.match(String(deniedLog.msg), /ssh-box/);
    const daemonLog = await daemon.waitForLog(
      (e) => e.msg === "service refused" && e.service === "ssh-box",
      10_000,
      daemonFrom,
    );
    assert.equal(daemonLog.reason, "not_allowed");
    assert.equal(echo.connections, 1, "the refused user never reached A's service");

    from = mark(c);
    const unknown = await refusedConnection(unknownPort, new TextEncoder().encode("anyone?"));
    assert.equal(unknown.length, 0);
    const unknownLog = await c.waitForLog(
      (e) => /UnknownService/.test(String(e.msg)),
      10_000,
      from,
    );
    assert.match(String(unknownLog.msg), /nobody-home/);

    // A and B are undisturbed.
    const again = pattern(100_000, 12);
    assertSameBytes(await tcpRoundTrip(bPort, again), again, "through ssh-box after refusals");
    assert.equal(a.hasExited || b.hasExited || c.hasExited, false, "every client still runs");
  });
});

// ---- SIGTERM drain ----

describe("SIGTERM drain", () => {
  it("refuses new connections (TCP closed, WebSocket 503), sends GoAway (SDK open() throws), and lets an in-flight forward finish intact", async () => {
    // 40 chunks of 16 KiB, one every 50 ms: a transfer of about two seconds.
    const source = await slowSource({ chunkSize: 16_384, chunks: 40, intervalMs: 50 });
    local.push(() => source.close());
    const token = newToken("t");
    const daemon = await daemonWith(
      [{ name: "t", token, forward: [`127.0.0.1:${source.port}`] }],
      { shutdownGraceMs: 60_000 },
    );
    const client = await sdk(daemon.tcpUrl, token);
    const stream = client.open(`127.0.0.1:${source.port}`);
    const transfer = collectStream(stream, 30_000);
    await waitFor(() => stream.bytesIn > 0, { message: "the transfer to start" });

    const from = mark(daemon);
    daemon.signal("SIGTERM");
    await daemon.waitForLog((e) => e.msg === "draining", 10_000, from);

    // New connections are refused.
    await waitFor(async () => (await probePort(portOf(daemon.tcpAddress))) === "refused", {
      timeoutMs: 5_000,
      message: "the TCP listener to close",
    });
    const upgrade = await upgradeStatus(portOf(daemon.wsAddress), "/tunnel");
    assert.equal(upgrade.status, 503, upgrade.text);
    assert.match(upgrade.text, /shutting_down/);

    // The client got GoAway: it may open nothing more on this session.
    await waitFor(() => client.session?.remoteGoAway, { message: "GoAway at the client" });
    assert.throws(() => client.open(`127.0.0.1:${source.port}`), /GoAway/);

    // The in-flight transfer completes intact.
    const outcome = await transfer;
    assert.equal(outcome.error, undefined, `transfer failed: ${outcome.error?.message}`);
    assert.ok(outcome.ended, "the transfer ended with FIN");
    assertSameBytes(outcome.data, source.expected, "in-flight transfer");
  });

  it(
    "exits 0 by itself once the in-flight transfer finished, well before the grace period",
    async () => {
      // 20 chunks of 16 KiB, one every 50 ms: a transfer of about one second.
      const source = await slowSource({ chunkSize: 16_384, chunks: 20, intervalMs: 50, seed: 5 });
      local.push(() => source.close());
      const token = newToken("t");
      const daemon = await daemonWith(
        [{ name: "t", token, forward: [`127.0.0.1:${source.port}`] }],
        { shutdownGraceMs: 60_000 },
      );
      const client = await sdk(daemon.tcpUrl, token);
      const stream = client.open(`127.0.0.1:${source.port}`);
      const transfer = collectStream(stream, 30_000);
      await waitFor(() => stream.bytesIn > 0, { message: "the transfer to start" });

      daemon.signal("SIGTERM");
      const outcome = await transfer;
      assertSameBytes(outcome.data, source.expected, "in-flight transfer");
      // Nothing is in flight any more: the daemon stops on its own, long before 60 s.
      const exit = await withTimeout(
        daemon.exited,
        15_000,
        "the daemon to exit by itself once its only transfer finished (grace period 60 s); " +
          `last log lines: ${JSON.stringify(daemon.logs().slice(-3))}`,
      );
      assert.equal(exit.code, 0);
    },
  );

  it(
    "an in-flight visitor of a reverse tunnel finishes intact",
    async () => {
      const source = await slowSource({ chunkSize: 16_384, chunks: 40, intervalMs: 50, seed: 3 });
      local.push(() => source.close());
      const token = newToken("t");
      const daemon = await daemonWith([{ name: "t", token }], { shutdownGraceMs: 60_000 });
      const tunnelClient = await startClient({
        server: daemon.tcpUrl,
        token,
        args: ["--expose", `0=127.0.0.1:${source.port}`],
      });
      const { port } = await tunnelClient.waitForTunnel();
      const visitor = await tcpConnect(port);
      const reader = readAll(visitor, 15_000);
      await waitFor(() => reader.received() > 0, { message: "the visitor to receive data" });

      const from = mark(daemon);
      daemon.signal("SIGTERM");
      await daemon.waitForLog((e) => e.msg === "draining", 10_000, from);
      await waitFor(async () => (await probePort(port)) === "refused", {
        timeoutMs: 5_000,
        message: "the tunnel's listener to close",
      });

      const { data, ended, error } = await reader.done;
      assert.equal(error, undefined, `visitor connection failed: ${error?.message}`);
      assert.ok(
        ended && data.length === source.expected.length,
        `the visitor got ${data.length} of ${source.expected.length} bytes before its connection ` +
          `was closed (ended cleanly: ${ended})`,
      );
      assertSameBytes(data, source.expected, "visitor transfer");
    },
  );

  it("with a transfer that never ends, exits after the grace period anyway", async () => {
    const source = await slowSource({ chunkSize: 1024, chunks: 1, intervalMs: 20, stall: true });
    local.push(() => source.close());
    const token = newToken("t");
    const daemon = await daemonWith(
      [{ name: "t", token, forward: [`127.0.0.1:${source.port}`] }],
      { shutdownGraceMs: 500 },
    );
    const client = await sdk(daemon.tcpUrl, token);
    const stream = client.open(`127.0.0.1:${source.port}`);
    const outcome = collectStream(stream, 30_000);
    await waitFor(() => stream.bytesIn > 0, { message: "the stalled transfer to start" });

    daemon.signal("SIGTERM");
    const exit = await withTimeout(daemon.exited, 15_000, "exit after a 500 ms grace period");
    assert.equal(exit.code, 0);
    // The stalled stream was cut when the daemon stopped, not completed.
    const { ended } = await outcome;
    assert.equal(ended, false);
  });

  it("a second SIGTERM stops at once; a copy of the first right after it does not", async () => {
    const source = await slowSource({ chunkSize: 1024, chunks: 1, intervalMs: 20, stall: true });
    local.push(() => source.close());
    const token = newToken("t");
    const daemon = await daemonWith(
      [{ name: "t", token, forward: [`127.0.0.1:${source.port}`] }],
      { shutdownGraceMs: 600_000 },
    );
    const client = await sdk(daemon.tcpUrl, token);
    const stream = client.open(`127.0.0.1:${source.port}`);
    collectStream(stream, 30_000).catch(() => {});
    await waitFor(() => stream.bytesIn > 0, { message: "the stalled transfer to start" });

    const from = mark(daemon);
    daemon.signal("SIGTERM");
    const first = performance.now();
    // A copy within SIGNAL_REPEAT_MS is the same signal passed on by a launcher: drain once.
    daemon.signal("SIGTERM");
    await daemon.waitForLog((e) => e.msg === "draining", 10_000, from);
    await sleep(Math.max(0, first + SIGNAL_REPEAT_MS + 50 - performance.now()));
    const count = (msg: string) => daemon.logs().filter((e) => e.msg === msg).length;
    assert.equal(count("signal: draining"), 1);
    assert.equal(count("second signal: stopping now"), 0, "the copy was taken as one signal");
    assert.equal(daemon.hasExited, false, "still draining");
    daemon.signal("SIGTERM");
    const exit = await withTimeout(daemon.exited, 10_000, "exit on the second SIGTERM");
    assert.equal(exit.code, 0);
    assert.equal(count("second signal: stopping now"), 1);
  });
});

// ---- SIGHUP reload ----

describe("SIGHUP reload", () => {
  it("a removed client and a changed token lose their sessions and cannot reconnect; others are untouched", async () => {
    const echo = await startEchoServer();
    const [tx, ty, tz, tz2] = [newToken("x"), newToken("y"), newToken("z"), newToken("z2")];
    const y: ClientEntry = { name: "y", token: ty, forward: [echo.address] };
    const daemon = await daemonWith([{ name: "x", token: tx }, y, { name: "z", token: tz }]);
    const x = await sdk(daemon.tcpUrl, tx);
    const z = await sdk(daemon.wsUrl, tz);
    const yc = await sdk(daemon.tcpUrl, ty);
    // A tunnel of y's, held by a client process, must survive the reload too.
    const yProcess = await startClient({
      server: daemon.wsUrl,
      token: ty,
      args: ["--expose", `0=${echo.address}`],
    });
    const { port: tunnelPort } = await yProcess.waitForTunnel();

    // A stream of y's that stays open across the reload.
    const longLived = yc.open(echo.address);
    const longLivedOutcome = collectStream(longLived, 30_000);
    const first = pattern(10_000, 21);
    longLived.write(first);
    await waitFor(() => longLived.bytesIn >= first.length, { message: "echo before reload" });

    await reload(daemon, daemonConfig([y, { name: "z", token: tz2 }]));

    await waitFor(() => x.state === "closed" && z.state === "closed", {
      timeoutMs: 10_000,
      message: `the sessions of x and z to close (x ${x.state}, z ${z.state})`,
    });
    assert.equal(yc.state, "ready", "y's session is untouched");
    const second = pattern(10_000, 22);
    longLived.write(second);
    longLived.end();
    const kept = await longLivedOutcome;
    assert.equal(kept.error, undefined);
    assertSameBytes(kept.data, new Uint8Array([...first, ...second]), "stream across the reload");
    const fresh = await roundTrip(yc.open(echo.address), pattern(5_000, 23));
    assertSameBytes(fresh.data, pattern(5_000, 23), "new forward after the reload");
    const viaTunnel = pattern(20_000, 24);
    assertSameBytes(await tcpRoundTrip(tunnelPort, viaTunnel), viaTunnel, "y's tunnel");

    // Old credentials are refused; z's new token works.
    for (const [label, token, url] of [["x", tx, daemon.tcpUrl], ["z", tz, daemon.wsUrl]]) {
      await assert.rejects(
        withTimeout(connect(url, { token, reconnect: false }), 15_000, `reconnect of ${label}`),
        (error: Error & { code?: string }) => error.code === "unauthorized",
        `${label} must not get back in with its old token`,
      );
    }
    const z2 = await sdk(daemon.wsUrl, tz2);
    assert.equal(z2.state, "ready");
  });

  it("a tightened forward allowlist applies to the next stream of a session already open", async () => {
    const echo = await startEchoServer();
    const token = newToken("y");
    const daemon = await daemonWith([{ name: "y", token, forward: [echo.address] }]);
    const client = await sdk(daemon.tcpUrl, token);
    const before = await roundTrip(client.open(echo.address), pattern(4_000, 31));
    assertSameBytes(before.data, pattern(4_000, 31), "forward before the reload");

    await reload(daemon, daemonConfig([{ name: "y", token, forward: [] }]));

    const after = await roundTrip(client.open(echo.address), pattern(4_000, 32));
    assert.equal(
      after.resetCode,
      ResetReason.NotAllowed,
      `expected NotAllowed, got ${reasonName(after.resetCode)} (${after.error?.message})`,
    );
    assert.equal(after.data.length, 0);
    assert.equal(client.state, "ready", "the session itself stays up");
  });

  it("a reload with an invalid config keeps the old one (error logged, everything still works)", async () => {
    const echo = await startEchoServer();
    const [tx, ty] = [newToken("x"), newToken("y")];
    const daemon = await daemonWith([
      { name: "x", token: tx },
      { name: "y", token: ty, forward: [echo.address] },
    ]);
    const x = await sdk(daemon.tcpUrl, tx);
    const y = await sdk(daemon.tcpUrl, ty);

    // Invalid: drops x and y's rights, but with a too-short token, so nothing may apply.
    const from = mark(daemon);
    daemon.writeConfig(daemonConfig([{ name: "y", token: "short", forward: [] }]));
    daemon.signal("SIGHUP");
    const refused = await daemon.waitForLog((e) => e.level === "error", 10_000, from);
    assert.match(String(refused.msg), /reload refused/);
    assert.match(String(refused.detail), /clients\[0\]\.token/);

    // And a file that is not even JSON.
    const from2 = mark(daemon);
    writeFileSync(daemon.configPath!, "{ this is not json");
    daemon.signal("SIGHUP");
    await daemon.waitForLog((e) => e.level === "error", 10_000, from2);
    assert.equal(
      daemon.logs().slice(from).some((e) => e.msg === "configuration reloaded"),
      false,
      "nothing was reloaded",
    );

    assert.equal(x.state, "ready");
    assert.equal(y.state, "ready");
    const ok = await roundTrip(y.open(echo.address), pattern(4_000, 41));
    assertSameBytes(ok.data, pattern(4_000, 41), "y's forward under the old config");
    const x2 = await sdk(daemon.tcpUrl, tx);
    assert.equal(x2.state, "ready", "x can still connect with its token");
    assert.equal(daemon.hasExited, false);
  });
});

// ---- daemon check ----

describe("daemon check", () => {
  it("reports every error with its JSON path and exits 1", async () => {
    const { mkdtempSync, rmSync } = await import("node:fs");
    const { tmpdir } = await import("node:os");
    const { join } = await import("node:path");
    const dir = mkdtempSync(join(tmpdir(), "tunnelmux-check-"));
    local.push(() => rmSync(dir, { recursive: true, force: true }));
    const file = join(dir, "bad.jsonc");
    writeFileSync(
      file,
      `{
  // several mistakes at once
  "listen": { "tcp": "127.0.0.1:99999", "admin": null },
  "shutdownGraceMs": -5,
  "limits": { "sessions": 0, "handshakeTimeoutMs": "fast" },
  "log": { "level": "loud" },
  "clients": [
    { "name": "bad name!", "token": "tiny-secret-xyz", "forward": ["*:22"], "fowrard": [] },
    { "name": "ok", "token": "a-token-that-is-long-enough-1", "services": { "use": ["Bad Service"] } },
  ],
}`,
    );
    const bad = await runProgram("daemon/main.ts", ["check", "--config", file]);
    assert.equal(bad.code, 1, bad.stdout + bad.stderr);
    const output = bad.stdout + bad.stderr;
    const expected = [
      "listen.tcp",
      "shutdownGraceMs",
      "limits.sessions",
      "limits.handshakeTimeoutMs",
      "log.level",
      "clients[0].fowrard",
      "clients[0].name",
      "clients[0].token",
      "clients[0].forward[0]",
      "clients[1].services.use[0]",
    ];
    for (const path of expected) {
      assert.ok(
        output.split("\n").some((line) => line.trimStart().startsWith(`${path}:`)),
        `no error line for ${path} in:\n${output}`,
      );
    }
    assert.match(output, /10 errors/);
    assert.doesNotMatch(output, /tiny-secret-xyz/, "a token is never printed");

    const good = join(dir, "good.json");
    writeFileSync(
      good,
      JSON.stringify(daemonConfig([{ name: "laptop", token: newToken("laptop") }])),
    );
    const ok = await runProgram("daemon/main.ts", ["check", "--config", good]);
    assert.equal(ok.code, 0, ok.stdout + ok.stderr);
    assert.match(ok.stdout, /config OK/);
  });
});

// ---- Handshake and authentication ----

describe("handshake and authentication", () => {
  it("a TCP connection that says nothing is closed after limits.handshakeTimeoutMs", async () => {
    const daemon = await daemonWith([{ name: "a", token: newToken("a") }], {
      limits: { handshakeTimeoutMs: 300 },
    });
    const from = mark(daemon);
    const socket = await tcpConnect(portOf(daemon.tcpAddress));
    await peerClosed(socket, 10_000);
    await daemon.waitForLog(
      (e) => /no handshake within the timeout/.test(String(e.msg)),
      5_000,
      from,
    );
  });

  it("streams before the hello are reset with NotAuthenticated; an unsupported version gets version_mismatch", async () => {
    const token = newToken("a");
    const daemon = await daemonWith([{ name: "a", token, services: { use: ["echo"] } }]);
    const port = portOf(daemon.tcpAddress);

    // First stream is not the control stream.
    const first = await rawTcpSession(port);
    local.push(() => first.close());
    const echoFirst = await collectStream(openWithHeader(first.session, { kind: "echo" }));
    assert.equal(
      echoFirst.resetCode,
      ResetReason.NotAuthenticated,
      reasonName(echoFirst.resetCode),
    );

    // Control stream open, but a forward before the hello.
    const early = await rawTcpSession(port);
    local.push(() => early.close());
    const control = new RawControl(early.session);
    const forward = await collectStream(
      openWithHeader(early.session, { kind: "forward", target: "127.0.0.1:1" }),
    );
    assert.equal(forward.resetCode, ResetReason.NotAuthenticated, reasonName(forward.resetCode));
    // The same session may still authenticate afterwards.
    const welcome = await control.request({ type: "hello", version: 1, token });
    assert.equal(welcome.type, "welcome", JSON.stringify(welcome));

    // A request before the hello.
    const rude = await rawTcpSession(port);
    local.push(() => rude.close());
    const rudeControl = new RawControl(rude.session);
    const unauthorized = await rudeControl.request({ type: "expose", id: 1, port: 0 });
    assert.equal(unauthorized.code, "unauthorized", JSON.stringify(unauthorized));

    // Unsupported control version.
    const future = await rawTcpSession(port);
    local.push(() => future.close());
    const futureControl = new RawControl(future.session);
    const mismatch = await futureControl.request({ type: "hello", version: 2, token });
    assert.equal(mismatch.type, "error");
    assert.equal(mismatch.code, "version_mismatch", JSON.stringify(mismatch));
    await withTimeout(future.session.closed, 10_000, "the daemon to end the session");

    // A wrong token.
    const wrong = await rawTcpSession(port);
    local.push(() => wrong.close());
    const wrongControl = new RawControl(wrong.session);
    const denied = await wrongControl.request({ type: "hello", version: 1, token: newToken("z") });
    assert.equal(denied.code, "unauthorized", JSON.stringify(denied));
  });

  it("WebSocket: a bearer token in the upgrade replaces the hello's token; a wrong one gets 401", async () => {
    const token = newToken("ws");
    const daemon = await daemonWith([{ name: "ws", token, services: { use: ["echo"] } }]);

    const raw = await rawWsSession(daemon.wsUrl, { Authorization: `Bearer ${token}` });
    local.push(() => raw.close());
    const control = new RawControl(raw.session);
    const welcome = await control.request({ type: "hello", version: 1, agent: "e2e" });
    assert.equal(welcome.type, "welcome", JSON.stringify(welcome));
    assert.equal(welcome.client, "ws");
    const bytes = pattern(50_000, 51);
    const echoed = await roundTrip(openWithHeader(raw.session, { kind: "echo" }), bytes);
    assert.equal(echoed.error, undefined);
    assertSameBytes(echoed.data, bytes, "echo over a bearer-authenticated session");

    const refused = await upgradeStatus(portOf(daemon.wsAddress), "/tunnel", {
      Authorization: `Bearer ${newToken("wrong")}`,
    });
    assert.equal(refused.status, 401, refused.text);
    await assert.rejects(
      withTimeout(
        connectWebSocket(daemon.wsUrl, { headers: { Authorization: `Bearer ${newToken("no")}` } }),
        10_000,
        "WebSocket connect with a wrong bearer token",
      ),
    );

    // Without a bearer token and without a token in the hello: unauthorized.
    const anonymous = await rawWsSession(daemon.wsUrl);
    local.push(() => anonymous.close());
    const anonymousControl = new RawControl(anonymous.session);
    const denied = await anonymousControl.request({ type: "hello", version: 1 });
    assert.equal(denied.code, "unauthorized", JSON.stringify(denied));
  });
});

// ---- Limits ----

describe("limits", () => {
  it("limits.sessions: 1 → a second client gets limit_reached, the first keeps working", async () => {
    const [ta, tb] = [newToken("a"), newToken("b")];
    const daemon = await daemonWith([
      { name: "a", token: ta, services: { use: ["echo"] } },
      { name: "b", token: tb },
    ], { limits: { sessions: 1 } });
    const first = await sdk(daemon.tcpUrl, ta);

    const second = await rawTcpSession(portOf(daemon.tcpAddress));
    local.push(() => second.close());
    const reply = await new RawControl(second.session).request({
      type: "hello",
      version: 1,
      token: tb,
    });
    assert.equal(reply.code, "limit_reached", JSON.stringify(reply));

    const bytes = pattern(20_000, 61);
    const echoed = await roundTrip(first.echo(), bytes);
    assertSameBytes(echoed.data, bytes, "the first client still works");
  });

  it(
    "limits.sessions: 1 → the SDK's connect() fails naming limit_reached",
    async () => {
      const [ta, tb] = [newToken("a"), newToken("b")];
      const daemon = await daemonWith([{ name: "a", token: ta }, { name: "b", token: tb }], {
        limits: { sessions: 1 },
      });
      await sdk(daemon.tcpUrl, ta);
      const attempt = connect(daemon.tcpUrl, { token: tb, reconnect: false });
      attempt.then((c) => local.push(() => closeClient(c)), () => {});
      const error = await withTimeout(attempt, 15_000, "second SDK connect").then(
        () => undefined,
        (e: Error & { code?: string }) => e,
      );
      assert.ok(error, "the second connect fails");
      assert.ok(
        error.code === "limit_reached" || /limit_reached/.test(error.message),
        `the SDK should say why it was turned away; it said ${error.code}: ${error.message}`,
      );
    },
  );

  it("a client's limits.tunnels: 1 → the second expose is refused with limit_reached, the first keeps working", async () => {
    const echo = await startEchoServer();
    const token = newToken("t");
    const daemon = await daemonWith([{ name: "t", token, limits: { tunnels: 1 } }]);
    const client = await sdk(daemon.tcpUrl, token);
    const tunnel = await client.expose({ local: echo.address });
    await assert.rejects(
      client.expose({ local: echo.address }),
      (error: Error & { code?: string }) => error.code === "limit_reached",
    );
    const bytes = pattern(30_000, 71);
    assertSameBytes(await tcpRoundTrip(tunnel.remotePort, bytes), bytes, "the first tunnel");
  });

  it("limits.streamsPerSession small → extra streams are refused without disturbing the others", async () => {
    const token = newToken("s");
    const daemon = await daemonWith([{ name: "s", token, services: { use: ["echo"] } }], {
      limits: { streamsPerSession: 4 },
    });
    const raw = await rawTcpSession(portOf(daemon.tcpAddress));
    local.push(() => raw.close());
    const control = new RawControl(raw.session);
    const welcome = await control.request({ type: "hello", version: 1, token });
    assert.equal(welcome.type, "welcome", JSON.stringify(welcome));

    // The control stream plus three echo streams fill the four allowed.
    const open: { stream: Stream; got: Uint8Array[] }[] = [];
    for (let i = 0; i < 3; i++) {
      const stream = openWithHeader(raw.session, { kind: "echo" });
      const got: Uint8Array[] = [];
      stream.onData = (chunk) => got.push(chunk);
      stream.write(pattern(1_000, 80 + i));
      open.push({ stream, got });
    }
    const sum = (chunks: Uint8Array[]) => chunks.reduce((n, c) => n + c.length, 0);
    await waitFor(() => open.every((o) => sum(o.got) === 1_000), { message: "three echoes" });

    for (let i = 0; i < 2; i++) {
      const extra = await collectStream(openWithHeader(raw.session, { kind: "echo" }));
      assert.ok(extra.error, "an extra stream is refused");
      assert.ok(
        extra.resetCode === ResetReason.LimitReached || extra.resetCode === ResetReason.None,
        `refused with ${reasonName(extra.resetCode)}`,
      );
    }

    // The three streams and the control channel still work.
    for (const [i, o] of open.entries()) {
      o.stream.write(pattern(1_000, 90 + i));
      o.stream.end();
    }
    await waitFor(() => open.every((o) => sum(o.got) === 2_000), {
      message: "echoes after refusal",
    });
    const exposed = await control.request({ type: "expose", id: 7, port: 0 });
    assert.equal(exposed.type, "exposed", JSON.stringify(exposed));
  });

  it("a client's limits.streams below the daemon's → the extra stream is reset with LimitReached", async () => {
    const token = newToken("s");
    const daemon = await daemonWith(
      [{ name: "s", token, services: { use: ["echo"] }, limits: { streams: 2 } }],
      { limits: { streamsPerSession: 16 } },
    );
    const client = await sdk(daemon.tcpUrl, token);
    // Control + one echo stream = 2.
    const held = client.echo();
    const heldOutcome = collectStream(held, 15_000);
    held.write(pattern(100, 1));
    await waitFor(() => held.bytesIn === 100, { message: "the held echo" });
    const extra = await collectStream(client.echo());
    assert.equal(extra.resetCode, ResetReason.LimitReached, reasonName(extra.resetCode));
    held.end();
    const { data } = await heldOutcome;
    assertSameBytes(data, pattern(100, 1), "the held stream");
  });
});

// ---- Embedded defaults ----

describe("embedded default configuration", () => {
  it("no config and no env token → a generated token is printed; it may expose ports ≥ 1024 on 127.0.0.1 and forward nothing", async () => {
    const daemon = await startDaemon();
    const token = await waitFor(() => {
      const match = /token of client "default"[^\n]*\n\s*(\S+)/.exec(daemon.stdout());
      return match?.[1];
    }, { timeoutMs: 10_000, message: "the generated token on stdout" });
    assert.ok(token.length >= 24);
    assert.equal(daemon.stderr().includes(token), false, "the token is not in the logs");

    const echo = await startEchoServer();
    const client = await sdk(daemon.tcpUrl, token);
    const tunnel = await client.expose({ local: echo.address });
    assert.equal(tunnel.remoteHost, "127.0.0.1");
    assert.ok(tunnel.remotePort >= 1024, `port ${tunnel.remotePort}`);
    const bytes = pattern(40_000, 101);
    assertSameBytes(await tcpRoundTrip(tunnel.remotePort, bytes), bytes, "through the tunnel");

    await assert.rejects(
      client.expose({ local: echo.address, remotePort: 1000 }),
      (error: Error & { code?: string }) => error.code === "not_allowed",
      "a port below 1024 is not allowed",
    );
    await assert.rejects(
      client.expose({ local: echo.address, remotePort: 0, bindHost: "0.0.0.0" }),
      (error: Error & { code?: string }) => error.code === "not_allowed",
      "binding beyond 127.0.0.1 is not allowed",
    );

    const forward = await roundTrip(client.open(echo.address), pattern(100, 102));
    assert.equal(forward.resetCode, ResetReason.NotAllowed, reasonName(forward.resetCode));
    assert.equal(echo.connections, 1, "only the tunnel visitor reached the echo server");
  });
});
