/**
 * Chaos: the real daemon and client programs with toxiproxy between them, or between the client
 * and its local service, and with one side frozen (SIGSTOP). Every case checks what a user would:
 * bytes arrive intact (compared by hash), the tunnel comes back, nothing is left holding the port,
 * and a fresh visitor works afterwards. This file is the fast subset that `npm test` runs; cases
 * that take long run only with `TUNNELMUX_CHAOS=full` (`npm run chaos`).
 *
 * Nothing here asserts a duration: how fast the daemon notices and recovers is measured by
 * `npm run chaos` and written up in docs/reliability.md.
 */

import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import process from "node:process";
import {
  cleanup,
  type ClientProcess,
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
import { type Link, startToxiproxy, type Toxiproxy } from "../testing/toxiproxy.ts";

const MiB = 1024 * 1024;
const FULL = process.env.TUNNELMUX_CHAOS === "full";

/** Prints one measured figure for docs/reliability.md (collected by scripts/chaos.sh). */
function figure(name: string, value: number, unit: string): void {
  console.log(`chaos-figure ${JSON.stringify({ runtime: RUNTIME, name, value, unit })}`);
}

const sha256 = (bytes: Uint8Array) => createHash("sha256").update(bytes).digest("hex");

after(cleanup);

describe("chaos: the link between client and daemon", () => {
  let toxiproxy: Toxiproxy;
  let daemon: DaemonProcess;
  let echo: TestServer;
  let token: string;

  before(async () => {
    toxiproxy = await startToxiproxy();
    token = newToken("chaos");
    daemon = await startDaemon({
      config: daemonConfig([{ name: "chaos", token }]),
      // Shorter than the client's (300 + 600 ms), so in a blackhole the daemon's keepalive gives
      // up first: an accepting side pings only a little after its interval (see
      // protocol/config.ts), and once the client gives up, the link may pass its close along.
      args: ["--keepalive-interval-ms", "200", "--keepalive-timeout-ms", "400"],
    });
    echo = await startEchoServer();
  });

  /** A client CLI whose connection to the daemon goes through a fresh toxiproxy link. */
  async function clientThroughLink(
    name: string,
    transport: "tcp" | "ws",
  ): Promise<{ link: Link; client: ClientProcess; port: number }> {
    const address = transport === "tcp" ? daemon.tcpAddress : daemon.wsAddress;
    const link = await toxiproxy.proxy(name, Number(address.split(":").pop()));
    const server = transport === "tcp"
      ? `tcp://127.0.0.1:${link.port}`
      : `ws://127.0.0.1:${link.port}/tunnel`;
    const client = await startClient({
      server,
      token,
      args: [
        "--expose",
        `0=127.0.0.1:${echo.port}`,
        "--keepalive-interval-ms",
        "300",
        "--keepalive-timeout-ms",
        "600",
      ],
    });
    const { port } = await client.waitForTunnel();
    return { link, client, port };
  }

  for (const transport of ["tcp", "ws"] as const) {
    it(`${transport}: carries 4 MiB intact through latency, jitter and 1-byte-to-64-byte segments`, async () => {
      const { link, client, port } = await clientThroughLink(`slice-${transport}`, transport);
      try {
        await link.add({ type: "latency", attributes: { latency: 5, jitter: 5 } });
        await link.add({
          type: "slicer",
          attributes: { average_size: 32, size_variation: 31, delay: 0 },
        });
        await link.add({
          type: "slicer",
          stream: "upstream",
          attributes: { average_size: 32, size_variation: 31, delay: 0 },
        });
        const payload = pattern((FULL ? 32 : 4) * MiB, 11);
        const back = await tcpRoundTrip(port, payload, { timeoutMs: 120_000 });
        assert.equal(back.length, payload.length);
        assert.equal(sha256(back), sha256(payload));
      } finally {
        await client.stop();
      }
    });

    it(`${transport}: after repeated link resets the tunnel comes back on its port and works`, async () => {
      const { link, client, port } = await clientThroughLink(`reset-${transport}`, transport);
      try {
        for (let round = 0; round < (FULL ? 10 : 3); round++) {
          const from = client.logs().length;
          // Cut every connection and refuse new ones for a moment, as a flapping link does.
          await link.setEnabled(false);
          await client.waitForLog((e) => e.msg === "state: backoff", 15_000, from);
          await link.setEnabled(true);
          const enabledAt = Date.now();
          const again = await client.waitForTunnel(from, 30_000);
          figure(`${transport}: tunnel back after a link reset`, Date.now() - enabledAt, "ms");
          assert.equal(again.port, port, "the tunnel keeps its public port");
          const payload = pattern(64 * 1024, round);
          assert.equal(sha256(await tcpRoundTrip(port, payload)), sha256(payload));
        }
      } finally {
        await client.stop();
      }
    });

    it(`${transport}: a blackholed link is noticed by keepalive on both sides, and recovers`, async () => {
      const { link, client, port } = await clientThroughLink(`blackhole-${transport}`, transport);
      try {
        const clientFrom = client.logs().length;
        const daemonFrom = daemon.logs().length;
        // timeout 0: data is swallowed and the connection is never closed.
        const cutAt = Date.now();
        const name = await link.add({ type: "timeout", attributes: { timeout: 0 } });
        const upstream = await link.add({
          type: "timeout",
          stream: "upstream",
          attributes: { timeout: 0 },
        });
        await client.waitForLog((e) => e.msg === "state: backoff", 15_000, clientFrom);
        figure(
          `${transport}: blackhole noticed by the client (its keepalive 300+600 ms, or the daemon's close)`,
          Date.now() - cutAt,
          "ms",
        );
        await daemon.waitForLog(
          (e) => e.msg === "session closed" && String(e.reason).includes("keepalive"),
          15_000,
          daemonFrom,
        );
        figure(
          `${transport}: blackhole noticed by the daemon (keepalive 200+400 ms)`,
          Date.now() - cutAt,
          "ms",
        );
        await link.remove(name);
        await link.remove(upstream);
        const again = await client.waitForTunnel(clientFrom, 30_000);
        assert.equal(again.port, port);
        const payload = pattern(16 * 1024, 5);
        assert.equal(sha256(await tcpRoundTrip(port, payload)), sha256(payload));
      } finally {
        await client.stop();
      }
    });
  }

  it("a frozen client (SIGSTOP) is dropped by keepalive, its port freed, and it recovers on SIGCONT", async () => {
    const { client, port } = await clientThroughLink("freeze", "tcp");
    const daemonFrom = daemon.logs().length;
    const clientFrom = client.logs().length;
    const stoppedAt = Date.now();
    client.signal("SIGSTOP");
    try {
      await daemon.waitForLog(
        (e) => e.msg === "session closed" && String(e.reason).includes("keepalive"),
        15_000,
        daemonFrom,
      );
      await daemon.waitForLog((e) => e.msg === "tunnel down", 15_000, daemonFrom);
      figure(
        "frozen client's tunnel released (daemon keepalive 200+400 ms)",
        Date.now() - stoppedAt,
        "ms",
      );
    } finally {
      client.signal("SIGCONT");
    }
    const again = await client.waitForTunnel(clientFrom, 30_000);
    assert.equal(again.port, port, "the freed port is still there for its client");
    const payload = pattern(16 * 1024, 9);
    assert.equal(sha256(await tcpRoundTrip(port, payload)), sha256(payload));
    await client.stop();
  });

  it("the daemon still serves a fresh client after all of the above", async () => {
    const client = await startClient({
      server: daemon.tcpUrl,
      token,
      args: ["--expose", `0=127.0.0.1:${echo.port}`],
    });
    const { port } = await client.waitForTunnel();
    const payload = pattern(MiB, 3);
    assert.equal(sha256(await tcpRoundTrip(port, payload)), sha256(payload));
    await client.stop();
    await waitFor(() => !daemon.hasExited, "the daemon to be alive");
  });
});
