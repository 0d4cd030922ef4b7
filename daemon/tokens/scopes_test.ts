// Mint requests and their scopes: the envelope (unknown keys, expiry forms) and the scopes as the
// config validator parses them, with fields named relative to the request body.
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { validateConfig } from "../config/mod.ts";
import { MAX_EXPIRES_IN, parseMintRequest, scopedClient } from "./scopes.ts";

const NOW = Date.parse("2026-01-01T00:00:00Z");
const limits = validateConfig({
  listen: { admin: null },
  clients: [{ name: "a", token: "scopes-test-token-0123456789abcdef" }],
}).config!.limits;

describe("parseMintRequest", () => {
  it("takes expiresIn in seconds and expiresAt as ISO 8601, or neither", () => {
    assert.equal(
      parseMintRequest({ name: "n", expiresIn: 60 }, NOW).request?.expiresAt,
      NOW + 60e3,
    );
    const at = "2026-01-02T00:00:00.000Z";
    assert.equal(
      parseMintRequest({ name: "n", expiresAt: at }, NOW).request?.expiresAt,
      Date.parse(at),
    );
    assert.equal(parseMintRequest({ name: "n" }, NOW).request?.expiresAt, null);
  });

  it("names the field of every problem", () => {
    const fields = (body: unknown) => parseMintRequest(body, NOW).errors.map((e) => e.field);
    assert.deepEqual(fields({ name: "n", tokn: 1, expiresin: 5 }), ["tokn", "expiresin"]);
    assert.deepEqual(fields({ name: "n", expiresIn: MAX_EXPIRES_IN + 1 }), ["expiresIn"]);
    assert.deepEqual(fields({ name: "n", expiresIn: 1.5 }), ["expiresIn"]);
    assert.deepEqual(fields({ name: "n", expiresAt: "2026-01-02" }), ["expiresAt"]);
    assert.deepEqual(fields({ name: "n", expiresAt: "2040-01-01T00:00:00Z" }), ["expiresAt"]);
    assert.deepEqual(fields(null), [""]);
  });
});

describe("scopedClient", () => {
  it("parses scopes exactly as a config client, capped by the daemon-wide limits", () => {
    const { client, errors } = scopedClient("bot", {
      expose: { ports: ["8000-8010"] },
      forward: ["127.0.0.1:80"],
      services: { use: ["echo"] },
    }, limits);
    assert.deepEqual(errors, []);
    assert.equal(client?.name, "bot");
    assert.deepEqual(client?.expose.ports, [{ from: 8000, to: 8010 }]);
    assert.equal(client?.forward[0].text, "127.0.0.1:80");
    assert.deepEqual(client?.limits, {
      tunnels: limits.tunnelsPerClient,
      streams: limits.streamsPerSession,
      visitors: limits.visitorsPerClient,
    });
  });

  it("grants nothing by default", () => {
    const { client } = scopedClient("bot", {}, limits);
    assert.deepEqual(client?.expose.ports, []);
    assert.deepEqual(client?.forward, []);
    assert.deepEqual(client?.services, { offer: [], use: [] });
  });

  it("reports errors and warnings under the request's field names", () => {
    const bad = scopedClient("bot", {
      forward: ["127.0.0.1:80", "nope nope"],
      limits: { streams: limits.streamsPerSession + 1 },
    }, limits);
    assert.equal(bad.client, undefined);
    assert.deepEqual(bad.errors.map((e) => e.field), ["forward[1]", "limits.streams"]);
    const loud = scopedClient("bot", { expose: { ports: [9000], bindHosts: ["0.0.0.0"] } }, limits);
    assert.deepEqual(loud.warnings.map((w) => w.field), ["expose.bindHosts[0]"]);
  });
});
