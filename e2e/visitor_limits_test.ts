// Visitors of a client's tunnels are bounded at once per tunnel (limits.visitorsPerTunnel) and per
// client across its tunnels (a client's limits.visitors): past either a newcomer is closed at once,
// counted, and a place that frees is taken again. A real daemon, the SDK as the client, real
// sockets as visitors, an echo service behind the tunnels.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import type { Socket } from "node:net";
import { type Client, connect } from "../client/mod.ts";
import type { Daemon } from "../daemon/daemon.ts";
import { startEchoServer, type TestServer } from "../testing/fake_servers.ts";
import { tcpConnect } from "../testing/visitors.ts";
import { waitFor } from "../testing/wait.ts";
import { portOf, startDaemonInProcess } from "./_in_process_daemon.ts";

const TOKEN = "visitor-limits-token-0123456789abcdef";

/** Resolves with what `socket` receives after `text` is sent, until it ends or echoes `text`. */
function echoOrClose(socket: Socket, text: string): Promise<string> {
  return new Promise((resolve) => {
    let got = "";
    socket.setEncoding("latin1");
    socket.on("data", (d: string) => {
      got += d;
      if (got === text) resolve(got);
    });
    // Visitors here allow half-open sockets: the daemon's close arrives as an end.
    socket.on("end", () => resolve(got));
    socket.on("close", () => resolve(got));
    socket.on("error", () => {});
    socket.write(text);
  });
}

describe("tunnels: a limit on visitors at once, per tunnel and per client", () => {
  let daemon: Daemon;
  let client: Client;
  let echo: TestServer;
  const held: Socket[] = [];

  before(async () => {
    echo = await startEchoServer();
    daemon = await startDaemonInProcess({
      listen: { tcp: "127.0.0.1:0", websocket: null, admin: null },
      limits: { visitorsPerTunnel: 2 },
      clients: [{
        name: "alice",
        token: TOKEN,
        expose: { ports: [0, "20000-32767"] },
        limits: { visitors: 3 },
      }],
    });
    client = await connect(`tcp://127.0.0.1:${portOf(daemon.addresses.tcp)}`, {
      token: TOKEN,
      reconnect: false,
    });
  });
  after(async () => {
    for (const socket of held) socket.destroy();
    await client?.close();
    await daemon?.stop();
    echo?.close();
  });

  /** A visitor of `port` that echoes once and stays connected. */
  async function hold(port: number): Promise<void> {
    const socket = await tcpConnect(port);
    held.push(socket);
    assert.equal(await echoOrClose(socket, "hold"), "hold");
  }

  it("closes a tunnel's newcomer past its cap, then the client's past the client's, counting each", async () => {
    const first = await client.expose({ local: `127.0.0.1:${echo.port}`, remotePort: 0 });
    const second = await client.expose({ local: `127.0.0.1:${echo.port}`, remotePort: 0 });
    await hold(first.remotePort);
    await hold(first.remotePort);
    const overTunnel = await tcpConnect(first.remotePort);
    assert.equal(await echoOrClose(overTunnel, "over"), "", "past the tunnel's cap: closed");
    assert.equal(daemon.counters.get("tunnel_visitor_limit"), 1);

    await hold(second.remotePort); // the client's third
    const overClient = await tcpConnect(second.remotePort);
    assert.equal(await echoOrClose(overClient, "over"), "", "past the client's cap: closed");
    assert.equal(daemon.counters.get("client_visitor_limit"), 1);

    // A place frees: the next visitor of the second tunnel is served.
    held.shift()!.destroy();
    await waitFor(async () => {
      const probe = await tcpConnect(second.remotePort);
      const text = await echoOrClose(probe, "again");
      probe.destroy();
      return text === "again";
    }, { message: "a visitor served once a place freed" });
  });
});
