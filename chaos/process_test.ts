/**
 * Chaos: slow and half-open connections against the WebSocket and admin listeners of the real
 * daemon, kills of either side, and faults between the client and its local service. Each case
 * ends with a fresh visitor through the tunnel: the daemon must still serve.
 *
 * Figures (how long recovery took) are printed as `chaos-figure {json}` lines for
 * docs/reliability.md; nothing here asserts a duration.
 */

import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { readdirSync } from "node:fs";
import { connect as netConnect, type Socket } from "node:net";
import process from "node:process";
import {
  cleanup,
  closedPort,
  concat,
  daemonConfig,
  type DaemonProcess,
  newToken,
  pattern,
  RUNTIME,
  startClient,
  startDaemon,
  startEchoServer,
  tcpRoundTrip,
  type TestServer,
  waitFor,
} from "../testing/mod.ts";
import { startToxiproxy, type Toxiproxy } from "../testing/toxiproxy.ts";

const FULL = process.env.TUNNELMUX_CHAOS === "full";
const sha256 = (bytes: Uint8Array) => createHash("sha256").update(bytes).digest("hex");

after(cleanup);

/** Prints one measured figure for docs/reliability.md (collected by scripts/chaos.sh). */
function figure(name: string, value: number, unit: string): void {
  console.log(`chaos-figure ${JSON.stringify({ runtime: RUNTIME, name, value, unit })}`);
}

function openFds(pid: number): number {
  return readdirSync(`/proc/${pid}/fd`).length;
}

/**
 * Sends `payload` to an echo service behind `port` and reads until as many bytes came back, without
 * half-closing: toxiproxy does not carry a half-close through (it closes both directions), so
 * visitors of a toxiproxied service must not rely on one.
 */
function echoExchange(port: number, payload: Uint8Array): Promise<Uint8Array> {
  return new Promise((resolve, reject) => {
    const socket = netConnect({ host: "127.0.0.1", port });
    const chunks: Uint8Array[] = [];
    let got = 0;
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error(`echo exchange: ${got} of ${payload.length} bytes in 15 s`));
    }, 15_000);
    const finish = (error?: Error) => {
      clearTimeout(timer);
      socket.destroy();
      if (error) reject(error);
      else resolve(concat(chunks));
    };
    socket.on("data", (chunk: Uint8Array) => {
      chunks.push(new Uint8Array(chunk));
      got += chunk.length;
      if (got >= payload.length) finish();
    });
    socket.on("error", (error) => finish(error));
    socket.on("close", () => finish(new Error(`closed after ${got} of ${payload.length} bytes`)));
    socket.on("connect", () => socket.write(payload));
  });
}

/** Opens `count` connections to `port` that each send `first` and then nothing more. */
async function slowClients(port: number, count: number, first: string): Promise<Socket[]> {
  return await Promise.all(
    Array.from({ length: count }, () =>
      new Promise<Socket>((resolve) => {
        const socket = netConnect({ host: "127.0.0.1", port, allowHalfOpen: true });
        socket.on("error", () => {});
        socket.resume(); // read (and drop) what the daemon answers, so its end is seen
        socket.once("connect", () => {
          socket.write(first);
          resolve(socket);
        });
        socket.once("close", () => resolve(socket));
      })),
  );
}

describe("chaos: slow and half-open connections on the WebSocket and admin listeners", () => {
  let daemon: DaemonProcess;
  let adminPort: number;
  const token = newToken("slow");

  before(async () => {
    daemon = await startDaemon({
      config: {
        ...daemonConfig([{ name: "slow", token }]),
        limits: { handshakeTimeoutMs: 500 },
      },
      args: ["--listen-admin", "127.0.0.1:0"],
    });
    const admin = /admin API on http:\/\/(\S+)/.exec(daemon.stdout())?.[1] ??
      await waitFor(() => /admin API on http:\/\/(\S+)/.exec(daemon.stdout())?.[1], "admin");
    adminPort = Number(admin.split(":").pop());
  });

  const slow = [
    ["WebSocket", "GET /tunnel HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nX-Slow: "],
    ["admin", "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: "],
  ] as const;
  for (const [listener, head] of slow) {
    it(`${listener}: connections that never finish their request are closed by the daemon`, async () => {
      const fdsBefore = openFds(daemon.pid);
      const port = listener === "admin" ? adminPort : Number(daemon.wsAddress.split(":").pop());
      const count = FULL ? 500 : 50;
      const started = Date.now();
      const sockets = await slowClients(port, count, head);
      try {
        // Our servers' request deadline: limits.handshakeTimeoutMs here for the WebSocket
        // listener, 10 s by default for the admin listener.
        await waitFor(() => sockets.every((s) => s.readableEnded || s.destroyed), {
          timeoutMs: 30_000,
          message: `the daemon to close ${count} slow ${listener} connections`,
        });
        figure(`slow ${listener} connections closed after`, Date.now() - started, "ms");
      } finally {
        for (const socket of sockets) socket.destroy();
      }
      await waitFor(() => openFds(daemon.pid) <= fdsBefore + 2, {
        timeoutMs: 15_000,
        message: `fds back to ${fdsBefore} (now ${openFds(daemon.pid)})`,
      });
      const health = await fetch(`http://127.0.0.1:${adminPort}/healthz`);
      assert.equal(health.status, 200);
      await health.body?.cancel();
    });
  }
});

describe("chaos: kills and local-service faults", () => {
  let echo: TestServer;
  let toxiproxy: Toxiproxy;

  before(async () => {
    echo = await startEchoServer();
    toxiproxy = await startToxiproxy();
  });

  it("SIGKILL of the client: the daemon frees its port at once, and a new client gets it", async () => {
    const token = newToken("killed");
    const daemon = await startDaemon({ config: daemonConfig([{ name: "killed", token }]) });
    const client = await startClient({
      server: daemon.tcpUrl,
      token,
      args: ["--expose", `0=127.0.0.1:${echo.port}`],
    });
    const { port } = await client.waitForTunnel();
    const from = daemon.logs().length;
    const killedAt = Date.now();
    client.signal("SIGKILL");
    await daemon.waitForLog((e) => e.msg === "tunnel down", 15_000, from);
    figure("tunnel released after client SIGKILL", Date.now() - killedAt, "ms");
    const next = await startClient({
      server: daemon.tcpUrl,
      token,
      args: ["--expose", `${port}=127.0.0.1:${echo.port}`],
    });
    assert.equal((await next.waitForTunnel()).port, port);
    const payload = pattern(64 * 1024, 2);
    assert.equal(sha256(await tcpRoundTrip(port, payload)), sha256(payload));
    await next.stop();
    await daemon.stop();
  });

  it("SIGKILL of the daemon: the client reconnects to its successor and gets its port back", async () => {
    const token = newToken("phoenix");
    const listenTcp = `127.0.0.1:${await closedPort()}`;
    const config = daemonConfig([{ name: "phoenix", token }]);
    const first = await startDaemon({ config, listenTcp, listenWs: "off" });
    const client = await startClient({
      server: first.tcpUrl,
      token,
      args: ["--expose", `0=127.0.0.1:${echo.port}`],
    });
    const { port } = await client.waitForTunnel();
    const from = client.logs().length;
    first.signal("SIGKILL");
    await first.exited;
    const second = await startDaemon({ config, listenTcp, listenWs: "off" });
    const restartedAt = Date.now();
    const again = await client.waitForTunnel(from, 30_000);
    figure("tunnel back after daemon restart", Date.now() - restartedAt, "ms");
    assert.equal(again.port, port, "the client asks for its old port and gets it");
    const payload = pattern(64 * 1024, 3);
    assert.equal(sha256(await tcpRoundTrip(port, payload)), sha256(payload));
    await client.stop();
    await second.stop();
  });

  for (
    const [fault, toxic] of [
      ["a reset", { type: "reset_peer", attributes: { timeout: 0 } }],
      ["a 1 KiB limit", { type: "limit_data", attributes: { bytes: 1024 } }],
    ] as const
  ) {
    it(`${fault} between client and local service cuts one visitor; the next one works`, async () => {
      const token = newToken("local");
      const daemon = await startDaemon({ config: daemonConfig([{ name: "local", token }]) });
      const link = await toxiproxy.proxy(`local-${toxic.type}`, echo.port);
      const client = await startClient({
        server: daemon.tcpUrl,
        token,
        args: ["--expose", `0=127.0.0.1:${link.port}`],
      });
      const { port } = await client.waitForTunnel();
      const name = await link.add(toxic);
      const payload = pattern(256 * 1024, 4);
      const cut = await echoExchange(port, payload).then(
        (back) => back.length < payload.length,
        () => true,
      );
      assert.ok(cut, "the visitor saw the local service's fault");
      await link.remove(name);
      const back = await echoExchange(port, payload);
      assert.equal(back.length, payload.length, "the next visitor gets every byte");
      assert.equal(sha256(back), sha256(payload));
      assert.ok(!client.hasExited && !daemon.hasExited);
      await client.stop();
      await daemon.stop();
    });
  }
});
