import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { ControlMessageError, parseClientMessage } from "./control.ts";

describe("parseClientMessage", () => {
  const good = [
    { type: "hello", version: 1, token: "t", name: "laptop", agent: "tunnelmux/0.1" },
    { type: "hello", version: 1 },
    { type: "expose", id: 1, port: 0 },
    { type: "expose", id: 2, port: 8080, bindHost: "127.0.0.1", label: "web" },
    { type: "unexpose", id: 3, tunnel: "t-1" },
    { type: "offer", id: 4, service: "ssh-box" },
    { type: "withdraw", id: 5, service: "ssh-box" },
    { type: "offer", id: 6, service: "db", group: "web", groupKey: "k" },
    { type: "health", id: 7, tunnel: "t-1", healthy: false, detail: "refused" },
    { type: "health", id: 8, service: "db", healthy: true },
    { type: "expose", id: 9, port: 0, policy: { deny: ["198.51.100.7/32"], bandwidth: { in: 9 } } },
    { type: "policy", id: 10, tunnel: "t-1", policy: { connectionsPerSecond: 5 } },
    { type: "expose", id: 11, port: 5353, protocol: "udp" },
    { type: "expose", id: 12, port: 8080, protocol: "tcp" },
  ];
  for (const message of good) {
    it(`accepts ${JSON.stringify(message)}`, () => {
      assert.deepEqual(parseClientMessage(message), message);
    });
  }

  const bad: [unknown, RegExp][] = [
    [null, /object/],
    [[], /object/],
    [{ type: "nope" }, /unknown/],
    [{ type: "__proto__" }, /unknown/],
    [{ type: "hello" }, /needs "version"/],
    [{ type: "hello", version: 0 }, /version/],
    [{ type: "hello", version: 1, admin: true }, /unexpected field "admin"/],
    [{ type: "hello", version: 1, token: "" }, /token/],
    [{ type: "hello", version: 1, token: "x".repeat(257) }, /token/],
    [{ type: "expose", id: 1, port: 65536 }, /port/],
    [{ type: "expose", id: 1, port: -1 }, /port/],
    [{ type: "expose", id: 1, port: "80" }, /port/],
    [{ type: "expose", id: 1.5, port: 80 }, /id/],
    [{ type: "expose", port: 80 }, /needs "id"/],
    [{ type: "unexpose", id: 1, tunnel: 7 }, /tunnel/],
    [{ type: "health", id: 1, healthy: true }, /"tunnel" or "service"/],
    [{ type: "health", id: 1, tunnel: "t", service: "s", healthy: true }, /not both/],
    [{ type: "offer", id: 1, service: "db", group: "" }, /group/],
    [{ type: "expose", id: 1, port: 0, policy: { alow: [] } }, /policy\.alow: unknown key/],
    [{ type: "expose", id: 1, port: 0, policy: { deny: ["10.0.0.1/8"] } }, /policy\.deny\[0\]/],
    [{ type: "expose", id: 1, port: 0, policy: [] }, /policy: .*object/],
    [{ type: "policy", id: 1, tunnel: "t-1" }, /needs "policy"/],
    [{ type: "expose", id: 1, port: 53, protocol: "sctp" }, /bad value for "protocol"/],
    [{ type: "expose", id: 1, port: 53, protocol: "UDP" }, /bad value for "protocol"/],
    [{ type: "policy", id: 1, tunnel: "t-1", policy: { connectionsPerVisitor: 0 } }, /integer/],
  ];
  for (const [message, reason] of bad) {
    it(`rejects ${JSON.stringify(message)}`, () => {
      assert.throws(
        () => parseClientMessage(message),
        (error: unknown) => error instanceof ControlMessageError && reason.test(error.message),
      );
    });
  }
});

describe("parseClientMessage: a visitor policy", () => {
  it("is kept in canonical form, one spelling of each rule", () => {
    const message = parseClientMessage({
      type: "expose",
      id: 1,
      port: 0,
      policy: { allow: ["2001:DB8::/32", "192.0.2.1"] },
    });
    assert.deepEqual(message.type === "expose" && message.policy, {
      allow: ["2001:db8::/32", "192.0.2.1/32"],
    });
  });
});
