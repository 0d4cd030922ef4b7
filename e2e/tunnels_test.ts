/**
 * End to end: the real daemon and client programs as separate processes (under the runtime running
 * the test), over TCP and over WebSocket, with plain TCP and HTTP services on 127.0.0.1. Visitors
 * are plain sockets or `fetch`/`node:http` in the test process; the SDK is used in-process only
 * where a client process would add nothing.
 */

import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { Buffer } from "node:buffer";
import { request as httpRequest } from "node:http";
import type { Socket } from "node:net";
import { connect as sdkConnect } from "../client/mod.ts";
import {
  assertSameBytes,
  cleanup,
  type ClientProcess,
  closedPort,
  daemonConfig,
  type DaemonProcess,
  httpGet,
  newToken,
  pattern,
  probePort,
  rssBytes,
  socketClosed,
  startAfterEofServer,
  startClient,
  startDaemon,
  startEchoServer,
  startHttpServer,
  startStallServer,
  startTcpServer,
  tcpConnect,
  tcpRoundTrip,
  type TestServer,
  waitFor,
} from "../testing/mod.ts";
import { prng } from "../util/crypto/prng.ts";

const MiB = 1024 * 1024;

after(cleanup);

/** The port of the "tunnel up" line whose local side is `local` (at log index ≥ `from`). */
async function tunnelPort(client: ClientProcess, local: string, from = 0): Promise<number> {
  const entry = await client.waitForLog(
    (e) => e.msg === "tunnel up" && e.local === local,
    15_000,
    from,
  );
  return Number(String(entry.remote).split(":").pop());
}

/** The listen port of the "forwarding" line whose target is `target`. */
async function forwardPort(client: ClientProcess, target: string): Promise<number> {
  const entry = await client.waitForLog((e) => e.msg === "forwarding" && e.target === target);
  return Number(String(entry.listen).split(":").pop());
}

/** POSTs `body` to `port``path` with `node:http`; resolves the status and the response body. */
function httpPost(
  port: number,
  path: string,
  body: Uint8Array,
): Promise<{ status: number; body: Uint8Array }> {
  return new Promise((resolve, reject) => {
    const req = httpRequest({
      host: "127.0.0.1",
      port,
      path,
      method: "POST",
      headers: { "content-length": body.length, "content-type": "application/octet-stream" },
      timeout: 15_000,
    }, (res) => {
      const chunks: Buffer[] = [];
      res.on("data", (c: Buffer) => chunks.push(c));
      res.on(
        "end",
        () => resolve({ status: res.statusCode ?? 0, body: new Uint8Array(Buffer.concat(chunks)) }),
      );
      res.on("error", reject);
    });
    req.on("timeout", () => req.destroy(new Error("http request timed out")));
    req.on("error", reject);
    req.end(body);
  });
}

/**
 * Writes up to `limit` bytes to `socket` with backpressure (waiting for "drain" each time a write
 * returns false) and never reads. `written` reports how far it got.
 */
function pumpWithoutReading(socket: Socket, limit: number): { readonly written: number } {
  let written = 0;
  const chunk = pattern(256 * 1024, 99);
  const pump = () => {
    while (written < limit && !socket.destroyed) {
      written += chunk.length;
      if (!socket.write(chunk)) return;
    }
  };
  socket.on("drain", pump);
  socket.pause();
  pump();
  return {
    get written() {
      return written;
    },
  };
}

/** What a forwarded connection saw: the bytes it got before it was closed. */
async function closedForward(port: number): Promise<Uint8Array> {
  return await tcpRoundTrip(port, new TextEncoder().encode("hello?"))
    .catch((error: Error) => {
      // A reset instead of a clean end also counts as "closed"; only a timeout is a failure.
      if (/timed out/.test(error.message)) throw error;
      return new Uint8Array(0);
    });
}

for (const transport of ["TCP", "WebSocket"] as const) {
  describe(`e2e over ${transport}`, () => {
    const laptop = newToken("laptop");
    const other = newToken("other");
    let echo: TestServer;
    let http: TestServer & { readonly requests: number };
    let afterEof: TestServer;
    let closed: number;
    let daemon: DaemonProcess;
    let config: Record<string, unknown>;
    let client: ClientProcess;
    const url = () => transport === "TCP" ? daemon.tcpUrl : daemon.wsUrl;

    before(async () => {
      echo = await startEchoServer();
      http = await startHttpServer();
      afterEof = await startAfterEofServer((request) =>
        // Answers only after EOF: the request length, then 512 KiB derived from it.
        Buffer.concat([Buffer.from(`${request.length}\n`), pattern(512 * 1024, request.length)])
      );
      // Nothing listens there: a port closed on 127.0.0.1 but asked for on 127.0.0.3, so that a
      // listener of this run given the same port on 127.0.0.1 cannot answer for it.
      closed = await closedPort();
      config = daemonConfig([
        {
          name: "laptop",
          token: laptop,
          expose: { ports: ["20000-30000", 0] },
          forward: [
            `127.0.0.1:${echo.port}`,
            `127.0.0.3:${closed}`,
            // Covers 169.254.169.254 but is not an exact metadata rule: metadata stays denied.
            "169.254.0.0/16:80",
          ],
        },
        { name: "other", token: other, expose: { ports: ["20000-30000", 0] } },
      ]);
      daemon = await startDaemon({ config });
      client = await startClient({
        server: url(),
        token: laptop,
        args: [
          "--expose",
          `0=${http.address}`,
          "--expose",
          `0=${echo.address}`,
          "--expose",
          `0=${afterEof.address}`,
          "--forward",
          `127.0.0.1:0=${echo.address}`,
        ],
      });
      await client.waitForForward();
    });

    after(cleanup);

    it("serves real HTTP through a reverse tunnel (1 MiB body intact)", async () => {
      const port = await tunnelPort(client, http.address);
      const expected = pattern(MiB, 7);
      const big = await httpGet(port, `/bytes?n=${MiB}&seed=7`);
      assert.equal(big.status, 200);
      assert.equal(big.headers.get("content-length"), String(MiB));
      assertSameBytes(big.body, expected, "GET /bytes");

      const upload = pattern(768 * 1024, 8);
      const posted = await httpPost(port, "/echo", upload);
      assert.equal(posted.status, 200);
      assertSameBytes(posted.body, upload, "POST /echo");

      const hello = await httpGet(port, "/hello");
      assert.equal(new TextDecoder().decode(hello.body), "hello");
      assert.equal((await httpGet(port, "/nowhere")).status, 404);
      assert.ok(http.requests >= 4);
    });

    it("echoes several MiB through a forward, intact", async () => {
      const port = await forwardPort(client, echo.address);
      const payloads = [pattern(8 * MiB, 11), pattern(3 * MiB + 17, 12)];
      const echoed = await Promise.all(
        payloads.map((p) => tcpRoundTrip(port, p, { timeoutMs: 30_000 })),
      );
      echoed.forEach((bytes, i) => assertSameBytes(bytes, payloads[i], `forward echo #${i}`));
    });

    it("carries a half-close through a reverse tunnel: the answer after EOF arrives whole", async () => {
      const port = await tunnelPort(client, afterEof.address);
      const request = pattern(100_000, 3);
      const response = await tcpRoundTrip(port, request);
      const expected = Buffer.concat([
        Buffer.from(`${request.length}\n`),
        pattern(512 * 1024, request.length),
      ]);
      assertSameBytes(response, expected, "answer after EOF");
    });

    it("carries a half-close the other way: the service ends first, the visitor still sends", async () => {
      const greeting = pattern(200_000, 4);
      const received: Uint8Array[] = [];
      const service = await startTcpServer((socket) => {
        const chunks: Buffer[] = [];
        socket.on("data", (c: Buffer) => chunks.push(c));
        socket.on("end", () => received.push(new Uint8Array(Buffer.concat(chunks))));
        socket.end(greeting); // half-close at once; keep reading
      });
      const proc = await startClient({
        server: url(),
        token: other,
        args: ["--expose", `0=${service.address}`],
      });
      const { port } = await proc.waitForTunnel();
      const visitor = await tcpConnect(port);
      const upload = pattern(300_000, 5);
      const chunks: Buffer[] = [];
      visitor.on("data", (c: Buffer) => chunks.push(c));
      // Only after the service's EOF does the visitor send, then half-close.
      visitor.on("end", () => visitor.end(upload));
      await waitFor(() => received.length === 1, { message: "the service to get the upload" });
      assertSameBytes(new Uint8Array(Buffer.concat(chunks)), greeting, "greeting before EOF");
      assertSameBytes(received[0], upload, "upload after the service's EOF");
      await socketClosed(visitor);
    });

    it("a tunnel whose local service is down closes its visitors and says why", async () => {
      const proc = await startClient({
        server: url(),
        token: other,
        args: ["--expose", `0=127.0.0.3:${closed}`],
      });
      const { port } = await proc.waitForTunnel();
      const from = proc.logs().length;
      assert.equal((await closedForward(port)).length, 0);
      const line = await proc.waitForLog(
        (e) => e.code === "local_dial_failed" && String(e.msg).includes(`${closed}`),
        15_000,
        from,
      );
      assert.equal(line.level, "warn");
      // The tunnel stays up for the next visitor.
      assert.equal((await closedForward(port)).length, 0);
      assert.equal(proc.hasExited, false);
    });

    it("echoes 200 concurrent visitors through one tunnel, each with its own payload", async () => {
      const port = await tunnelPort(client, echo.address);
      const before = echo.connections;
      const random = prng(200);
      const payloads = Array.from(
        { length: 200 },
        (_, i) => pattern(1 + Math.floor(random() * 64 * 1024), 1000 + i),
      );
      const echoed = await Promise.all(
        payloads.map((p) => tcpRoundTrip(port, p, { timeoutMs: 30_000 })),
      );
      echoed.forEach((bytes, i) => assertSameBytes(bytes, payloads[i], `visitor #${i}`));
      assert.ok(echo.connections - before >= 200, `${echo.connections - before} connections`);
    });

    it("a visitor that stops reading stalls only itself, and the daemon's memory stays bounded", async () => {
      const port = await tunnelPort(client, echo.address);
      const daemonBefore = rssBytes(daemon.pid);
      const clientBefore = rssBytes(client.pid);
      // The stalled visitor pushes up to 1 GiB into the echo and never reads the echo back.
      const limit = 1024 * MiB;
      const stalled = await tcpConnect(port);
      const pump = pumpWithoutReading(stalled, limit);
      await waitFor(() => pump.written >= 4 * MiB, {
        message: "the stalled visitor to send 4 MiB",
      });

      const random = prng(5);
      const payloads = Array.from(
        { length: 20 },
        (_, i) => pattern(64 * 1024 + Math.floor(random() * MiB), 2000 + i),
      );
      const echoed = await Promise.all(
        payloads.map((p) => tcpRoundTrip(port, p, { timeoutMs: 30_000 })),
      );
      echoed.forEach((bytes, i) => assertSameBytes(bytes, payloads[i], `visitor #${i}`));

      // Backpressure must stop the stalled writer well short of its 1 GiB: wait (bounded) until it
      // is blocked, i.e. no progress over 10 consecutive polls, then take the memory readings.
      let last = -1;
      let still = 0;
      await waitFor(() => {
        still = pump.written === last ? still + 1 : 0;
        last = pump.written;
        return still >= 10;
      }, { timeoutMs: 30_000, intervalMs: 50, message: "the stalled visitor to be held back" });
      const bound = 256 * MiB;
      const daemonGrowth = rssBytes(daemon.pid) - daemonBefore;
      const clientGrowth = rssBytes(client.pid) - clientBefore;
      assert.ok(
        pump.written < limit,
        `the stalled visitor could write everything (${pump.written} bytes)`,
      );
      assert.ok(daemonGrowth < bound, `daemon RSS grew by ${(daemonGrowth / MiB).toFixed(1)} MiB`);
      assert.ok(clientGrowth < bound, `client RSS grew by ${(clientGrowth / MiB).toFixed(1)} MiB`);
      stalled.destroy();
      // And the tunnel still works.
      const after = pattern(MiB, 77);
      assertSameBytes(await tcpRoundTrip(port, after), after, "after the stall");
    });

    it("a service that stops reading holds back only its own visitor", async () => {
      const stall = await startStallServer();
      const proc = await startClient({
        server: url(),
        token: other,
        args: ["--expose", `0=${stall.address}`, "--expose", `0=${echo.address}`],
      });
      const stallPort = await tunnelPort(proc, stall.address);
      const echoPort = await tunnelPort(proc, echo.address);
      const daemonBefore = rssBytes(daemon.pid);
      const limit = 1024 * MiB;
      const visitor = await tcpConnect(stallPort);
      const pump = pumpWithoutReading(visitor, limit);
      await waitFor(() => stall.active === 1 && pump.written >= 4 * MiB, {
        message: "the visitor to reach the stalled service",
      });
      // Same session, other tunnel: unaffected.
      const payloads = Array.from({ length: 10 }, (_, i) => pattern(512 * 1024, 3000 + i));
      const echoed = await Promise.all(payloads.map((p) => tcpRoundTrip(echoPort, p)));
      echoed.forEach((bytes, i) => assertSameBytes(bytes, payloads[i], `echo visitor #${i}`));
      let last = -1;
      let still = 0;
      await waitFor(() => {
        still = pump.written === last ? still + 1 : 0;
        last = pump.written;
        return still >= 10;
      }, { timeoutMs: 30_000, intervalMs: 50, message: "the visitor to be held back" });
      assert.ok(pump.written < limit, `the visitor could write everything (${pump.written} bytes)`);
      const growth = rssBytes(daemon.pid) - daemonBefore;
      assert.ok(growth < 256 * MiB, `daemon RSS grew by ${(growth / MiB).toFixed(1)} MiB`);
      // Once the service reads again, the held-back bytes flow.
      const before = pump.written;
      stall.release();
      await waitFor(() => pump.written > before, { message: "the visitor to move again" });
    });

    it("the client CLI exits 0 when stopped with SIGTERM or SIGINT", async () => {
      for (const signal of ["SIGTERM", "SIGINT"]) {
        const proc = await startClient({
          server: url(),
          token: other,
          args: ["--expose", `0=${echo.address}`],
        });
        await proc.waitForTunnel();
        proc.signal(signal);
        const { code } = await proc.exited;
        await proc.waitForLog((e) => e.msg === "closing" && e.signal === signal);
        assert.equal(code, 0, `exit code after ${signal}\n${proc.stderr()}`);
      }
    });

    it("errors: a wrong token is refused, logged, and other tunnels keep working", async () => {
      const from = daemon.logs().length;
      const intruder = await startClient({
        server: url(),
        token: newToken("wrong"),
        args: ["--expose", `0=${echo.address}`],
      });
      const { code } = await intruder.exited;
      assert.notEqual(code, 0);
      assert.match(intruder.stderr(), /unauthorized/);
      const failure = await daemon.waitForLog(
        (e) => /authentication failed|wrong token/.test(String(e.msg)),
        15_000,
        from,
      );
      assert.equal(failure.level, "warn");
      const port = await tunnelPort(client, echo.address);
      const payload = pattern(200_000, 21);
      assertSameBytes(await tcpRoundTrip(port, payload), payload, "tunnel of the other client");
    });

    it("errors: the CLI exits non-zero at once, naming the cause, on a URL it cannot use", async () => {
      const wsPort = daemon.wsAddress.split(":").pop();
      const cases: [string, RegExp][] = [
        [daemon.tcpAddress, /has no scheme: write tcp:\/\//],
        [`tcp://127.0.0.1:${wsPort}`, /answered in HTTP: .*use ws:\/\//],
      ];
      for (const [server, cause] of cases) {
        const cli = await startClient({
          server,
          token: other,
          args: ["--expose", `0=${echo.address}`],
        });
        const { code } = await cli.exited;
        assert.equal(code, 1, cli.stderr());
        assert.match(cli.stderr(), cause);
      }
    });

    it("errors: a disallowed expose port is refused clearly and the session survives", async () => {
      // The CLI stops on a refused --expose, with the daemon's reason.
      const cli = await startClient({
        server: url(),
        token: other,
        args: ["--expose", `80=${echo.address}`],
      });
      const { code } = await cli.exited;
      assert.notEqual(code, 0);
      assert.match(cli.stderr(), /not_allowed/);
      assert.match(cli.stderr(), /80/);

      // Over the SDK the session stays up after the refusal and can do the next thing.
      const sdk = await sdkConnect(url(), { token: other, reconnect: false });
      try {
        await assert.rejects(
          sdk.expose({ local: echo.address, remotePort: 80 }),
          (error: Error & { code?: string }) => {
            assert.equal(error.code, "not_allowed");
            assert.match(error.message, /80/);
            return true;
          },
        );
        assert.equal(sdk.state, "ready");
        const tunnel = await sdk.expose({ local: echo.address, remotePort: 0 });
        assert.ok(
          tunnel.remotePort >= 20000 && tunnel.remotePort <= 30000,
          `port ${tunnel.remotePort}`,
        );
        const payload = pattern(300_000, 31);
        assertSameBytes(
          await tcpRoundTrip(tunnel.remotePort, payload),
          payload,
          "after the refusal",
        );
      } finally {
        await sdk.close();
      }
    });

    it("errors: refused forwards are closed, the reason is logged in words, the session goes on", async () => {
      const targets = {
        notAllowed: http.address, // not in the allowlist
        metadata: "169.254.169.254:80",
        refused: `127.0.0.3:${closed}`, // allowed, nothing listens
      };
      const forwarder = await startClient({
        server: url(),
        token: laptop,
        args: [
          ...Object.values(targets).flatMap((t) => ["--forward", `127.0.0.1:0=${t}`]),
          "--forward",
          `127.0.0.1:0=${echo.address}`,
        ],
      });
      const expectations: [string, RegExp][] = [
        [targets.notAllowed, /NotAllowed/],
        [targets.metadata, /MetadataDenied/],
        [targets.refused, /DialRefused/],
      ];
      const httpBefore = http.connections;
      for (const [target, reason] of expectations) {
        const port = await forwardPort(forwarder, target);
        const from = forwarder.logs().length;
        const got = await closedForward(port);
        assert.equal(got.length, 0, `${target}: no bytes expected`);
        const line = await forwarder.waitForLog((e) => reason.test(String(e.msg)), 15_000, from);
        assert.match(String(line.msg), new RegExp(target.replace(/\./g, "\\.")));
      }
      assert.equal(http.connections, httpBefore, "the disallowed target was never dialled");
      await daemon.waitForLog((e) => e.msg === "forward refused" && e.reason === "not_allowed");
      await daemon.waitForLog((e) => e.msg === "forward refused" && e.reason === "metadata_denied");
      await daemon.waitForLog((e) => e.msg === "forward refused" && e.reason === "dial_refused");
      // The same session still forwards.
      const port = await forwardPort(forwarder, echo.address);
      const payload = pattern(MiB, 41);
      assertSameBytes(await tcpRoundTrip(port, payload), payload, "allowed forward afterwards");
      assert.equal(forwarder.hasExited, false);
    });

    it("killing the client mid-transfer closes its visitors and frees the daemon's port", async () => {
      const doomed = await startClient({
        server: url(),
        token: other,
        args: ["--expose", `0=${echo.address}`],
      });
      const { port } = await doomed.waitForTunnel();
      const visitors = await Promise.all(Array.from({ length: 4 }, () => tcpConnect(port)));
      let received = 0;
      for (const visitor of visitors) {
        visitor.on("data", (chunk: Buffer) => received += chunk.length);
        pumpWithoutReading(visitor, 64 * MiB);
        visitor.resume(); // read the echo: a live transfer
      }
      await waitFor(() => received >= 2 * MiB, { message: "the transfer to be under way" });
      doomed.signal("SIGKILL");
      await Promise.all(visitors.map((v) => socketClosed(v, 15_000)));
      await waitFor(async () => (await probePort(port)) === "refused", {
        message: `port ${port} to be freed`,
      });
      // The daemon is fine: the main client's tunnel works.
      const echoPort = await tunnelPort(client, echo.address);
      const payload = pattern(100_000, 51);
      assertSameBytes(await tcpRoundTrip(echoPort, payload), payload, "other tunnel");
    });

    it("after a daemon restart on the same ports the client reconnects and its tunnel comes back", async () => {
      const first = await startDaemon({ config });
      const server = transport === "TCP" ? first.tcpUrl : first.wsUrl;
      const survivor = await startClient({
        server,
        token: laptop,
        args: ["--expose", `0=${echo.address}`],
      });
      const { port } = await survivor.waitForTunnel();
      const payload = pattern(500_000, 61);
      assertSameBytes(await tcpRoundTrip(port, payload), payload, "before the restart");

      const mark = survivor.logs().length;
      assert.equal(await first.stop(), 0);
      const second = await startDaemon({
        config,
        listenTcp: first.tcpAddress,
        listenWs: first.wsAddress,
      });
      assert.equal(transport === "TCP" ? second.tcpUrl : second.wsUrl, server);
      const back = await survivor.waitForTunnel(mark, 30_000);
      assert.equal(back.port, port, "the tunnel keeps its port");
      await second.waitForLog((e) => e.msg === "session ready" && e.client === "laptop");
      assertSameBytes(await tcpRoundTrip(back.port, payload), payload, "after the restart");
      assert.equal(survivor.hasExited, false);
    });

    it("stream windows of 32 MiB on both sides (limits.streamWindow, --stream-window) carry data", async () => {
      // Above the default frame limit too: each side must accept frames of a whole window.
      const wide = await startDaemon({ config: { ...config, limits: { streamWindow: 32 * MiB } } });
      const proc = await startClient({
        server: transport === "TCP" ? wide.tcpUrl : wide.wsUrl,
        token: laptop,
        args: ["--expose", `0=${echo.address}`, "--stream-window", "32m"],
      });
      const { port } = await proc.waitForTunnel();
      const payload = pattern(24 * MiB, 62);
      assertSameBytes(await tcpRoundTrip(port, payload, { timeoutMs: 60_000 }), payload, "24 MiB");
      assert.equal(proc.hasExited, false);
    });
  });
}
