// The HTTP and HTTPS ports' visitor connections are bounded together (limits.httpConnections):
// past the limit a newcomer is closed at once, counted, and a place that frees is taken again.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { connect as netConnect, type Socket } from "node:net";
import type { Daemon } from "../daemon/daemon.ts";
import { portOf, startDaemonInProcess } from "./_in_process_daemon.ts";
import { waitFor } from "../testing/wait.ts";

/** A request nobody holds the name of: 404, and the connection closed as asked. */
const NOT_FOUND = "GET / HTTP/1.1\r\nHost: nobody.tunnels.test\r\nConnection: close\r\n\r\n";

/** A connection to `port`: resolves once connected. */
function open(port: number): Promise<Socket> {
  return new Promise((resolve, reject) => {
    const socket = netConnect({ host: "127.0.0.1", port }, () => resolve(socket));
    socket.on("error", reject);
  });
}

/** Sends `request` (if any) and resolves with what came back before the daemon closed. */
function answer(socket: Socket, request?: string): Promise<string> {
  return new Promise((resolve) => {
    let text = "";
    socket.setEncoding("latin1");
    socket.on("data", (d: string) => text += d);
    socket.on("close", () => resolve(text));
    socket.on("error", () => {});
    if (request) socket.write(request);
  });
}

describe("HTTP and HTTPS ports: a limit on open visitor connections", () => {
  let daemon: Daemon;
  let http: number;
  let https: number;

  before(async () => {
    daemon = await startDaemonInProcess({
      listen: {
        tcp: "127.0.0.1:0",
        websocket: null,
        admin: null,
        http: "127.0.0.1:0",
        https: "127.0.0.1:0",
      },
      http: { domain: "tunnels.test" },
      limits: { httpConnections: 2 },
      clients: [{ name: "a", token: "http-limits-token-0123456789abcdef" }],
    });
    http = portOf(daemon.addresses.http);
    https = portOf(daemon.addresses.https);
  });
  after(() => daemon.stop());

  it("closes a newcomer past the limit at once, counting it, and takes one again when a place frees", async () => {
    // Two silent connections hold both places: one on each port.
    const heldHttp = await open(http);
    const heldHttps = await open(https);
    // Give the daemon the moment it needs to accept them.
    await waitFor(async () => {
      const probe = await open(http);
      const text = await answer(probe, NOT_FOUND);
      return text === "";
    }, { message: "a third connection closed without an answer" });
    const over = await open(https);
    assert.equal(await answer(over), "", "over the limit on the HTTPS port too");
    assert.ok(daemon.counters.get("http_connection_limit") >= 2);
    // A place frees: a newcomer is served (404: nobody holds the name).
    heldHttp.destroy();
    await waitFor(async () => {
      const probe = await open(http);
      const text = await answer(probe, NOT_FOUND);
      return /^HTTP\/1\.1 404 /.test(text);
    }, { message: "a connection served again" });
    heldHttps.destroy();
  });
});
