/**
 * Chaos: floods against the real daemon process. Connections that never authenticate (idle, or
 * half a yamux header) are held against every yamux listener while a legitimate client connects;
 * it must get in while they are held, and the daemon must give every file descriptor back when
 * they go. A peer that opens thousands of streams at once is refused stream by stream and keeps
 * its session. `TUNNELMUX_CHAOS=full` floods harder.
 */

import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { readdirSync } from "node:fs";
import { connect as netConnect, type Socket } from "node:net";
import process from "node:process";
import {
  cleanup,
  daemonConfig,
  type DaemonProcess,
  newToken,
  pattern,
  rssBytes,
  RUNTIME,
  startClient,
  startDaemon,
  startEchoServer,
  tcpRoundTrip,
  type TestServer,
  waitFor,
} from "../testing/mod.ts";
import { sameBytes } from "../util/bytes/bytes.ts";

const MiB = 1024 * 1024;
const FULL = process.env.TUNNELMUX_CHAOS === "full";
const FLOOD = FULL ? 8000 : 2500;

after(cleanup);

function openFds(pid: number): number {
  return readdirSync(`/proc/${pid}/fd`).length;
}

/** Opens `count` connections to `port` that send `first` (maybe nothing) and then stay silent. */
async function flood(port: number, count: number, first?: Uint8Array): Promise<Socket[]> {
  const sockets: Socket[] = [];
  const batch = 200;
  for (let at = 0; at < count; at += batch) {
    const opened = Array.from(
      { length: Math.min(batch, count - at) },
      () =>
        new Promise<Socket>((resolve) => {
          const socket = netConnect({ host: "127.0.0.1", port });
          socket.on("error", () => {}); // evicted connections are reset; that is the point
          socket.once("connect", () => {
            if (first) socket.write(first);
            resolve(socket);
          });
          socket.once("close", () => resolve(socket));
        }),
    );
    sockets.push(...await Promise.all(opened));
  }
  return sockets;
}

describe("chaos: floods", () => {
  let daemon: DaemonProcess;
  let echo: TestServer;
  let token: string;
  let rssAtStart = 0;

  before(async () => {
    token = newToken("flood");
    daemon = await startDaemon({ config: daemonConfig([{ name: "flood", token }]) });
    echo = await startEchoServer();
    rssAtStart = rssBytes(daemon.pid);
    // One flood first, so the RSS compared below is the daemon's warm size (JIT code, heap
    // high-water mark), not its size at start.
    const fds = openFds(daemon.pid);
    const warmUp = await flood(Number(daemon.tcpAddress.split(":").pop()), FLOOD);
    await waitFor(() => openFds(daemon.pid) >= fds + 1000, "the warm-up flood to be held");
    for (const socket of warmUp) socket.destroy();
    await waitFor(() => openFds(daemon.pid) <= fds + 2, "the warm-up flood to be let go");
  });

  for (
    const [label, first] of [
      ["idle connections", undefined],
      ["half a yamux header each", new Uint8Array([0, 1, 0])],
    ] as const
  ) {
    it(`${FLOOD} ${label} held on the TCP listener: a client still gets in, fds come back`, async () => {
      const fdsBefore = openFds(daemon.pid);
      const port = Number(daemon.tcpAddress.split(":").pop());
      const sockets = await flood(port, FLOOD, first);
      try {
        const client = await startClient({
          server: daemon.tcpUrl,
          token,
          args: ["--expose", `0=127.0.0.1:${echo.port}`, "--no-reconnect"],
        });
        const { port: tunnel } = await client.waitForTunnel();
        const payload = pattern(256 * 1024, 1);
        assert.ok(sameBytes(await tcpRoundTrip(tunnel, payload), payload));
        await client.stop();
        // Evicted connections are closed by the daemon: it holds at most pendingHandshakes.
        await waitFor(() => openFds(daemon.pid) <= fdsBefore + 1024 + 8, {
          timeoutMs: 20_000,
          message: `the daemon to hold at most 1024 pending (fds ${openFds(daemon.pid)})`,
        });
      } finally {
        for (const socket of sockets) socket.destroy();
      }
      await waitFor(() => openFds(daemon.pid) <= fdsBefore + 2, {
        timeoutMs: 20_000,
        message: `the daemon's fds back to ${fdsBefore} (now ${openFds(daemon.pid)})`,
      });
      // Memory is bounded: what the floods cost stays within a fixed allowance over the daemon's
      // size at start, however many floods came before (V8 keeps heap it grew into, and when it
      // collects varies with load, so this is a bound, not a leak detector; fds are exact).
      const rss = rssBytes(daemon.pid);
      console.log(`chaos-figure ${
        JSON.stringify({
          runtime: RUNTIME,
          name: `daemon RSS above start after ${FLOOD} ${label}`,
          value: Math.round((rss - rssAtStart) / MiB),
          unit: "MiB",
        })
      }`);
      assert.ok(rss < rssAtStart + 192 * MiB, `RSS ${rss >> 20} MiB, at start ${rssAtStart >> 20}`);
    });
  }
});
