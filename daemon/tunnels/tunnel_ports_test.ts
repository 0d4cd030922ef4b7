// TunnelPorts on real loopback ports: one listener per address, bound with its first route and
// closed with its last. Fixed ports are taken from 20000-32767 where they can be bound now.
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { createConnection, createServer, type Server } from "node:net";
import { waitFor } from "../../testing/wait.ts";
import { Logger } from "../../util/log.ts";
import type { Route } from "./port_listener.ts";
import { TunnelPorts } from "./tunnel_ports.ts";
import type { UdpRoute } from "./udp_port.ts";
import { newUdpCounters } from "../../tunnel/udp/udp_flow.ts";
import { openUdp } from "../../transport/udp.ts";

const log = new Logger({ level: "error", format: "json", sink: () => {} });

function route(id: string): Route {
  return { id, local: true, healthy: true, active: 0, visitor: (v) => v.close() };
}

function udpRoute(id: string): UdpRoute {
  return {
    id,
    local: true,
    healthy: true,
    active: 0,
    udp: newUdpCounters(),
    flow: () => undefined,
  };
}

/** Whether UDP `host:port` can be bound now. */
async function canBindUdp(port: number, host = "127.0.0.1"): Promise<boolean> {
  const socket = await openUdp({ hostname: host, port, onMessage: () => {} }).catch(() =>
    undefined
  );
  socket?.close();
  return socket !== undefined;
}

/** Whether `host:port` can be bound now (nobody listens on it). */
function canBind(port: number, host = "127.0.0.1"): Promise<boolean> {
  return new Promise((resolve) => {
    const server = createServer();
    server.once("error", () => resolve(false));
    server.listen(port, host, () => server.close(() => resolve(true)));
  });
}

/** A port of 20000-32767 that can be bound now on every address in `hosts`. */
async function freePort(hosts = ["127.0.0.1"]): Promise<number> {
  for (let attempt = 0; attempt < 100; attempt++) {
    const port = 20_000 + Math.floor(Math.random() * 12_768);
    if ((await Promise.all(hosts.map((h) => canBind(port, h)))).every(Boolean)) return port;
  }
  throw new Error("no free port in 20000-32767");
}

/** A foreign listener on `port` (someone else's service on this host). */
function hold(port: number): Promise<Server> {
  return new Promise((resolve, reject) => {
    const server = createServer((socket) => socket.destroy());
    server.once("error", reject);
    server.listen(port, "127.0.0.1", () => resolve(server));
  });
}

describe("TunnelPorts", () => {
  it("binds an address once: opens of it, even at the same instant, share one listener", async () => {
    const ports = new TunnelPorts(log);
    const port = await freePort();
    const [first, second] = await Promise.all([
      ports.open("127.0.0.1", port),
      ports.open("127.0.0.1", port),
    ]);
    try {
      assert.equal(first, second);
      assert.equal(await ports.open("127.0.0.1", port), first);
      assert.equal(ports.listener("127.0.0.1", port), first);
      assert.deepEqual(ports.listeners(), [first]);
      assert.equal(await canBind(port), false);
    } finally {
      first.close();
    }
  });

  it("binds a new free port for each open of port 0, even at the same instant", async () => {
    const ports = new TunnelPorts(log);
    const [a, b] = await Promise.all([ports.open("127.0.0.1", 0), ports.open("127.0.0.1", 0)]);
    try {
      assert.notEqual(a.port, 0);
      assert.notEqual(a.port, b.port);
      assert.equal(ports.listener("127.0.0.1", a.port), a);
      assert.equal(ports.listener("127.0.0.1", b.port), b);
    } finally {
      a.close();
      b.close();
    }
  });

  it("keeps a port while any route is on it, and closes it with its last route", async () => {
    const ports = new TunnelPorts(log);
    const port = await freePort();
    const listener = await ports.open("127.0.0.1", port);
    const one = route("t-one");
    const two = route("t-two");
    try {
      ports.attach(listener, one);
      ports.attach(listener, two);
      assert.deepEqual(listener.routes.map((r) => r.id), ["t-one", "t-two"]);
      ports.detach(one);
      ports.detach(one); // twice: nothing more happens
      ports.detach(route("t-never-attached"));
      assert.deepEqual(listener.routes.map((r) => r.id), ["t-two"]);
      assert.equal(ports.listener("127.0.0.1", port), listener);
      assert.equal(await canBind(port), false);

      ports.detach(two);
      assert.equal(ports.listener("127.0.0.1", port), undefined);
      assert.deepEqual(ports.listeners(), []);
      await waitFor(() => canBind(port), "the port closed");
      // The next route binds it again, as a new listener.
      const again = await ports.open("127.0.0.1", port);
      assert.notEqual(again, listener);
      again.close();
    } finally {
      listener.close();
    }
  });

  it("binds a port again at once when a new route comes right after its last one went", async () => {
    const ports = new TunnelPorts(log);
    const port = await freePort();
    const first = await ports.open("127.0.0.1", port);
    const old = route("t-old");
    ports.attach(first, old);
    // The route is replaced in one step (its owner gone, another claims the port): on Deno the
    // port is free only a turn of the event loop after the old listener's close.
    ports.detach(old);
    const second = await ports.open("127.0.0.1", port);
    try {
      assert.notEqual(second, first);
      assert.equal(second.port, port);
      const visitors: string[] = [];
      ports.attach(second, {
        ...route("t-new"),
        visitor: (v) => (visitors.push("t-new"), v.close()),
      });
      const socket = createConnection({ host: "127.0.0.1", port });
      await new Promise<void>((resolve, reject) =>
        socket.once("close", () => resolve()).once("error", reject)
      );
      await waitFor(() => visitors.length === 1, "the visitor reached the new route");
    } finally {
      await second.close();
    }
  });

  it("keeps one port number on two addresses apart", async () => {
    const ports = new TunnelPorts(log);
    const port = await freePort(["127.0.0.1", "127.0.0.2"]);
    const a = await ports.open("127.0.0.1", port);
    const b = await ports.open("127.0.0.2", port);
    try {
      assert.notEqual(a, b);
      assert.equal(ports.listener("127.0.0.2", port), b);
      ports.attach(a, route("t-a"));
      ports.attach(b, route("t-b"));
      ports.detach(a.routes[0]);
      assert.equal(ports.listener("127.0.0.1", port), undefined);
      assert.equal(ports.listener("127.0.0.2", port), b);
      assert.equal(await canBind(port, "127.0.0.2"), false);
    } finally {
      a.close();
      b.close();
    }
  });

  it("rejects a port it cannot bind, and binds it on a later open once it is free", async () => {
    const ports = new TunnelPorts(log);
    const port = await freePort();
    const foreign = await hold(port);
    await assert.rejects(ports.open("127.0.0.1", port));
    assert.equal(ports.listener("127.0.0.1", port), undefined);
    await new Promise((resolve) => foreign.close(resolve));
    const listener = await ports.open("127.0.0.1", port);
    listener.close();
    assert.equal(listener.port, port);
  });

  it("spreads a port's visitors by the balance asked for when it is bound", async () => {
    const ports = new TunnelPorts(log);
    const listener = await ports.open("127.0.0.1", 0, "least_connections");
    try {
      assert.equal(listener.balance, "least_connections");
      assert.equal((await ports.open("127.0.0.1", 0)).balance, "round_robin");
    } finally {
      for (const l of ports.listeners()) l.close();
    }
  });

  it("stops accepting on every port once draining, ports bound later included", async () => {
    const ports = new TunnelPorts(log);
    const before = await ports.open("127.0.0.1", await freePort());
    ports.attach(before, route("t-before"));
    ports.stopAccepting();
    await waitFor(() => canBind(before.port), "the port closed");
    const after = await ports.open("127.0.0.1", await freePort());
    ports.attach(after, route("t-after"));
    await waitFor(() => canBind(after.port), "the later port closed");
    assert.deepEqual(ports.listeners().map((l) => l.port).sort(), [before.port, after.port].sort());
  });

  it("keeps one UDP socket per address for all its routes, apart from TCP's, freed with the last", async () => {
    const ports = new TunnelPorts(log);
    const port = await freePort();
    const tcp = await ports.open("127.0.0.1", port);
    const [first, second] = await Promise.all([
      ports.openUdp("127.0.0.1", port, { balance: "least_connections" }),
      ports.openUdp("127.0.0.1", port),
    ]);
    try {
      assert.equal(first, second, "one socket, even opened at the same instant");
      assert.equal(first.balance, "least_connections", "the first route's balance");
      assert.equal(ports.udpPort("127.0.0.1", port), first);
      const [one, two] = [udpRoute("t-one"), udpRoute("t-two")];
      ports.attach(first, one);
      ports.attach(first, two);
      ports.detach(one);
      assert.deepEqual(first.routes.map((r) => r.id), ["t-two"]);
      assert.equal(await canBindUdp(port), false, "still bound for the route left");
      ports.detach(two);
      assert.equal(ports.udpPort("127.0.0.1", port), undefined);
      await waitFor(() => canBindUdp(port), "the UDP port freed");
      assert.equal(ports.listener("127.0.0.1", port), tcp, "the TCP port is apart");
    } finally {
      tcp.close();
      void first.close();
    }
  });
});
