// UDP ASSOCIATE on the SOCKS front, with real sockets: the `socks` npm client makes the
// association over TCP, UDP sockets here send its datagrams, and a real daemon carries them to a
// UDP echo and a small DNS responder on 127.0.0.1. The daemon's name lookup is replaced, so no test
// depends on the machine's DNS.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { Buffer } from "node:buffer";
import type { Socket } from "node:net";
import { SocksClient } from "socks";
import { connect, type SocksServer } from "../client.ts";
import type { Client } from "../client.ts";
import type { ClientError } from "../errors.ts";
import { Daemon } from "../../daemon/daemon.ts";
import { validateConfig } from "../../daemon/config/mod.ts";
import type { LookupFn } from "../../daemon/policy/resolve.ts";
import { Logger } from "../../util/log.ts";
import { openUdp, type UdpSocket } from "../../transport/udp.ts";
import { pattern, waitFor, withTimeout } from "../../testing/mod.ts";
import { encodeSocksUdp, type SocksTarget } from "./socks_parser.ts";
import { startDnsResponder } from "../../testing/udp_servers.ts";

const TOKEN = "socks-udp-test-token-0123456789abcd";
const v4 = (port: number): SocksTarget => ({
  type: "ipv4",
  host: "127.0.0.1",
  port,
  address: `127.0.0.1:${port}`,
});

/** A DNS query for `name`'s A record with the ID `id`. */
function dnsQuery(id: number, name: string): Uint8Array {
  const labels = name.split(".").flatMap((l) => [l.length, ...new TextEncoder().encode(l)]);
  return Uint8Array.of(id >> 8, id & 0xff, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0, ...labels, 0, 0, 1, 0, 1);
}

/** A UDP socket of the SOCKS client's, gathering what comes back. */
async function clientSocket(): Promise<{ socket: UdpSocket; got: Uint8Array[] }> {
  const got: Uint8Array[] = [];
  const socket = await openUdp({ onMessage: (bytes) => got.push(bytes) });
  return { socket, got };
}

/** Resolves once the peer ended (or reset) the connection. */
function ended(socket: Socket): Promise<void> {
  if (socket.readableEnded || socket.destroyed) return Promise.resolve();
  return new Promise((resolve) => {
    socket.once("end", resolve);
    socket.once("close", resolve);
  });
}

describe("SOCKS5 UDP ASSOCIATE (daemon in process)", () => {
  let echo: UdpSocket;
  let echoed = 0;
  let dns: UdpSocket;
  let daemon: Daemon;
  let client: Client;
  let socks: SocksServer;
  const errors: ClientError[] = [];
  const sockets: UdpSocket[] = [];
  const lookup: LookupFn = () =>
    Promise.reject(Object.assign(new Error("not found"), { code: "ENOTFOUND" }));

  /** An association from `from` (its port named in the request), through `front`. */
  function associate(from: UdpSocket, front = socks, auth = {}, host = "127.0.0.1") {
    // The socks client makes associations with an instance and its `established` event.
    const socksClient = new SocksClient({
      proxy: { host: "127.0.0.1", port: Number(front.address.split(":")[1]), type: 5, ...auth },
      command: "associate",
      destination: { host, port: from.local.port },
      timeout: 15_000,
    });
    const established = new Promise<{ control: Socket; relay: { host: string; port: number } }>(
      (resolve, reject) => {
        socksClient.once("established", ({ socket, remoteHost }) => {
          socket.on("data", () => {});
          socket.on("error", () => {});
          resolve({ control: socket, relay: remoteHost! });
        });
        socksClient.once("error", reject);
      },
    );
    socksClient.connect();
    return withTimeout(established, 20_000, "the association");
  }

  before(async () => {
    echo = await openUdp({
      onMessage: (bytes, remote) => {
        echoed++;
        echo.send(bytes, remote.hostname, remote.port);
      },
    });
    dns = await startDnsResponder();
    const result = validateConfig({
      listen: { tcp: "127.0.0.1:0", websocket: null, admin: null },
      clients: [{
        name: "alice",
        token: TOKEN,
        forward: [`127.0.0.1:${echo.local.port}`, `127.0.0.1:${dns.local.port}`, "*.test:*"],
      }],
    });
    assert.deepEqual(result.errors, []);
    daemon = new Daemon(result.config!, {
      log: new Logger({ level: "error", format: "json", sink: () => {} }),
      lookup,
    });
    await daemon.start();
    client = await connect(`tcp://${daemon.addresses.tcp}`, { token: TOKEN });
    client.on("error", (error) => errors.push(error));
    socks = await client.socks({ listen: "127.0.0.1:0" });
  });
  after(async () => {
    sockets.forEach((s) => s.close());
    await socks.close();
    await client.close();
    await daemon.stop();
    echo.close();
    dns.close();
  });

  it("carries datagrams to a UDP echo and back, wrapped in the header naming the target", async () => {
    const { socket, got } = await clientSocket();
    sockets.push(socket);
    const { control, relay } = await associate(socket);
    assert.equal(relay.host, "127.0.0.1");
    const sizes = [1, 64, 1200, 8000];
    for (const [i, size] of sizes.entries()) {
      const frame = SocksClient.createUDPFrame({
        remoteHost: { host: "127.0.0.1", port: echo.local.port },
        data: Buffer.from(pattern(size, i)),
      });
      socket.send(frame, relay.host, relay.port);
      await waitFor(() => got.length === i + 1, `the echo of ${size} bytes`);
      const back = SocksClient.parseUDPFrame(Buffer.from(got[i]));
      assert.deepEqual(back.remoteHost, { host: "127.0.0.1", port: echo.local.port });
      assert.deepEqual(new Uint8Array(back.data), pattern(size, i));
    }
    assert.ok(socks.stats.udp.datagramsIn >= sizes.length);
    assert.ok(socks.stats.udp.datagramsOut >= sizes.length);
    control.destroy();
    await waitFor(() => socks.stats.udp.active === 0, "the association to end");
  });

  it("resolves a DNS-shaped query through the association (the socks client's frames)", async () => {
    const { socket, got } = await clientSocket();
    sockets.push(socket);
    const { control, relay } = await associate(socket);
    const ids = [0x1234, 0xbeef];
    for (const [i, id] of ids.entries()) {
      const frame = SocksClient.createUDPFrame({
        remoteHost: { host: "127.0.0.1", port: dns.local.port },
        data: Buffer.from(dnsQuery(id, `host${i}.example.com`)),
      });
      socket.send(frame, relay.host, relay.port);
      await waitFor(() => got.length === i + 1, `the DNS answer to ${id.toString(16)}`);
      const answer = SocksClient.parseUDPFrame(Buffer.from(got[i]));
      assert.deepEqual(answer.remoteHost, { host: "127.0.0.1", port: dns.local.port });
      const data = new Uint8Array(answer.data);
      assert.equal((data[0] << 8) | data[1], id, "the answer carries the query's ID");
      assert.equal(data[3] & 0x0f, 0, "NOERROR");
      assert.equal((data[6] << 8) | data[7], 1, "one answer record");
      assert.deepEqual([...data.subarray(data.length - 4)], [192, 0, 2, 7]);
    }
    control.destroy();
    await waitFor(() => socks.stats.udp.active === 0, "the association to end");
  });

  it("drops refused targets, counted, and keeps carrying the allowed one", async () => {
    const { socket, got } = await clientSocket();
    sockets.push(socket);
    const { control, relay } = await associate(socket);
    const before = { ...socks.stats.udp, dropped: { ...socks.stats.udp.dropped } };
    const notAllowed = v4(echo.local.port === 65535 ? 1 : echo.local.port + 1);
    const unresolved = { type: "name" as const, host: "nowhere.test", port: 53 };
    const targets = [notAllowed, { ...unresolved, address: "nowhere.test:53" }];
    for (const target of targets) {
      socket.send(encodeSocksUdp(target, Uint8Array.of(1)), relay.host, relay.port);
    }
    await waitFor(
      () => socks.stats.udp.refusedTargets === before.refusedTargets + 2,
      "both targets to be refused",
    );
    const messages = errors.map((e) => e.message).join("\n");
    assert.match(messages, /socks UDP 127\.0\.0\.1:\d+: .*not allowed/i);
    assert.match(messages, /socks UDP nowhere\.test:53/);
    // Later datagrams to them are dropped here; the echo still answers in the same association.
    for (const target of targets) {
      socket.send(encodeSocksUdp(target, Uint8Array.of(2)), relay.host, relay.port);
    }
    socket.send(encodeSocksUdp(v4(echo.local.port), Uint8Array.of(3)), relay.host, relay.port);
    await waitFor(() => got.length === 1, "the echo after the refusals");
    await waitFor(
      () => socks.stats.udp.dropped.refused === before.dropped.refused + 2,
      "the datagrams to refused targets to be dropped and counted",
    );
    assert.equal(got.length, 1, "nothing came back from a refused target");
    control.destroy();
    await waitFor(() => socks.stats.udp.active === 0, "the association to end");
  });

  it("ignores datagrams from another address, fragments and bad headers, counted", async () => {
    const { socket, got } = await clientSocket();
    const foreign = await clientSocket();
    sockets.push(socket, foreign.socket);
    const { control, relay } = await associate(socket);
    const before = { ...socks.stats.udp.dropped };
    const echoedBefore = echoed;
    const frame = encodeSocksUdp(v4(echo.local.port), Uint8Array.of(7));
    foreign.socket.send(frame, relay.host, relay.port);
    const fragment = frame.slice();
    fragment[2] = 1;
    socket.send(fragment, relay.host, relay.port);
    socket.send(Uint8Array.of(0, 0, 0, 9, 1), relay.host, relay.port);
    socket.send(frame, relay.host, relay.port);
    await waitFor(() => got.length === 1, "the echo of the client's own datagram");
    await waitFor(
      () =>
        socks.stats.udp.dropped.foreign === before.foreign + 1 &&
        socks.stats.udp.dropped.fragmented === before.fragmented + 1 &&
        socks.stats.udp.dropped.malformed === before.malformed + 1,
      "the three drops to be counted",
    );
    assert.equal(echoed, echoedBefore + 1, "only the client's whole datagram reached the echo");
    assert.equal(foreign.got.length, 0);
    control.destroy();
    await waitFor(() => socks.stats.udp.active === 0, "the association to end");
  });

  it("ends the association with its TCP connection: the relay socket is released", async () => {
    const { socket, got } = await clientSocket();
    sockets.push(socket);
    const { control, relay } = await associate(socket);
    socket.send(encodeSocksUdp(v4(echo.local.port), Uint8Array.of(1)), relay.host, relay.port);
    await waitFor(() => got.length === 1, "the echo");
    assert.equal(socks.stats.udp.active, 1);
    control.end();
    await waitFor(() => socks.stats.udp.active === 0, "the association to end");
    // The relay's port is free again: the socket was closed, not left behind.
    const again = await openUdp({ port: relay.port, onMessage: () => {} });
    again.close();
  });

  it("closes an idle association, bounds its targets, and asks for credentials when set", async () => {
    const front = await client.socks({
      listen: "127.0.0.1:0",
      user: "alice",
      password: "s3cret",
      udpIdleMs: 300,
      udpMaxTargets: 1,
    });
    try {
      const { socket, got } = await clientSocket();
      sockets.push(socket);
      await assert.rejects(associate(socket, front), /no accepted authentication type/i);
      const { control, relay } = await associate(socket, front, {
        userId: "alice",
        password: "s3cret",
      });
      const closed = ended(control);
      socket.send(encodeSocksUdp(v4(echo.local.port), Uint8Array.of(1)), relay.host, relay.port);
      await waitFor(() => got.length === 1, "the echo");
      socket.send(encodeSocksUdp(v4(dns.local.port), dnsQuery(1, "a.b")), relay.host, relay.port);
      await waitFor(() => front.stats.udp.dropped.target_limit === 1, "the second target dropped");
      await withTimeout(closed, 15_000, "the idle association's connection to be closed");
      await waitFor(() => front.stats.udp.active === 0, "the association to end");
      control.destroy();
    } finally {
      await front.close();
    }
  });

  it("refuses UDP limits that are not positive, and says which", async () => {
    await assert.rejects(
      client.socks({ listen: "127.0.0.1:0", udpMaxTargets: 0 }),
      (error: Error) => error instanceof TypeError && /udpMaxTargets must be/.test(error.message),
    );
    await assert.rejects(
      client.socks({ listen: "127.0.0.1:0", udpIdleMs: -1 }),
      (error: Error) => error instanceof TypeError && /udpIdleMs must be/.test(error.message),
    );
  });

  it("refuses an association for another client address", async () => {
    const { socket } = await clientSocket();
    sockets.push(socket);
    await assert.rejects(associate(socket, socks, {}, "10.9.8.7"), /NotAllowed/);
    assert.ok(errors.some((e) => /asked to send from 10\.9\.8\.7/.test(e.message)));
  });
});
