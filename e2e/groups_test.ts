// One public port, or one service name, served by several routes on one node: the members of a
// group (several clients), and the sessions of one client (high availability).
// The daemon runs in this process; clients are SDK clients; visitors are plain sockets.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { type Client, connect, connectHa } from "../client/mod.ts";
import { Daemon } from "../daemon/daemon.ts";
import { validateConfig } from "../daemon/config/mod.ts";
import { Logger } from "../util/log.ts";
import {
  cleanup,
  startClient,
  startTcpServer,
  tcpRoundTrip,
  type TestServer,
  waitFor,
} from "../testing/mod.ts";

const ALICE = "groups-test-alice-0123456789abcdef";
const BOB = "groups-test-bob-0123456789abcdefgh";
const CAROL = "groups-test-carol-0123456789abcdef";
const GROUP_KEY = "groups-test-web-key-0123456789abcd";

/** A local service that answers every connection with its own name, then closes. */
function namedService(name: string): Promise<TestServer> {
  return startTcpServer((socket) => {
    socket.on("error", () => {});
    socket.end(name);
  });
}

/** Sends `count` visitors to `port`; returns how many each service answered. */
async function visit(port: number, count: number): Promise<Record<string, number>> {
  const seen: Record<string, number> = {};
  for (let i = 0; i < count; i++) {
    const answer = new TextDecoder().decode(
      await tcpRoundTrip(port, new Uint8Array(0), { halfClose: false }),
    );
    seen[answer] = (seen[answer] ?? 0) + 1;
  }
  return seen;
}

/**
 * A local service that answers a visitor's first bytes with `name`, and `GET /health` with 200
 * while `up()` says so, else 503.
 */
function checkedService(name: string, up: () => boolean): Promise<TestServer> {
  return startTcpServer((socket) => {
    socket.on("error", () => {});
    socket.once("data", (chunk: Uint8Array) => {
      const text = new TextDecoder().decode(chunk);
      if (!text.startsWith("GET ")) return socket.end(name);
      const status = up() ? "200 OK" : "503 Service Unavailable";
      socket.end(`HTTP/1.1 ${status}\r\ncontent-length: 0\r\nconnection: close\r\n\r\n`);
    });
  });
}

/** Sends `count` visitors to `port`, each saying "v" first; returns how many each answered. */
async function visitSaying(port: number, count: number): Promise<Record<string, number>> {
  const seen: Record<string, number> = {};
  for (let i = 0; i < count; i++) {
    const answer = new TextDecoder().decode(
      await tcpRoundTrip(port, new TextEncoder().encode("v"), { halfClose: false }),
    );
    seen[answer] = (seen[answer] ?? 0) + 1;
  }
  return seen;
}

describe("one port, several routes (single node)", () => {
  let daemon: Daemon;
  let url: string;
  let services: TestServer[];
  const clients: Client[] = [];
  const client = async (token: string) => {
    const c = await connect(url, { token, reconnect: false });
    clients.push(c);
    return c;
  };

  before(async () => {
    const result = validateConfig({
      listen: { tcp: "127.0.0.1:0", websocket: null, admin: null },
      groups: {
        web: { key: GROUP_KEY, balance: "round_robin" },
        api: { key: GROUP_KEY, balance: "round_robin" },
      },
      clients: [
        {
          name: "alice",
          token: ALICE,
          expose: { ports: [0, "20000-32767"] },
          groups: ["web", "api"],
          services: { offer: ["*"], use: ["*"] },
        },
        {
          name: "bob",
          token: BOB,
          expose: { ports: [0, "20000-32767"] },
          groups: ["web", "api"],
          services: { offer: ["*"], use: ["*"] },
        },
        {
          name: "carol",
          token: CAROL,
          expose: { ports: [0, "20000-32767"] },
          services: { offer: ["*"], use: ["*"] },
        },
      ],
    });
    assert.deepEqual(result.errors, []);
    const log = new Logger({ level: "error", format: "json", sink: () => {} });
    daemon = new Daemon(result.config!, { log });
    await daemon.start();
    url = `tcp://${daemon.addresses.tcp}`;
    services = await Promise.all(["A", "B", "C"].map(namedService));
  });
  after(async () => {
    await cleanup();
    await Promise.all(clients.map((c) => c.close()));
    daemon.stop();
    for (const s of services) s.close();
  });

  it("two members of a group serve one port; visitors are split; one leaves, the other takes all", async () => {
    const alice = await client(ALICE);
    const bob = await client(BOB);
    const group = { group: "web", groupKey: GROUP_KEY };
    const a = await alice.expose({ local: `127.0.0.1:${services[0].port}`, ...group });
    // Port 0 joins the port the group already holds.
    const b = await bob.expose({ local: `127.0.0.1:${services[1].port}`, ...group });
    assert.equal(b.remotePort, a.remotePort);
    const split = await visit(a.remotePort, 10);
    assert.deepEqual(split, { A: 5, B: 5 }, "round robin over the two members");
    await alice.close();
    await waitFor(() => daemon.registry.tunnels().length === 1, "alice's route gone");
    assert.deepEqual(await visit(a.remotePort, 6), { B: 6 });
    await b.close();
    // The last route gone, the port is closed.
    await waitFor(
      () =>
        tcpRoundTrip(a.remotePort, new Uint8Array(0), { halfClose: false }).then(
          () => false,
          () => true,
        ),
      "the port closed",
    );
  });

  it("joining takes the client's permission for the group and the group's key", async () => {
    const alice = await client(ALICE);
    const carol = await client(CAROL);
    const held = await alice.expose({
      local: `127.0.0.1:${services[0].port}`,
      group: "web",
      groupKey: GROUP_KEY,
    });
    await assert.rejects(
      alice.expose({
        local: "127.0.0.1:1",
        group: "web",
        groupKey: "wrong-key-0123456789abcdefgh",
      }),
      (e: Error & { code?: string }) =>
        e.code === "not_allowed" && /wrong key for group web/.test(e.message),
    );
    await assert.rejects(
      carol.expose({ local: "127.0.0.1:1", group: "web", groupKey: GROUP_KEY }),
      (e: Error & { code?: string }) =>
        e.code === "not_allowed" && /may not join group web/.test(e.message),
    );
    // Outside the group the port is simply taken.
    await assert.rejects(
      carol.expose({ local: "127.0.0.1:1", remotePort: held.remotePort }),
      (e: Error & { code?: string }) => e.code === "port_in_use",
    );
    await held.close();
  });

  it("two sessions of one client share a port when they ask to (HA); without asking, the second is refused", async () => {
    const first = await client(ALICE);
    const second = await client(ALICE);
    const a = await first.expose({ local: `127.0.0.1:${services[0].port}`, shared: true });
    await assert.rejects(
      second.expose({ local: `127.0.0.1:${services[2].port}`, remotePort: a.remotePort }),
      (e: Error & { code?: string }) => e.code === "port_in_use",
    );
    const b = await second.expose({
      local: `127.0.0.1:${services[2].port}`,
      remotePort: a.remotePort,
      shared: true,
    });
    assert.equal(b.remotePort, a.remotePort);
    assert.deepEqual(await visit(a.remotePort, 4), { A: 2, C: 2 });
    // A session that dies takes its route with it at once; visitors go on to the other.
    first.session!.destroy();
    await waitFor(() => daemon.registry.tunnels().length === 1, "the dead session's route gone");
    assert.deepEqual(await visit(a.remotePort, 3), { C: 3 });
  });

  it("the CLI joins a group with --group and TUNNELMUX_GROUP_KEY", async () => {
    const member = (token: string, service: TestServer) =>
      startClient({
        server: url,
        token,
        args: ["--expose", `0=127.0.0.1:${service.port}`, "--group", "web"],
        env: { TUNNELMUX_GROUP_KEY: GROUP_KEY },
      });
    const a = await (await member(ALICE, services[0])).waitForTunnel();
    const b = await (await member(BOB, services[1])).waitForTunnel();
    assert.equal(b.port, a.port);
    assert.deepEqual(await visit(a.port, 4), { A: 2, B: 2 });
    const keyless = await startClient({
      server: url,
      token: BOB,
      args: ["--expose", `0=127.0.0.1:${services[1].port}`, "--group", "web"],
    });
    const { code } = await keyless.exited;
    assert.equal(code, 1);
    assert.match(keyless.stderr(), /needs the group's key in TUNNELMUX_GROUP_KEY/);
  });

  it("a member whose local service fails its health check gets no visitors until it passes again", async () => {
    let aUp = true;
    const checked = await checkedService("A", () => aUp);
    const other = await checkedService("B", () => true);
    const alice = await client(ALICE);
    const bob = await client(BOB);
    const group = { group: "api", groupKey: GROUP_KEY }; // a group of its own
    const health = { check: { kind: "http" as const, path: "/health" }, intervalMs: 50 };
    const changes: boolean[] = [];
    alice.on("health", ({ healthy }) => changes.push(healthy));
    const a = await alice.expose({ local: `127.0.0.1:${checked.port}`, ...group, health });
    await bob.expose({ local: `127.0.0.1:${other.port}`, ...group });
    const answers = (count: number) => visitSaying(a.remotePort, count);
    assert.deepEqual(await answers(4), { A: 2, B: 2 });
    aUp = false;
    await waitFor(() => changes.includes(false), "alice's check to fail");
    await waitFor(() => daemon.registry.tunnel(a.id)?.healthy === false, {
      message: "the daemon to withdraw alice's route",
    });
    assert.deepEqual(await answers(6), { B: 6 }, "every visitor to the healthy member");
    aUp = true;
    await waitFor(() => changes.at(-1) === true, "alice's check to pass again");
    await waitFor(() => daemon.registry.tunnel(a.id)?.healthy === true, "route restored");
    assert.deepEqual(await answers(4), { A: 2, B: 2 });
    checked.close();
    other.close();
  });

  it("a group's members offer one service name; users are split; another owner is refused; one leaves, the other takes all", async () => {
    const alice = await client(ALICE);
    const bob = await client(BOB);
    const carol = await client(CAROL);
    const group = { group: "web", groupKey: GROUP_KEY };
    await alice.offer("db", `127.0.0.1:${services[0].port}`, group);
    await bob.offer("db", `127.0.0.1:${services[1].port}`, group);
    await assert.rejects(
      carol.offer("db", `127.0.0.1:${services[2].port}`),
      (e: Error & { code?: string }) =>
        e.code === "conflict" && /offered by another owner/.test(e.message),
    );
    await assert.rejects(
      carol.offer("db", `127.0.0.1:${services[2].port}`, { ...group }),
      (e: Error & { code?: string }) => e.code === "not_allowed",
      "carol may not join the group",
    );
    const user = await carol.forward({ listen: "127.0.0.1:0", service: "db" });
    const port = Number(user.address.split(":").at(-1));
    assert.deepEqual(await visit(port, 6), { A: 3, B: 3 }, "round robin over the members");
    assert.deepEqual(
      daemon.registry.services().map((o) => `${o.name}/${o.client}/${o.owner}`),
      ["db/alice/group:web", "db/bob/group:web"],
    );
    await alice.close();
    await waitFor(() => daemon.registry.services().length === 1, "alice's offer gone");
    assert.deepEqual(await visit(port, 4), { B: 4 });
    await bob.withdraw("db");
    assert.equal(daemon.registry.service("db"), undefined);
    // The name is free again: another owner may take it.
    await carol.offer("db", `127.0.0.1:${services[2].port}`);
    assert.deepEqual(await visit(port, 2), { C: 2 });
    await carol.withdraw("db");
    user.close();
  });

  it("two sessions of one client offer one name (HA); the dead session's offer goes at once", async () => {
    const first = await client(ALICE);
    const second = await client(ALICE);
    const user = await (await client(CAROL)).forward({ listen: "127.0.0.1:0", service: "ha-db" });
    const port = Number(user.address.split(":").at(-1));
    await first.offer("ha-db", `127.0.0.1:${services[0].port}`);
    await second.offer("ha-db", `127.0.0.1:${services[2].port}`);
    assert.deepEqual(await visit(port, 4), { A: 2, C: 2 });
    first.session!.destroy();
    await waitFor(
      () => daemon.registry.services().filter((o) => o.name === "ha-db").length === 1,
      "the dead session's offer gone",
    );
    assert.deepEqual(await visit(port, 3), { C: 3 });
    user.close();
  });

  it("an offer whose local service fails its health check gets no users until it passes again", async () => {
    let aUp = true;
    const checked = await checkedService("A", () => aUp);
    const other = await checkedService("B", () => true);
    const alice = await client(ALICE);
    const bob = await client(BOB);
    const group = { group: "api", groupKey: GROUP_KEY };
    const health = { check: { kind: "http" as const, path: "/health" }, intervalMs: 50 };
    const changes: { service?: string; healthy: boolean }[] = [];
    alice.on("health", ({ service, healthy }) => changes.push({ service, healthy }));
    await alice.offer("checked", `127.0.0.1:${checked.port}`, { ...group, health });
    await bob.offer("checked", `127.0.0.1:${other.port}`, group);
    const user = await (await client(CAROL)).forward({
      listen: "127.0.0.1:0",
      service: "checked",
    });
    const port = Number(user.address.split(":").at(-1));
    const answers = (count: number) => visitSaying(port, count);
    const aliceOffer = () =>
      daemon.registry.services().find((o) => o.name === "checked" && o.client === "alice");
    assert.deepEqual(await answers(4), { A: 2, B: 2 });
    aUp = false;
    await waitFor(() => aliceOffer()?.healthy === false, "the daemon to withdraw alice's offer");
    assert.deepEqual(changes.at(-1), { service: "checked", healthy: false });
    assert.deepEqual(await answers(5), { B: 5 }, "every user to the healthy member");
    aUp = true;
    await waitFor(() => aliceOffer()?.healthy === true, "alice's offer restored");
    assert.deepEqual(await answers(4), { A: 2, B: 2 });
    user.close();
    checked.close();
    other.close();
  });

  it("an HA client's forward goes through any session that is up", async () => {
    const bob = await client(BOB);
    await bob.offer("ha-fwd", `127.0.0.1:${services[1].port}`);
    const ha = await connectHa([url], { token: CAROL, sessions: 2, reconnect: false });
    try {
      await waitFor(() => ha.members.every((m) => m.state === "ready"), "both sessions up");
      const forward = await ha.forward({ listen: "127.0.0.1:0", service: "ha-fwd" });
      const port = Number(forward.address.split(":").at(-1));
      assert.deepEqual(await visit(port, 2), { B: 2 });
      // The first session goes (and, without reconnect, stays gone): the second carries on.
      ha.members[0].session!.destroy();
      await waitFor(() => ha.members[0].state === "closed", "the first session closed");
      assert.deepEqual(await visit(port, 3), { B: 3 });
      forward.close();
    } finally {
      await ha.close();
      await bob.withdraw("ha-fwd");
    }
  });
});
