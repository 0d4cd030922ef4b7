// A group's UDP port on one node: two clients (SDK clients, and the `tunnelmux client` program)
// serve one UDP port as members of a group, each with a local UDP service that answers with its
// own name, so a visitor sees which member served its flow. Visitors are real UDP sockets on
// 127.0.0.x; what the daemon counts is read from its registry and /metrics.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { type Client, connect } from "../client/mod.ts";
import type { Daemon } from "../daemon/daemon.ts";
import { renderMetrics } from "../daemon/admin/api/metrics.ts";
import { openUdp, type UdpSocket } from "../transport/udp.ts";
import { startUdpNamed } from "../testing/udp_servers.ts";
import { cleanup, startClient } from "../testing/process.ts";
import { waitFor } from "../testing/wait.ts";
import { portOf, startDaemonInProcess } from "./_in_process_daemon.ts";

const ALICE = "udp-groups-alice-0123456789abcdef";
const BOB = "udp-groups-bob-0123456789abcdefgh";
const CAROL = "udp-groups-carol-0123456789abcdef";
const GROUP_KEY = "udp-groups-dns-key-0123456789abcd";

/** A visitor's socket on `hostname` and the answers it received, as text. */
async function visitor(hostname = "127.0.0.1"): Promise<{ socket: UdpSocket; got: string[] }> {
  const got: string[] = [];
  const socket = await openUdp({
    hostname,
    onMessage: (bytes) => void got.push(new TextDecoder().decode(bytes)),
  });
  return { socket, got };
}

/** Sends one datagram from `v` to `port` and waits for its answer: the member that served it. */
async function ask(v: { socket: UdpSocket; got: string[] }, port: number): Promise<string> {
  const before = v.got.length;
  v.socket.send(new Uint8Array([1, 2, 3]), "127.0.0.1", port);
  return await waitFor(() => v.got[before], `an answer on UDP ${port}`);
}

/**
 * A UDP port of 20000-32767 free now: below Linux's ephemeral range, so no visitor socket of the
 * suite takes it meanwhile. A bounded number of tries.
 */
async function freeUdpPort(): Promise<number> {
  for (let i = 0; i < 50; i++) {
    const port = 20000 + Math.floor(Math.random() * 12768);
    const probe = await openUdp({ port, onMessage: () => {} }).catch(() => undefined);
    if (!probe) continue;
    probe.close();
    // A closed socket lets go of its port within a turn or so.
    (await bindable(port)).close();
    return port;
  }
  throw new Error("no free UDP port in 20000-32767");
}

/** A socket bound to UDP `port` once it is free. */
function bindable(port: number): Promise<UdpSocket> {
  return waitFor(
    () => openUdp({ port, onMessage: () => {} }).catch(() => undefined),
    `UDP port ${port} to be free`,
  );
}

/** One sample of `/metrics`, by its name and labels as written. */
function sample(text: string, series: string): number {
  const line = text.split("\n").find((l) => l.startsWith(`${series} `));
  assert.ok(line, `${series} in /metrics`);
  return Number(line.slice(series.length + 1));
}

describe("a group's UDP port (single node)", () => {
  let daemon: Daemon;
  let url: string;
  const services: UdpSocket[] = [];
  const clients: Client[] = [];
  const client = async (token: string) => {
    const c = await connect(url, { token, reconnect: false });
    clients.push(c);
    return c;
  };
  const named = async (name: string) => {
    const service = await startUdpNamed(name);
    services.push(service);
    return `127.0.0.1:${service.local.port}`;
  };
  const member = (token: string) => ({ token, expose: { ports: [0, "20000-32767"] } });

  before(async () => {
    daemon = await startDaemonInProcess({
      listen: { tcp: "127.0.0.1:0", websocket: null, admin: null },
      groups: { dns: { key: GROUP_KEY, balance: "round_robin" } },
      clients: [
        { name: "alice", ...member(ALICE), groups: ["dns"] },
        { name: "bob", ...member(BOB), groups: ["dns"] },
        { name: "carol", ...member(CAROL) },
      ],
    });
    url = `tcp://127.0.0.1:${portOf(daemon.addresses.tcp)}`;
  });
  after(async () => {
    for (const c of clients) await c.close();
    await cleanup();
    await daemon?.stop();
    for (const s of services) s.close();
  });

  const udpTunnel = (id: string) => daemon.registry.tunnels().find((t) => t.id === id);

  it("spreads new flows over the members, keeps each flow on its member, moves a gone member's visitors", async () => {
    const port = await freeUdpPort();
    const group = { protocol: "udp" as const, remotePort: port, group: "dns", groupKey: GROUP_KEY };
    const alice = await client(ALICE);
    const bob = await client(BOB);
    const a = await alice.expose({ ...group, local: await named("A") });
    const b = await bob.expose({ ...group, local: await named("B") });
    assert.equal(a.remotePort, port);
    assert.equal(b.remotePort, port);
    // Another client may not take the group's port.
    const carol = await client(CAROL);
    await assert.rejects(
      carol.expose({ protocol: "udp", remotePort: port, local: await named("C") }),
      (error: Error & { code?: string }) => error.code === "port_in_use",
    );

    const visitors = await Promise.all([0, 1, 2, 3, 4, 5].map(() => visitor()));
    try {
      const served: string[] = [];
      for (const v of visitors) served.push(await ask(v, port));
      // In turn: each member takes every other new flow.
      assert.deepEqual(served.filter((s) => s === "A").length, 3, served.join());
      assert.deepEqual(served.filter((s) => s === "B").length, 3, served.join());
      // A flow stays on its member, datagram after datagram.
      for (let round = 0; round < 5; round++) {
        for (const [i, v] of visitors.entries()) assert.equal(await ask(v, port), served[i]);
      }
      assert.equal(udpTunnel(a.id)?.udp?.flowsOpen, 3);
      assert.equal(udpTunnel(b.id)?.udp?.flowsOpen, 3);
      assert.equal(udpTunnel(a.id)?.udp?.datagramsIn, 3 * 6);

      // Alice's client goes: her flows end with her tunnel, the port stays for Bob, and the next
      // datagram of each of her visitors opens a flow on him.
      await alice.close();
      await waitFor(() => !udpTunnel(a.id), "Alice's tunnel to go");
      for (const v of visitors) assert.equal(await ask(v, port), "B");
      assert.equal(udpTunnel(b.id)?.udp?.flows, 6);
      assert.equal(udpTunnel(b.id)?.udp?.flowsOpen, 6);
      // Her tunnel's counts stay in the daemon's totals.
      const metrics = renderMetrics(daemon);
      assert.ok(sample(metrics, 'tunnelmux_udp_flows_total{kind="tunnel"}') >= 9);

      // The last member goes: the port is free.
      await b.close();
      await waitFor(() => !udpTunnel(b.id), "Bob's tunnel to go");
      (await bindable(port)).close();
    } finally {
      for (const v of visitors) v.socket.close();
    }
  });

  it("gives a visitor the rules of the member its flow went to", async () => {
    const port = await freeUdpPort();
    const group = { protocol: "udp" as const, remotePort: port, group: "dns", groupKey: GROUP_KEY };
    const alice = await client(ALICE);
    const bob = await client(BOB);
    // Alice's member turns 127.0.0.3 away; Bob's takes anyone.
    const a = await alice.expose({
      ...group,
      local: await named("A"),
      policy: { deny: ["127.0.0.3/32"] },
    });
    const b = await bob.expose({ ...group, local: await named("B") });
    const denied = await visitor("127.0.0.3");
    try {
      // New flows are given in turn, Alice first: hers refuses 127.0.0.3 (counted there, as a
      // TCP member refuses a visitor its rules deny); the visitor's next datagram is a new flow,
      // given to Bob, whose rules let it in.
      denied.socket.send(new Uint8Array([1]), "127.0.0.1", port);
      await waitFor(() => udpTunnel(a.id)!.udp!.drops.refused === 1, "Alice's member to refuse");
      assert.equal(await ask(denied, port), "B");
      assert.equal(udpTunnel(b.id)!.udp!.drops.refused, 0);
      assert.equal(udpTunnel(a.id)!.udp!.flows, 0);
      assert.deepEqual(denied.got, ["B"]);
    } finally {
      denied.socket.close();
      await a.close();
      await b.close();
    }
  });

  it("`tunnelmux client --group --expose-udp` joins the group's port beside an SDK member", async () => {
    const port = await freeUdpPort();
    const bob = await client(BOB);
    const b = await bob.expose({
      protocol: "udp",
      remotePort: port,
      group: "dns",
      groupKey: GROUP_KEY,
      local: await named("B"),
    });
    const program = await startClient({
      server: url,
      token: ALICE,
      args: ["--group", "dns", "--expose-udp", `${port}=${await named("A")}`],
      env: { TUNNELMUX_GROUP_KEY: GROUP_KEY },
    });
    const { port: exposed, entry } = await program.waitForTunnel();
    assert.equal(exposed, port);
    assert.equal(entry.protocol, "udp");
    const visitors = await Promise.all([0, 1].map(() => visitor()));
    try {
      const served = [];
      for (const v of visitors) served.push(await ask(v, port));
      assert.deepEqual(served.sort(), ["A", "B"]);
    } finally {
      for (const v of visitors) v.socket.close();
      await program.kill();
      await b.close();
    }
  });
});
