import { afterEach, describe, it } from "node:test";
import assert from "node:assert/strict";
import type { ClientMessage } from "../../tunnel/control/control.ts";
import { echoStream } from "../../tunnel/echo.ts";
import { readStreamHeader } from "../../tunnel/stream/read_stream_header.ts";
import { cleanup, startTcpServer, tcpRoundTrip, waitFor } from "../../testing/mod.ts";
import { ReverseTunnel } from "../tunnels/reverse_tunnel.ts";
import { UdpTunnel } from "../tunnels/udp_tunnel.ts";
import { openUdp } from "../../transport/udp.ts";
import { Fixture, GROUP_KEY, testConfig, UnreachableRegistry } from "./_handler_fixture.ts";
import { expose, type ExposeMessage, unexpose } from "./expose.ts";

let f: Fixture;

/** Sends `fields` as expose request 1 and returns what was answered (nothing, if nothing was). */
async function ask(fields: Partial<ExposeMessage> = {}): Promise<Record<string, unknown>> {
  const message: ExposeMessage = { type: "expose", id: 1, port: 0, ...fields };
  await expose(f.context, f.client, message, f.answer(message));
  assert.ok(f.sent.length <= 1, "one answer at most");
  return (f.sent[0] ?? {}) as Record<string, unknown>;
}

/** Asserts the request was refused with `code`, its message matching `text`, and logged. */
function assertRefused(answer: Record<string, unknown>, code: string, text: RegExp): void {
  assert.equal(answer.type, "error");
  assert.equal(answer.id, 1);
  assert.equal(answer.code, code);
  assert.match(answer.message as string, text);
  assert.equal(f.logged("expose refused")[0]?.reason, code);
  assert.deepEqual(f.registry.tunnels(), []);
  assert.equal(f.tunnels.size, 0);
}

describe("expose: a port tunnel", () => {
  afterEach(async () => {
    f.close();
    await cleanup();
  });

  it("opens it on a port the client may use, lists it, tells the feed and answers exposed", async () => {
    f = new Fixture();
    const answer = await ask({ label: "web" });
    assert.equal(answer.type, "exposed");
    assert.equal(answer.id, 1);
    assert.equal(answer.bindHost, "127.0.0.1");
    const port = answer.port as number;
    assert.ok(port >= 20000 && port <= 30000, `${port} is among alice's ports`);
    assert.equal(answer.url, undefined);
    const tunnel = f.tunnels.get(answer.tunnel as string)!;
    assert.ok(tunnel instanceof ReverseTunnel);
    assert.equal(tunnel.label, "web");
    assert.equal(tunnel.owner, "client:alice");
    assert.equal(f.registry.tunnel(tunnel.id), tunnel);
    const claim = await f.registry.portHolder("127.0.0.1", port);
    assert.equal(claim?.tunnel, tunnel.id);
    assert.equal(claim?.session, "s1");
    assert.equal(claim?.shared, false);
    assert.deepEqual(f.events, [{
      type: "tunnel_up",
      fields: { tunnel: tunnel.id, client: "alice", session: "s1", bind: `127.0.0.1:${port}` },
    }]);
    assert.equal(f.logged("tunnel up")[0].bind, `127.0.0.1:${port}`);
  });

  it("sends a visitor of the port to the client through the session's yamux", async () => {
    f = new Fixture();
    const answer = await ask();
    const echoed = tcpRoundTrip(answer.port as number, new TextEncoder().encode("ping"));
    const stream = await waitFor(() => f.opened[0], "a visitor stream to the client");
    const { header, rest } = await readStreamHeader(stream, 10_000);
    assert.equal(header.kind, "visitor");
    assert.equal((header as { tunnel: string }).tunnel, answer.tunnel);
    echoStream(stream);
    if (rest.length > 0) stream.write(rest);
    stream.resume();
    assert.equal(new TextDecoder().decode(await echoed), "ping");
  });

  it("makes a group's tunnel shared and owned by the group, given the group's key", async () => {
    f = new Fixture();
    const answer = await ask({ group: "team", groupKey: GROUP_KEY });
    assert.equal(answer.type, "exposed");
    assert.equal(f.tunnels.get(answer.tunnel as string)?.owner, "group:team");
    const claim = await f.registry.portHolder("127.0.0.1", answer.port as number);
    assert.equal(claim?.owner, "group:team");
    assert.equal(claim?.shared, true);
  });

  it("refuses while the daemon drains, a tunnel by host name too", async () => {
    f = new Fixture();
    f.draining = true;
    f.httpPort = 8080;
    assertRefused(await ask(), "shutting_down", /^the daemon is draining$/);
    f.sent.length = 0;
    assertRefused(await ask({ http: "app" }), "shutting_down", /draining/);
  });

  it("refuses past the client's tunnel limit, counting only its own tunnels", async () => {
    f = new Fixture({ config: testConfig({ limits: { tunnels: 1 } }) });
    const other = { id: "t-bob", client: "bob" } as ReverseTunnel;
    f.registry.addTunnel(other, "s9");
    assert.equal((await ask()).type, "exposed");
    f.sent.length = 0;
    const answer = await ask();
    assert.equal(answer.code, "limit_reached");
    assert.equal(answer.message, "tunnel limit 1 reached");
    assert.equal(f.tunnels.size, 1);
  });

  it("refuses a port, or an address, the client may not use", async () => {
    f = new Fixture();
    assertRefused(await ask({ port: 19999 }), "not_allowed", /not in the client's allowed ports/);
    f.sent.length = 0;
    assertRefused(await ask({ bindHost: "0.0.0.0" }), "not_allowed", /bind address 0\.0\.0\.0/);
  });

  it("refuses a group the client may not join, or a wrong key", async () => {
    f = new Fixture();
    assertRefused(await ask({ group: "nobody" }), "not_allowed", /may not join group nobody/);
    f.sent.length = 0;
    assertRefused(await ask({ group: "team", groupKey: "x" }), "not_allowed", /wrong key/);
  });

  it("refuses a port in use on this node", async () => {
    const busy = await startTcpServer(() => {});
    f = new Fixture({ config: testConfig({ expose: { ports: [busy.port] } }) });
    const answer = await ask({ port: busy.port });
    assertRefused(answer, "port_in_use", new RegExp(`^port ${busy.port} on 127.0.0.1 is in use$`));
    assert.equal(await f.registry.portHolder("127.0.0.1", busy.port), undefined, "released");
  });

  it("refuses when the registry cannot be reached", async () => {
    f = new Fixture({ registry: new UnreachableRegistry() });
    assertRefused(await ask(), "unavailable", /cluster registry \(NATS\) cannot be reached/);
    assert.deepEqual(f.ports.listeners(), []);
  });

  it("releases the port and answers nothing when the session ended while it was bound", async () => {
    f = new Fixture();
    const claimPort = f.registry.claimPort.bind(f.registry);
    f.registry.claimPort = (claim) => {
      f.ended = true;
      return claimPort(claim);
    };
    const answer = await ask();
    assert.deepEqual(answer, {});
    assert.equal(f.tunnels.size, 0);
    assert.deepEqual(f.registry.tunnels(), []);
    assert.deepEqual(f.ports.listeners(), []);
    assert.deepEqual(f.events, []);
  });

  it("hands a request naming http to the tunnels by host name", async () => {
    f = new Fixture();
    f.httpPort = 8080;
    const answer = await ask({ http: "app" });
    assert.equal(answer.type, "exposed");
    assert.equal(answer.url, "http://app.tunnels.example.com:8080/");
  });
});

describe("expose: a UDP port", () => {
  afterEach(async () => {
    f.close();
    await cleanup();
  });

  it("opens a UdpTunnel on an allowed port, claimed apart from TCP, and says so", async () => {
    f = new Fixture();
    const tcp = await ask();
    f.sent.length = 0;
    const udp = await ask({ protocol: "udp", port: tcp.port as number });
    assert.equal(udp.type, "exposed");
    assert.equal(udp.port, tcp.port, "UDP and TCP port numbers are apart");
    const tunnel = f.tunnels.get(udp.tunnel as string)!;
    assert.ok(tunnel instanceof UdpTunnel);
    assert.equal(tunnel.protocol, "udp");
    assert.equal(f.events[1].fields.protocol, "udp");
  });

  it("refuses a port outside the client's, as for TCP", async () => {
    f = new Fixture();
    assertRefused(await ask({ protocol: "udp", port: 80 }), "not_allowed", /allowed ports/);
  });

  it("refuses a group's UDP tunnel on port 0 and an HTTP one, saying why", async () => {
    f = new Fixture();
    assertRefused(
      await ask({ protocol: "udp", group: "team", groupKey: GROUP_KEY }),
      "not_allowed",
      /group's UDP tunnel needs its port named/,
    );
    f.sent.length = 0;
    f.close();
    f = new Fixture();
    assertRefused(await ask({ protocol: "udp", http: "app" }), "not_allowed", /cannot be UDP/);
  });

  it("puts a group's members on one UDP port, each new flow on one of them in turn", async () => {
    f = new Fixture();
    const port = await freeUdpPort();
    const first = await ask({ protocol: "udp", port, group: "team", groupKey: GROUP_KEY });
    f.sent.length = 0;
    const second = await ask({ protocol: "udp", port, group: "team", groupKey: GROUP_KEY });
    assert.equal(first.type, "exposed", JSON.stringify(first));
    assert.equal(second.type, "exposed", JSON.stringify(second));
    assert.equal(second.port, port);
    const members = [first, second].map((a) => f.tunnels.get(a.tunnel as string) as UdpTunnel);
    assert.deepEqual(members.map((t) => t.owner), ["group:team", "group:team"]);
    assert.deepEqual(f.ports.udpPort("127.0.0.1", port)?.routes, members);
    const visitors = await Promise.all(
      [0, 1, 2, 3].map(() => openUdp({ onMessage: () => {} })),
    );
    try {
      for (const v of visitors) v.send(new Uint8Array([1]), "127.0.0.1", port);
      await waitFor(() => members[0].udp.flows + members[1].udp.flows === 4, "four flows");
      assert.deepEqual(members.map((t) => t.udp.flows), [2, 2], "spread in turn");
      // A member that goes takes its own flows only; the port stays for the other.
      f.tunnels.remove(members[0]);
      await waitFor(() => members[0].udp.flowsOpen === 0, "the first member's flows end");
      assert.equal(members[1].udp.flowsOpen, 2);
      assert.equal(f.ports.udpPort("127.0.0.1", port)?.routes.length, 1);
      f.tunnels.remove(members[1]);
      assert.equal(f.ports.udpPort("127.0.0.1", port), undefined, "freed with the last member");
    } finally {
      for (const v of visitors) v.close();
    }
  });
});

/** A UDP port of 20000-30000 (alice's) that can be bound now; a bounded number of tries. */
async function freeUdpPort(): Promise<number> {
  for (let i = 0; i < 50; i++) {
    const port = 20000 + Math.floor(Math.random() * 10000);
    const socket = await openUdp({ port, onMessage: () => {} }).catch(() => undefined);
    if (!socket) continue;
    socket.close();
    // Deno lets go of a closed socket's port a turn later.
    await new Promise((resolve) => setTimeout(resolve, 10));
    return port;
  }
  throw new Error("no free UDP port in 20000-30000");
}

describe("unexpose", () => {
  afterEach(() => f.close());

  /** Sends unexpose request 2 for `tunnel` and returns the answer. */
  async function close(tunnel: string): Promise<Record<string, unknown>> {
    const message: Extract<ClientMessage, { type: "unexpose" }> = {
      type: "unexpose",
      id: 2,
      tunnel,
    };
    f.sent.length = 0;
    await unexpose(f.context, message, f.answer(message));
    assert.equal(f.sent.length, 1);
    return f.sent[0] as Record<string, unknown>;
  }

  it("takes the tunnel down and answers ok once its port is free", async () => {
    f = new Fixture();
    const exposed = await ask();
    const port = exposed.port as number;
    assert.deepEqual(await close(exposed.tunnel as string), { type: "ok", id: 2 });
    assert.equal(f.tunnels.size, 0);
    assert.equal(await f.registry.portHolder("127.0.0.1", port), undefined);
    assert.equal(f.ports.listener("127.0.0.1", port), undefined);
    assert.equal(f.events.at(-1)?.type, "tunnel_down");
  });

  it("answers ok even when the registry fails to release the port", async () => {
    f = new Fixture();
    const exposed = await ask();
    f.registry.releasePort = () => Promise.reject(new Error("registry away"));
    assert.deepEqual(await close(exposed.tunnel as string), { type: "ok", id: 2 });
    assert.equal(f.tunnels.size, 0);
  });

  it("refuses a tunnel the session does not hold", async () => {
    f = new Fixture();
    const answer = await close("t-000000000000");
    assert.equal(answer.code, "not_found");
    assert.equal(answer.message, "no tunnel t-000000000000 in this session");
    assert.equal(f.logged("unexpose refused").length, 1);
  });
});
