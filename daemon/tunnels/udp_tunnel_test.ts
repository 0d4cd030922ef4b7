import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { memoryPair } from "../../transport/memory.ts";
import { openUdp, type UdpSocket } from "../../transport/udp.ts";
import { newUdpCounters } from "../../tunnel/udp/udp_flow.ts";
import { waitFor } from "../../testing/wait.ts";
import { pattern } from "../../util/bytes/bytes.ts";
import { Logger } from "../../util/log.ts";
import { echoClient, QUIET } from "./_echo_client.ts";
import { Session } from "../../protocol/session.ts";
import { readStreamHeader } from "../../tunnel/stream/read_stream_header.ts";
import { UdpTunnel, type UdpTunnelOptions } from "./udp_tunnel.ts";
import { ClientVisitors, type VisitorRefusal } from "./visitor_limit.ts";
import { VisitorGate } from "../../tunnel/policy/visitor_gate.ts";

const log = new Logger({ level: "error", format: "json", sink: () => {} });

/** A visitor's socket and what it received. */
async function visitor(hostname = "127.0.0.1") {
  const got: Uint8Array[] = [];
  const socket: UdpSocket = await openUdp({ hostname, onMessage: (b) => void got.push(b) });
  return { socket, got };
}

/** A UDP tunnel whose client echoes every flow's datagrams back. */
async function echoTunnel(options: Partial<UdpTunnelOptions> = {}) {
  const client = echoClient();
  const tunnel = await UdpTunnel.open({
    id: "t-1",
    client: "alice",
    session: client.near,
    bindHost: "127.0.0.1",
    port: 0,
    log,
    ...options,
  });
  return {
    tunnel,
    headers: client.headers,
    close: () => (tunnel.close(), client.near.close(), client.far.close()),
  };
}

describe("UdpTunnel", () => {
  it("sends each visitor address's flow to the client as a udpVisitor stream", async () => {
    const { tunnel, headers, close } = await echoTunnel();
    const a = await visitor();
    const b = await visitor();
    try {
      assert.equal(tunnel.protocol, "udp");
      assert.ok(tunnel.port > 0, "the port bound");
      for (let i = 0; i < 3; i++) {
        a.socket.send(pattern(10 + i, 1), "127.0.0.1", tunnel.port);
        b.socket.send(pattern(20 + i, 2), "127.0.0.1", tunnel.port);
      }
      await waitFor(() => a.got.length === 3 && b.got.length === 3, "every echo");
      assert.deepEqual(a.got, [0, 1, 2].map((i) => pattern(10 + i, 1)));
      assert.deepEqual(b.got, [0, 1, 2].map((i) => pattern(20 + i, 2)));
      // In either order, the fields in any order.
      const byRemote = (x: object, y: object) =>
        JSON.stringify(Object.entries(x).sort()).localeCompare(
          JSON.stringify(Object.entries(y).sort()),
        );
      assert.deepEqual(
        [...headers].sort(byRemote),
        [a, b].map((v) => ({
          kind: "udpVisitor",
          tunnel: "t-1",
          remote: `127.0.0.1:${v.socket.local.port}`,
          local: `127.0.0.1:${tunnel.port}`,
        })).sort(byRemote),
      );
      // Its counters as every tunnel shows them: flows are its visitors, payload its bytes.
      assert.equal(tunnel.stats.connections, 2);
      assert.equal(tunnel.stats.active, 2);
      assert.equal(tunnel.stats.aToB, 3 * 10 + 3 + 3 * 20 + 3);
      assert.equal(tunnel.stats.bToA, tunnel.stats.aToB);
      assert.deepEqual(
        tunnel.flows.sort(),
        [a, b].map((v) => `127.0.0.1:${v.socket.local.port}`).sort(),
      );
    } finally {
      a.socket.close();
      b.socket.close();
      close();
    }
  });

  it("refuses a new flow past the tunnel's visitor cap, counted, and takes it once one ends", async () => {
    const refusals: VisitorRefusal[] = [];
    const account = new ClientVisitors(() => 100);
    const { tunnel, close } = await echoTunnel({
      visitorLimit: { perTunnel: () => 1, client: account, refused: (r) => refusals.push(r) },
      idleMs: 200,
    });
    const a = await visitor();
    const b = await visitor();
    try {
      a.socket.send(pattern(4, 1), "127.0.0.1", tunnel.port);
      await waitFor(() => a.got.length === 1, "the first visitor's echo");
      b.socket.send(pattern(4, 2), "127.0.0.1", tunnel.port);
      await waitFor(() => tunnel.udp.drops.refused === 1, "the second flow refused");
      assert.deepEqual(refusals, ["tunnel_visitor_limit"]);
      assert.equal(b.got.length, 0);
      // The first flow ends when idle; then the second visitor gets one.
      await waitFor(() => tunnel.udp.flowsOpen === 0, "the idle flow to end");
      b.socket.send(pattern(4, 3), "127.0.0.1", tunnel.port);
      await waitFor(() => b.got.length === 1, "the second visitor's echo");
      assert.equal(tunnel.udp.flows, 2);
    } finally {
      a.socket.close();
      b.socket.close();
      close();
    }
  });

  it("applies its visitor policy to each new visitor address", async () => {
    const refusals: VisitorRefusal[] = [];
    const { tunnel, close } = await echoTunnel({
      policy: { deny: ["127.0.0.3/32"] },
      visitorLimit: {
        perTunnel: () => 100,
        client: new ClientVisitors(() => 100),
        refused: (r) => refusals.push(r),
      },
    });
    const denied = await visitor("127.0.0.3");
    const allowed = await visitor("127.0.0.2");
    try {
      denied.socket.send(pattern(4, 1), "127.0.0.1", tunnel.port);
      allowed.socket.send(pattern(4, 2), "127.0.0.1", tunnel.port);
      await waitFor(() => allowed.got.length === 1, "the allowed visitor's echo");
      await waitFor(() => tunnel.udp.drops.refused === 1, "the denied visitor refused");
      assert.deepEqual(refusals, ["policy_address"]);
      // A new policy applies to the next new flow.
      tunnel.setPolicy({});
      denied.socket.send(pattern(4, 3), "127.0.0.1", tunnel.port);
      await waitFor(() => denied.got.length === 1, "the formerly denied visitor's echo");
    } finally {
      denied.socket.close();
      allowed.socket.close();
      close();
    }
  });

  it("reads an IPv6 visitor's address whole: [v6]:port, judged by its address", async () => {
    const probe = await openUdp({ hostname: "::1", onMessage: () => {} }).catch(() => undefined);
    if (!probe) return; // no IPv6 loopback here
    probe.close();
    const refusals: VisitorRefusal[] = [];
    const { tunnel, headers, close } = await echoTunnel({
      bindHost: "::1",
      policy: { allow: ["::1/128"] },
      visitorLimit: {
        perTunnel: () => 100,
        client: new ClientVisitors(() => 100),
        refused: (r) => refusals.push(r),
      },
    });
    const v = await visitor("::1");
    try {
      v.socket.send(pattern(6, 1), "::1", tunnel.port);
      await waitFor(() => v.got.length === 1, "the echo");
      assert.deepEqual(refusals, []);
      assert.deepEqual(tunnel.flows, [`[::1]:${v.socket.local.port}`]);
      assert.equal((headers[0] as { remote: string }).remote, `[::1]:${v.socket.local.port}`);
      assert.equal((headers[0] as { local: string }).local, `[::1]:${tunnel.port}`);
      // The rule is read against ::1, not against the address and port run together.
      tunnel.setPolicy({ deny: ["::1/128"] });
      const w = await visitor("::1");
      w.socket.send(pattern(6, 2), "::1", tunnel.port);
      await waitFor(() => refusals.length === 1, "the denied visitor");
      assert.deepEqual(refusals, ["policy_address"]);
      w.socket.close();
    } finally {
      v.socket.close();
      close();
    }
  });

  it("drops datagrams over its bandwidth each way, counted rate_limited", async () => {
    // One byte a second: the first datagram each way goes (and puts the bucket deep in debt),
    // the next ones are dropped.
    const inbound = await echoTunnel({ policy: { bandwidth: { in: 1 } } });
    const outbound = await echoTunnel({ policy: { bandwidth: { out: 1 } } });
    const a = await visitor();
    const b = await visitor();
    try {
      for (let i = 0; i < 5; i++) a.socket.send(pattern(100, i), "127.0.0.1", inbound.tunnel.port);
      await waitFor(() => inbound.tunnel.udp.drops.rate_limited === 4, "four dropped coming in");
      await waitFor(() => a.got.length === 1, "the first one's echo");
      assert.deepEqual(a.got, [pattern(100, 0)]);
      assert.equal(inbound.tunnel.udp.datagramsIn, 1);

      for (let i = 0; i < 5; i++) b.socket.send(pattern(100, i), "127.0.0.1", outbound.tunnel.port);
      await waitFor(() => outbound.tunnel.udp.drops.rate_limited === 4, "four dropped going out");
      assert.equal(outbound.tunnel.udp.datagramsIn, 5, "all five went to the client");
      assert.equal(outbound.tunnel.udp.datagramsOut, 1, "one came back to the visitor");
      await waitFor(() => b.got.length === 1, "the first one's echo");
    } finally {
      a.socket.close();
      b.socket.close();
      inbound.close();
      outbound.close();
    }
  });

  it("polices by a bandwidth rule put in force later, looking none up per datagram meanwhile", async () => {
    let lookups = 0;
    const gateThrottle = VisitorGate.prototype.throttle;
    VisitorGate.prototype.throttle = function (direction) {
      lookups++;
      return gateThrottle.call(this, direction);
    };
    const { tunnel, close } = await echoTunnel();
    const a = await visitor();
    try {
      const made = lookups;
      for (let i = 0; i < 20; i++) a.socket.send(pattern(100, i), "127.0.0.1", tunnel.port);
      await waitFor(() => a.got.length === 20, "every echo");
      assert.equal(lookups, made, "no lookup per datagram while there is no rule");
      // One byte a second in: the next datagram goes (deep into debt), those after it are dropped.
      await tunnel.setPolicy({ bandwidth: { in: 1 } });
      for (let i = 0; i < 5; i++) a.socket.send(pattern(100, i), "127.0.0.1", tunnel.port);
      await waitFor(() => tunnel.udp.drops.rate_limited === 4, "four dropped coming in");
      await waitFor(() => a.got.length === 21, "the first one's echo");
    } finally {
      VisitorGate.prototype.throttle = gateThrottle;
      a.socket.close();
      close();
    }
  });

  it("closes its flows and its port once, adding its counts to the daemon's totals", async () => {
    const totals = newUdpCounters();
    const { tunnel, close } = await echoTunnel({ totals });
    const a = await visitor();
    try {
      a.socket.send(pattern(7, 1), "127.0.0.1", tunnel.port);
      await waitFor(() => a.got.length === 1, "the echo");
      tunnel.close();
      tunnel.close();
      assert.equal(totals.datagramsIn, 1);
      assert.equal(totals.bytesOut, 7);
      assert.equal(totals.flows, 1);
      assert.equal(totals.flowsOpen, 0, "a gauge is not added up");
      assert.equal(tunnel.healthy, false);
      const port = tunnel.port;
      const rebound = await waitFor(
        () => openUdp({ port, onMessage: () => {} }).catch(() => undefined),
        "the port to be free",
      );
      rebound.close();
    } finally {
      a.socket.close();
      close();
    }
  });

  it("drops a flow's datagrams its client does not take, and another flow goes on", async () => {
    // A client that never reads the stalled visitor's flow (its window fills), and echoes others.
    const [a, b] = memoryPair();
    let stalledPort = -1;
    const far = new Session(b, {
      client: false,
      config: QUIET,
      onStream: async (stream) => {
        const { header, rest } = await readStreamHeader(stream, 5_000);
        if (header.kind === "udpVisitor" && header.remote.endsWith(`:${stalledPort}`)) return;
        if (rest.length > 0) stream.write(rest.slice());
        stream.onData = (chunk) => stream.write(chunk.slice());
        stream.resume();
      },
    });
    const near = new Session(a, { client: true, config: QUIET });
    const tunnel = await UdpTunnel.open({
      id: "t-1",
      client: "alice",
      session: near,
      bindHost: "127.0.0.1",
      port: 0,
      log,
    });
    const stalled = await visitor();
    const other = await visitor();
    stalledPort = stalled.socket.local.port;
    try {
      // Far more than the flow's window and queue together; a bounded number of rounds.
      for (let round = 0; round < 50 && tunnel.udp.drops.queue_full === 0; round++) {
        for (let i = 0; i < 10; i++) {
          stalled.socket.send(pattern(30_000, i), "127.0.0.1", tunnel.port);
        }
        await new Promise((r) => setTimeout(r, 10));
      }
      assert.ok(tunnel.udp.drops.queue_full > 0, "the stalled flow drops");
      for (let i = 0; i < 5; i++) {
        other.socket.send(pattern(1000, i), "127.0.0.1", tunnel.port);
        await waitFor(() => other.got.length === i + 1, `the other flow's echo ${i}`);
      }
      assert.deepEqual(other.got, [0, 1, 2, 3, 4].map((i) => pattern(1000, i)));
      assert.equal(stalled.got.length, 0);
      assert.equal(tunnel.udp.flowsOpen, 2);
    } finally {
      stalled.socket.close();
      other.socket.close();
      tunnel.close();
      near.close();
      far.close();
    }
  });

  it("closes a TCP visitor at once, and takes no HTTP request", async () => {
    const { tunnel, close } = await echoTunnel();
    try {
      assert.equal(tunnel.open("127.0.0.1:1", "127.0.0.1:2"), undefined);
      const [outside, inside] = memoryPair();
      let closed = false;
      outside.start({ data: () => {}, drain: () => {}, end: () => {}, close: () => closed = true });
      tunnel.visitor(inside);
      await waitFor(() => closed, "the visitor closed");
      assert.equal(tunnel.stats.connections, 0);
    } finally {
      close();
    }
  });
});
