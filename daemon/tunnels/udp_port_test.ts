// UdpPort on a real loopback UDP socket, its routes real UdpTunnels whose clients echo each flow
// (each client's headers say which flows it was given).
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { openUdp, type UdpSocket } from "../../transport/udp.ts";
import { waitFor } from "../../testing/wait.ts";
import { pattern } from "../../util/bytes/bytes.ts";
import { Logger } from "../../util/log.ts";
import { echoClient } from "./_echo_client.ts";
import { UdpPort } from "./udp_port.ts";
import { UdpTunnel } from "./udp_tunnel.ts";

const log = new Logger({ level: "error", format: "json", sink: () => {} });

/** A visitor's socket and how many datagrams it received. */
async function visitor() {
  const got: Uint8Array[] = [];
  const socket: UdpSocket = await openUdp({ onMessage: (b) => void got.push(b) });
  return { socket, got, address: `127.0.0.1:${socket.local.port}` };
}

/** A port with two UdpTunnels on it (`t-1`, `t-2`), each with an echoing client of its own. */
async function twoRoutes() {
  const port = await UdpPort.open({ bindHost: "127.0.0.1", port: 0 });
  const clients = [echoClient(), echoClient()];
  const tunnels = await Promise.all(clients.map((c, i) =>
    UdpTunnel.open({
      id: `t-${i + 1}`,
      client: `c${i + 1}`,
      session: c.near,
      bindHost: "127.0.0.1",
      port: port.port,
      log,
      udpPort: port,
    })
  ));
  for (const tunnel of tunnels) port.attach(tunnel);
  const remotes = (i: number) =>
    clients[i].headers.map((h) => (h as { remote: string }).remote).sort();
  return {
    port,
    tunnels,
    remotes,
    close: () => {
      for (const t of tunnels) t.close();
      void port.close();
      for (const c of clients) (c.near.close(), c.far.close());
    },
  };
}

describe("UdpPort", () => {
  it("gives each new flow to a route in turn, and keeps a flow on its route", async () => {
    const { port, tunnels, remotes, close } = await twoRoutes();
    const visitors = await Promise.all([0, 1, 2, 3].map(() => visitor()));
    try {
      for (const [i, v] of visitors.entries()) {
        v.socket.send(pattern(5, i), "127.0.0.1", port.port);
        await waitFor(() => v.got.length === 1, `visitor ${i}'s echo`);
      }
      const byRoute = [remotes(0), remotes(1)];
      assert.deepEqual(byRoute[0], [visitors[0].address, visitors[2].address].sort());
      assert.deepEqual(byRoute[1], [visitors[1].address, visitors[3].address].sort());
      // Many datagrams later, each flow is still its route's: no new stream anywhere.
      for (let round = 0; round < 5; round++) {
        for (const v of visitors) v.socket.send(pattern(5, round), "127.0.0.1", port.port);
      }
      await waitFor(() => visitors.every((v) => v.got.length === 6), "every echo");
      assert.deepEqual([remotes(0), remotes(1)], byRoute);
      assert.deepEqual(tunnels.map((t) => t.udp.flows), [2, 2]);
      assert.deepEqual(tunnels.map((t) => t.udp.datagramsIn), [12, 12]);
      assert.deepEqual(tunnels[0].flows.sort(), byRoute[0]);
      assert.equal(port.flows.length, 4);
    } finally {
      for (const v of visitors) v.socket.close();
      close();
    }
  });

  it("ends a closing route's flows only; their visitors' next datagrams go to the route left", async () => {
    const { port, tunnels, remotes, close } = await twoRoutes();
    const visitors = await Promise.all([0, 1, 2, 3].map(() => visitor()));
    try {
      for (const v of visitors) {
        v.socket.send(pattern(3, 1), "127.0.0.1", port.port);
        await waitFor(() => v.got.length === 1, "an echo");
      }
      port.detach(tunnels[0]);
      tunnels[0].close();
      await waitFor(() => tunnels[0].udp.flowsOpen === 0, "the first route's flows to end");
      assert.equal(tunnels[1].udp.flowsOpen, 2, "the other route's flows go on");
      for (const v of visitors) {
        v.socket.send(pattern(3, 2), "127.0.0.1", port.port);
        await waitFor(() => v.got.length === 2, "an echo after");
      }
      assert.deepEqual(remotes(1), visitors.map((v) => v.address).sort());
      assert.equal(tunnels[1].udp.flows, 4);
      assert.equal(tunnels[0].udp.flows, 2);
    } finally {
      for (const v of visitors) v.socket.close();
      close();
    }
  });

  it("skips a route that is not up; with none up, a new flow is refused, counted by the first", async () => {
    const { port, tunnels, close } = await twoRoutes();
    const a = await visitor();
    const b = await visitor();
    try {
      tunnels[0].reportedHealthy = false;
      a.socket.send(pattern(2, 1), "127.0.0.1", port.port);
      b.socket.send(pattern(2, 2), "127.0.0.1", port.port);
      await waitFor(() => a.got.length === 1 && b.got.length === 1, "both echoes");
      assert.deepEqual(tunnels.map((t) => t.udp.flows), [0, 2]);
      tunnels[1].reportedHealthy = false;
      const c = await visitor();
      try {
        c.socket.send(pattern(2, 3), "127.0.0.1", port.port);
        await waitFor(() => tunnels[0].udp.drops.refused === 1, "the flow refused");
        assert.equal(tunnels[1].udp.drops.refused, 0);
        assert.equal(c.got.length, 0);
      } finally {
        c.socket.close();
      }
    } finally {
      a.socket.close();
      b.socket.close();
      close();
    }
  });

  it("releases its port on close", async () => {
    const port = await UdpPort.open({ bindHost: "127.0.0.1", port: 0 });
    const number = port.port;
    await port.close();
    const rebound = await waitFor(
      () => openUdp({ port: number, onMessage: () => {} }).catch(() => undefined),
      "the port to be free",
    );
    rebound.close();
  });
});
