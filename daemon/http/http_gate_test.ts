/**
 * A tunnel's policy.http as the HTTP front applies it, without the front: header rules, what the
 * app is sent, and the bearer JWT against JWKS documents served here on 127.0.0.1 (one too large
 * to be taken).
 */

import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { createServer, type Server } from "node:http";
import { exportJWK, generateKeyPair, SignJWT } from "jose";
import { applyRules, HttpGate } from "./http_gate.ts";
import { hashPassword } from "../../tunnel/policy/password_hash.ts";

const request = (fields: [string, string][]) => ({
  method: "GET",
  target: "/",
  hostValue: "app.test",
  host: "app.test",
  proto: "http" as const,
  fields,
});

describe("HttpGate", () => {
  it("applies header rules in order: remove, then set, then add", () => {
    const fields: [string, string][] = [["Host", "a"], ["X-A", "1"], ["x-b", "2"], ["X-C", "3"]];
    assert.deepEqual(
      applyRules(fields, { remove: ["x-a"], set: { "x-b": "two" }, add: { "x-c": "more" } }),
      [["Host", "a"], ["X-C", "3"], ["x-b", "two"], ["x-c", "more"]],
    );
    assert.deepEqual(applyRules(fields, {}), fields);
  });

  it("sends the app no basic-auth credentials, and rewrites its Host", async () => {
    const gate = new HttpGate({
      basicAuth: [{ user: "u", passwordHash: await hashPassword("p") }],
      hostRewrite: "localhost:3000",
    });
    assert.ok(gate.guards);
    assert.ok(!gate.rewritesResponses);
    assert.deepEqual(
      gate.requestFields([["host", "app.test"], ["Authorization", "Basic dTpw"], ["x", "y"]]),
      [["host", "localhost:3000"], ["x", "y"]],
    );
    const open = new HttpGate({ requestHeaders: { add: { "x-a": "1" } } });
    assert.ok(!open.guards, "header rules alone ask nothing of a visitor");
    assert.deepEqual(open.check(request([])), { ok: true });
  });

  it("does not remember a wrong password", async () => {
    const gate = new HttpGate({
      basicAuth: [{ user: "u", passwordHash: await hashPassword("p") }],
    });
    const wrong = request([["authorization", `Basic ${btoa("u:q")}`]]);
    assert.equal((await gate.check(wrong)).ok, false);
    assert.equal((await gate.check(wrong)).ok, false);
    assert.equal(gate.hashed, 2);
    const right = request([["authorization", `Basic ${btoa("u:p")}`]]);
    assert.equal((await gate.check(right)).ok, true);
    assert.equal((await gate.check(right)).ok, true);
    assert.equal(gate.hashed, 3, "the right one hashed once");
    assert.deepEqual(Object.fromEntries(gate.refused), { basic_wrong: 2 });
  });

  it("hashes at most two passwords at once, daemon-wide: the others are refused unhashed", async () => {
    const passwordHash = await hashPassword("p");
    const gates = [
      new HttpGate({ basicAuth: [{ user: "u", passwordHash }] }),
      new HttpGate({
        basicAuth: [{ user: "u", passwordHash }],
      }),
    ];
    const attempts = [];
    for (let i = 0; i < 6; i++) {
      const wrong = request([["authorization", `Basic ${btoa(`u:wrong${i}`)}`]]);
      attempts.push(gates[i % 2].check(wrong));
    }
    const verdicts = await Promise.all(attempts);
    assert.ok(verdicts.every((v) => !v.ok));
    assert.equal(gates[0].hashed + gates[1].hashed, 2);
    const busy = (gates[0].refused.get("basic_busy") ?? 0) +
      (gates[1].refused.get("basic_busy") ?? 0);
    assert.equal(busy, 4);
    // Once those are done: a browser's six parallel first requests, one hash for all.
    const right = request([["authorization", `Basic ${btoa("u:p")}`]]);
    const parallel = await Promise.all([1, 2, 3, 4, 5, 6].map(() => gates[0].check(right)));
    assert.ok(parallel.every((v) => v.ok));
    assert.equal(gates[0].hashed, 2, "one more hash");
  });

  describe("bearer JWT", () => {
    let server: Server;
    let base: string;
    let token: string;
    const held: { destroy(): void }[] = [];

    before(async () => {
      const { publicKey, privateKey } = await generateKeyPair("ES256");
      const jwk = { ...(await exportJWK(publicKey)), kid: "k", alg: "ES256" };
      server = createServer((req, res) => {
        // A JWKS that never answers: the gate gives up at its deadline.
        if (req.url === "/never") return void held.push(res);
        res.setHeader("content-type", "application/json");
        // A key set padded past the daemon's bound: refused however valid its keys.
        const padding = req.url === "/huge" ? "x".repeat(300 * 1024) : "";
        res.end(JSON.stringify({ keys: [jwk], padding }));
      });
      await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
      base = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
      token = await new SignJWT({}).setProtectedHeader({ alg: "ES256", kid: "k" })
        .setIssuer("iss").setAudience("aud").setExpirationTime("5m").sign(privateKey);
    });

    after(() => {
      for (const res of held) res.destroy();
      server.close();
    });

    it("takes a token the JWKS signs, and none when the JWKS is over its size bound", async () => {
      const bearer = request([["authorization", `Bearer ${token}`]]);
      const small = new HttpGate({
        jwt: { jwksUrl: `${base}/small`, issuer: "iss", audience: ["other", "aud"] },
      });
      assert.deepEqual(await small.check(bearer), { ok: true });
      const huge = new HttpGate({
        jwt: { jwksUrl: `${base}/huge`, issuer: "iss", audience: "aud" },
      });
      const refused = await huge.check(bearer);
      assert.equal(refused.ok, false);
      assert.deepEqual(Object.fromEntries(huge.refused), { jwt_invalid: 1 });
      assert.equal((await small.check(request([["authorization", "Bearer x.y"]]))).ok, false);
    });

    it("refuses the token when the JWKS never answers, at the fetch's deadline", async () => {
      const never = new HttpGate({
        jwt: { jwksUrl: `${base}/never`, issuer: "iss", audience: "aud" },
      });
      const refused = await never.check(request([["authorization", `Bearer ${token}`]]));
      assert.equal(refused.ok, false);
      assert.deepEqual(Object.fromEntries(never.refused), { jwt_invalid: 1 });
      assert.equal(held.length, 1, "the JWKS was asked");
    });
  });
});
