// This node's answers to other nodes' admin queries, over an in-memory registry and a stand-in
// for the cluster that keeps the handlers: the shapes that go between nodes (pinned byte for
// byte, as nodes of different versions read them), health, kicks and tunnel closes.
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { fakeSession, fakeTunnel, memoryRegistry } from "../registry/_fake_handles.ts";
import type { LocalRegistry } from "../registry/local_registry.ts";
import { answerQueries } from "./answers.ts";

// deno-lint-ignore no-explicit-any
type Handler = (data: any) => unknown;

/** The handlers `answerQueries` registers for a node over `registry`, by query kind. */
function answersOf(registry: LocalRegistry, startedAt = Date.now()): Map<string, Handler> {
  const handlers = new Map<string, Handler>();
  answerQueries({ answer: (kind, handler) => void handlers.set(kind, handler) }, {
    registry,
    state: "running",
    startedAt,
    certificates: { find: () => undefined },
  });
  return handlers;
}

describe("cluster answers", () => {
  it("answers exactly the five admin queries", () => {
    const kinds = [...answersOf(memoryRegistry()).keys()].sort();
    assert.deepEqual(kinds, ["close-tunnel", "health", "kick", "sessions", "tunnels"]);
  });

  it("sends this node's sessions in the admin API's shape, byte for byte", () => {
    const registry = memoryRegistry();
    registry.addSession(fakeSession("s2", { since: 1_000, rtt: 12, tunnels: ["t-1"], ha: 2 }));
    registry.addSession(fakeSession("s3", { client: null, state: "handshake", since: 2_000 }));
    const answer = answersOf(registry).get("sessions")!(null);
    assert.equal(
      JSON.stringify(answer),
      JSON.stringify([
        {
          id: "s2",
          client: "alice",
          state: "ready",
          transport: "tcp",
          remoteAddress: "127.0.0.1:40000",
          since: "1970-01-01T00:00:01.000Z",
          rttMs: 12,
          bytesIn: 0,
          bytesOut: 0,
          streamCount: 0,
          tunnelCount: 1,
          ha: 2,
        },
        {
          id: "s3",
          client: null,
          state: "handshake",
          transport: "tcp",
          remoteAddress: "127.0.0.1:40000",
          since: "1970-01-01T00:00:02.000Z",
          rttMs: null,
          bytesIn: 0,
          bytesOut: 0,
          streamCount: 0,
          tunnelCount: 0,
          ha: 1,
        },
      ]),
    );
  });

  it("sends this node's tunnels oldest first with their sessions, byte for byte", () => {
    const registry = memoryRegistry();
    registry.addSession(fakeSession("s1", { tunnels: ["t-b"] }));
    registry.addTunnel(
      fakeTunnel("t-b", { createdAt: 2_000, port: 9001, label: "web", stats: { aToB: 5 } }),
      "s1",
    );
    registry.addTunnel(
      fakeTunnel("t-a", { createdAt: 1_000, host: "a.test", urls: ["http://a.test:8080/"] }),
      "s9",
    );
    const answer = answersOf(registry).get("tunnels")!(null);
    assert.equal(
      JSON.stringify(answer),
      JSON.stringify([
        {
          id: "t-a",
          client: "alice",
          session: null, // its session is gone
          bind: "127.0.0.1:9000",
          protocol: "http",
          host: "a.test",
          urls: ["http://a.test:8080/"],
          passthrough: false,
          certificate: null,
          label: null,
          createdAt: "1970-01-01T00:00:01.000Z",
          connections: 0,
          active: 0,
          bytesFromVisitors: 0,
          bytesToVisitors: 0,
          errors: 0,
          healthy: true,
          policy: {},
          udp: null,
        },
        {
          id: "t-b",
          client: "alice",
          session: "s1",
          bind: "127.0.0.1:9001",
          protocol: "tcp",
          host: null,
          urls: [],
          passthrough: false,
          certificate: null,
          label: "web",
          createdAt: "1970-01-01T00:00:02.000Z",
          connections: 0,
          active: 0,
          bytesFromVisitors: 5,
          bytesToVisitors: 0,
          errors: 0,
          healthy: true,
          policy: {},
          udp: null,
        },
      ]),
    );
  });

  it("reports health: state, whole seconds up, and counts", () => {
    const registry = memoryRegistry();
    registry.addSession(fakeSession("s1"));
    registry.addTunnel(fakeTunnel("t-1"), "s1");
    const health = answersOf(registry, Date.now() - 10_000).get("health")!(null) as Record<
      string,
      number
    >;
    assert.deepEqual(Object.keys(health), [
      "state",
      "uptimeSeconds",
      "sessions",
      "tunnels",
      "ha",
    ]);
    assert.equal(health.state, "running");
    assert.ok(Number.isInteger(health.uptimeSeconds) && health.uptimeSeconds >= 10);
    assert.equal(health.sessions, 1);
    assert.equal(health.tunnels, 1);
    assert.deepEqual(health.ha, []);
  });

  it("names its --ha clients in its health, each with the most nodes any session asked for", () => {
    const registry = memoryRegistry();
    registry.addSession(fakeSession("s1", { client: "bob", ha: 2 }));
    registry.addSession(fakeSession("s2", { client: "bob", ha: 3 }));
    registry.addSession(fakeSession("s3", { client: "alice", ha: 2 }));
    registry.addSession(fakeSession("s4", { client: "solo" }));
    registry.addSession(fakeSession("s5", { client: null, ha: 2 }));
    const health = answersOf(registry).get("health")!(null) as { ha: unknown };
    assert.deepEqual(health.ha, [{ client: "alice", wanted: 2 }, { client: "bob", wanted: 3 }]);
  });

  it("kicks a session it has, and says found: false for any other id", () => {
    const registry = memoryRegistry();
    const session = fakeSession("s1");
    registry.addSession(session);
    const kick = answersOf(registry).get("kick")!;
    assert.deepEqual(kick({ id: "s1" }), { found: true });
    assert.deepEqual(session.calls, ["close"]);
    for (const data of [{ id: "s2" }, { id: 1 }, {}, null]) {
      assert.deepEqual(kick(data), { found: false }, JSON.stringify(data));
    }
    assert.deepEqual(session.calls, ["close"], "nothing else was closed");
  });

  it("closes a tunnel it has through the registry, telling its client an operator did", () => {
    const registry = memoryRegistry();
    const session = fakeSession("s1", { tunnels: ["t-1"] });
    registry.addSession(session);
    registry.addTunnel(fakeTunnel("t-1"), "s1");
    const close = answersOf(registry).get("close-tunnel")!;
    assert.deepEqual(close({ id: "t-1" }), { found: true });
    assert.deepEqual(session.calls, ["closeTunnel t-1 closed by an operator"]);
    for (const data of [{ id: "t-2" }, { id: 7 }, null]) {
      assert.deepEqual(close(data), { found: false }, JSON.stringify(data));
    }
  });
});
