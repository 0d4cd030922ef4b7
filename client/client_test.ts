// The SDK against a daemon in this process (the process-level tests are in e2e/): every URL
// scheme, PROXY protocol toward the local service, forwards, named services, reconnects.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { connect as netConnect, createServer, type Socket } from "node:net";
import { connect, type RetryInfo } from "./client.ts";
import { ClientError, describeStreamError } from "./errors.ts";
import { Daemon } from "../daemon/daemon.ts";
import { validateConfig } from "../daemon/config/mod.ts";
import { Logger } from "../util/log.ts";
import { listenTcp } from "../transport/mod.ts";
import type { TransportListener } from "../protocol/transport.ts";
import { pattern, roundTrip } from "../tools/echo_check.ts";
import { decodeProxyHeader } from "../tunnel/proxy_protocol/proxy_protocol_decoder.ts";
import { hasOpenssl, makeTestIdentity } from "../transport/_test_certificate.ts";
import { tcpExchange } from "../transport/_test_util.ts";
import { withTimeout } from "../testing/wait.ts";

const TOKEN = "client-test-token-0123456789abcdef";
const OTHER = "client-test-other-0123456789abcdef";

/** A TCP service that records what each connection sent first and echoes everything. */
async function recordingEcho(): Promise<{ listener: TransportListener; firsts: Uint8Array[] }> {
  const firsts: Uint8Array[] = [];
  const listener = await listenTcp({ hostname: "127.0.0.1", port: 0 }, (t) => {
    let first = true;
    t.start({
      data: (chunk) => {
        if (first) firsts.push(chunk.slice());
        first = false;
        if (!t.write(chunk)) t.pause();
      },
      drain: () => t.resume(),
      end: () => t.end(),
      close: () => {},
    });
  });
  return { listener, firsts };
}

async function startDaemon(echoPort: number, extra: Record<string, unknown> = {}) {
  const result = validateConfig({
    listen: { tcp: "127.0.0.1:0", websocket: "127.0.0.1:0", admin: null },
    clients: [
      {
        name: "alice",
        token: TOKEN,
        expose: { ports: [0, "20000-32767"] },
        forward: [`127.0.0.1:${echoPort}`],
        services: { offer: ["box"], use: ["echo", "box"] },
      },
      { name: "bob", token: OTHER, services: { use: ["box"] } },
    ],
    ...extra,
  });
  assert.deepEqual(result.errors, []);
  const log = new Logger({ level: "error", format: "json", sink: () => {} });
  const daemon = new Daemon(result.config!, { log });
  await daemon.start();
  return daemon;
}

describe("client SDK (daemon in process)", () => {
  let echo: Awaited<ReturnType<typeof recordingEcho>>;
  let daemon: Daemon;
  before(async () => {
    echo = await recordingEcho();
    daemon = await startDaemon(echo.listener.port);
  });
  after(() => {
    daemon.stop();
    echo.listener.close();
  });

  for (const scheme of ["tcp", "ws"]) {
    it(`${scheme}://: echo, forward, reverse tunnel, and a refused forward in words`, async () => {
      const url = scheme === "tcp"
        ? `tcp://${daemon.addresses.tcp}`
        : `ws://${daemon.addresses.websocket}`;
      const client = await connect(url, { token: TOKEN, reconnect: false });
      try {
        assert.deepEqual(await roundTrip(client.echo(), pattern(70_000, 1)), pattern(70_000, 1));
        const forwarded = await roundTrip(
          client.open(`127.0.0.1:${echo.listener.port}`),
          pattern(9000, 2),
        );
        assert.deepEqual(forwarded, pattern(9000, 2));
        const tunnel = await client.expose({ local: `127.0.0.1:${echo.listener.port}` });
        assert.deepEqual(await tcpExchange(tunnel.remotePort, pattern(500, 3)), pattern(500, 3));
        const refused = await roundTrip(client.open("127.0.0.1:1"), pattern(1, 4)).catch((e) => e);
        assert.match(describeStreamError(refused), /NotAllowed/);
        // One typed family: a ClientError whose code and message name the cause.
        assert.ok(refused instanceof ClientError, String(refused));
        assert.equal(refused.code, "not_allowed");
        assert.match(refused.message, /refused: NotAllowed: not allowed for this client/);
        await tunnel.close();
      } finally {
        await client.close();
      }
    });
  }

  it("a wrong token fails connect() with a fatal unauthorized error", async () => {
    const failure = await connect(`tcp://${daemon.addresses.tcp}`, {
      token: "wrong-token-0123456789abcdefghij",
    }).catch((e) => e);
    assert.ok(failure instanceof ClientError);
    assert.equal(failure.code, "unauthorized");
    assert.equal(failure.fatal, true);
  });

  describe("connect() fails at once, with the cause, on mistakes retrying cannot fix", () => {
    const cases: [string, () => string, string, RegExp][] = [
      ["an empty token", () => `tcp://${daemon.addresses.tcp}`, "bad_token", /token is empty/],
      ["a URL without scheme", () => daemon.addresses.tcp!, "bad_url", /write tcp:\/\//],
      ["an http:// URL", () => `http://${daemon.addresses.websocket}`, "bad_url", /ws:\/\//],
      [
        "a wrong WebSocket path",
        () => `ws://${daemon.addresses.websocket!.replace(/\/tunnel$/, "/nope")}`,
        "upgrade_refused",
        /HTTP 404.*\/tunnel/,
      ],
      [
        "tcp:// pointed at the WebSocket port",
        () => `tcp://${daemon.addresses.websocket!.replace(/\/tunnel$/, "")}`,
        "wrong_protocol",
        /answered in HTTP: .*use ws:\/\//,
      ],
    ];
    for (const [what, url, code, message] of cases) {
      it(what, async () => {
        const token = code === "bad_token" ? "" : TOKEN;
        const failure = await connect(url(), { token, readyTimeoutMs: 60_000 }).catch((e) => e);
        assert.ok(failure instanceof ClientError, String(failure));
        assert.equal(failure.code, code);
        assert.match(failure.message, message);
        assert.equal(failure.fatal, true);
      });
    }

    it("a daemon that is not there is retried until readyTimeoutMs, naming the last error", async () => {
      const port = await new Promise<number>((resolve) => {
        const probe = listenTcp({ hostname: "127.0.0.1", port: 0 }, (t) => t.close());
        probe.then((l) => {
          l.close();
          resolve(l.port);
        });
      });
      const retries: RetryInfo[] = [];
      const failure = await connect(`tcp://127.0.0.1:${port}`, {
        token: TOKEN,
        readyTimeoutMs: 300,
        reconnect: { initialMs: 20, maxMs: 40 },
        onRetry: (retry) => retries.push(retry),
      }).catch((e) => e);
      assert.ok(failure instanceof ClientError);
      assert.equal(failure.code, "timeout");
      assert.match(failure.message, /last error: cannot reach/);
      assert.ok(retries.length >= 2, `retries: ${retries.length}`);
      assert.deepEqual(retries.map((r) => r.attempt), retries.map((_, i) => i + 1));
      assert.ok(retries.every((r) => r.error.code === "connect_failed" && r.delayMs >= 0));
    });
  });

  it("PROXY protocol v1 and v2 tell the local service the visitor's address", async () => {
    const client = await connect(`tcp://${daemon.addresses.tcp}`, {
      token: TOKEN,
      reconnect: false,
    });
    try {
      for (const version of ["v1", "v2"] as const) {
        const before = echo.firsts.length;
        const tunnel = await client.expose({
          local: `127.0.0.1:${echo.listener.port}`,
          proxyProtocol: version,
        });
        await tcpExchange(tunnel.remotePort, new Uint8Array([7])).catch(() => undefined);
        for (let i = 0; i < 200 && echo.firsts.length === before; i++) {
          await new Promise((r) => setTimeout(r, 5));
        }
        const header = decodeProxyHeader(echo.firsts[before]);
        assert.ok(header, `${version}: a PROXY header came first`);
        assert.equal(header.version, version === "v1" ? 1 : 2);
        assert.match(header.source ?? "", /^127\.0\.0\.1:\d+$/);
        assert.equal(header.destination, `127.0.0.1:${tunnel.remotePort}`);
        await tunnel.close();
      }
    } finally {
      await client.close();
    }
  });

  it("forward() listens locally; a named service reaches the offering client", async () => {
    const alice = await connect(`tcp://${daemon.addresses.tcp}`, {
      token: TOKEN,
      reconnect: false,
    });
    const bob = await connect(`ws://${daemon.addresses.websocket}`, {
      token: OTHER,
      reconnect: false,
    });
    try {
      const local = await alice.forward({
        listen: "127.0.0.1:0",
        target: `127.0.0.1:${echo.listener.port}`,
      });
      const localPort = Number(local.address.split(":")[1]);
      assert.deepEqual(await tcpExchange(localPort, pattern(3000, 5)), pattern(3000, 5));
      local.close();
      await alice.offer("box", `127.0.0.1:${echo.listener.port}`);
      assert.deepEqual(await roundTrip(bob.openService("box"), pattern(4000, 6)), pattern(4000, 6));
      const missing = await roundTrip(bob.openService("nobody"), pattern(1, 7)).catch((e) => e);
      assert.match(describeStreamError(missing), /NotAllowed|UnknownService/);
    } finally {
      await alice.close();
      await bob.close();
    }
  });
});

describe("client SDK: reconnect", () => {
  it("comes back after the daemon restarts on the same port, with its tunnel", async () => {
    const echo = await recordingEcho();
    let daemon = await startDaemon(echo.listener.port);
    const port = Number(daemon.addresses.tcp!.split(":")[1]);
    const client = await connect(`tcp://127.0.0.1:${port}`, {
      token: TOKEN,
      reconnect: { initialMs: 20, maxMs: 100 },
    });
    try {
      const tunnel = await client.expose({ local: `127.0.0.1:${echo.listener.port}` });
      const remotePort = tunnel.remotePort;
      const states: string[] = [];
      client.on("state", (s) => states.push(s));
      daemon.stop();
      // The old listener's port is freed asynchronously: retry the bind, a bounded number of times.
      for (let attempt = 0;; attempt++) {
        try {
          daemon = await startDaemon(echo.listener.port, {
            listen: { tcp: `127.0.0.1:${port}`, websocket: null, admin: null },
          });
          break;
        } catch (error) {
          if (attempt === 100) throw error;
          await new Promise((r) => setTimeout(r, 20));
        }
      }
      for (
        let i = 0;
        i < 400 && !(client.state === "ready" && tunnel.id !== "" && states.includes("ready"));
        i++
      ) {
        await new Promise((r) => setTimeout(r, 10));
      }
      assert.ok(states.includes("backoff") && states.includes("ready"), states.join(","));
      for (let i = 0; i < 200 && daemon.registry.tunnels().length === 0; i++) {
        await new Promise((r) => setTimeout(r, 10));
      }
      assert.equal(tunnel.remotePort, remotePort, "the tunnel came back on the same port");
      assert.deepEqual(await tcpExchange(remotePort, pattern(100, 8)), pattern(100, 8));
    } finally {
      await client.close();
      daemon.stop();
      echo.listener.close();
    }
  });
});

describe("client SDK: TLS", () => {
  it("tls:// and wss:// with a trusted self-signed certificate", {
    skip: hasOpenssl ? false : "openssl is not installed",
  }, async () => {
    const identity = makeTestIdentity();
    const dir = mkdtempSync(join(tmpdir(), "tunnelmux-client-tls-"));
    writeFileSync(join(dir, "cert.pem"), identity.cert);
    writeFileSync(join(dir, "key.pem"), identity.key);
    const echo = await recordingEcho();
    const daemon = await startDaemon(echo.listener.port, {
      tls: { cert: join(dir, "cert.pem"), key: join(dir, "key.pem") },
    });
    try {
      for (const url of [`tls://${daemon.addresses.tcp}`, `wss://${daemon.addresses.websocket}`]) {
        const untrusting = await connect(url, { token: TOKEN, reconnect: false }).catch((e) => e);
        assert.ok(untrusting instanceof ClientError, `${url}: refused without the CA`);
        const client = await connect(url, {
          token: TOKEN,
          reconnect: false,
          caCerts: [identity.cert],
        });
        assert.deepEqual(await roundTrip(client.echo(), pattern(20_000, 9)), pattern(20_000, 9));
        await client.close();
      }
    } finally {
      daemon.stop();
      echo.listener.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

/** A TCP relay on 127.0.0.1 to `target`, which the test may switch; `drop` ends every pipe. */
async function switchableRelay(target: string) {
  const pipes = new Set<Socket>();
  const state = { target };
  const server = createServer((visitor) => {
    const [host, port] = [state.target.replace(/:\d+$/, ""), Number(state.target.split(":").pop())];
    const upstream = netConnect(port, host);
    for (const socket of [visitor, upstream]) {
      pipes.add(socket);
      socket.on("error", () => {});
      socket.on("close", () => {
        pipes.delete(socket);
        visitor.destroy();
        upstream.destroy();
      });
    }
    visitor.pipe(upstream).pipe(visitor);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    url: `tcp://127.0.0.1:${(server.address() as { port: number }).port}`,
    state,
    drop: () => pipes.forEach((socket) => socket.destroy()),
    close: () => {
      for (const socket of pipes) socket.destroy();
      server.close();
    },
  };
}

describe("client SDK: the wrong listener after a session was up", () => {
  it("is retried, not final: a redeploy or a proxy in between may answer wrongly for a while", async () => {
    const daemon = await startDaemon(1);
    const relay = await switchableRelay(daemon.addresses.tcp!);
    const client = await connect(relay.url, {
      token: TOKEN,
      reconnect: { initialMs: 20, maxMs: 40 },
    });
    try {
      const wrong = new Promise<RetryInfo>((resolve) =>
        client.on("retry", (retry) => retry.error.code === "wrong_protocol" && resolve(retry))
      );
      // The relay now reaches the daemon's WebSocket (HTTP) port: "answered in HTTP".
      relay.state.target = daemon.addresses.websocket!.replace(/\/tunnel$/, "");
      relay.drop();
      const retry = await withTimeout(wrong, 30_000, "a retry after the wrong answer");
      assert.match(retry.error.message, /answered in HTTP/);
      assert.notEqual(client.state, "closed");
      const ready = new Promise<void>((resolve) => client.on("ready", () => resolve()));
      relay.state.target = daemon.addresses.tcp!;
      await withTimeout(ready, 30_000, "a session again");
      assert.equal(client.state, "ready");
    } finally {
      await client.close();
      relay.close();
      daemon.stop();
    }
  });
});
