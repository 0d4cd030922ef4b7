/**
 * The OIDC login's parts that need no provider: the session key's sources, which session cookies
 * are taken (encrypted with the key, for this host, provider and client), the logout and a
 * callback without its state, and the cookies the app is never sent. The whole flow against a real
 * provider and browser: e2e/http_oidc_test.ts.
 */

import { after, describe, it } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Buffer } from "node:buffer";
import { EncryptJWT } from "jose";
import { OidcLogin, returnPath, withoutLoginCookies } from "./oidc_login.ts";
import { loadSessionKey, setSessionKeySource } from "./session_key.ts";

const dir = mkdtempSync(join(tmpdir(), "tunnelmux-oidc-"));
after(() => rmSync(dir, { recursive: true, force: true }));

const RULE = { issuer: "https://127.0.0.1:1", clientId: "c" };

function post(cookie: string | undefined, host = "app.test", target = "/x") {
  return {
    method: "POST",
    target,
    hostValue: host,
    host,
    proto: "https" as const,
    fields: cookie === undefined ? [] : [["Cookie", cookie]] as [string, string][],
  };
}

function session(key: Uint8Array, claims: Record<string, unknown>, audience = "app.test") {
  return new EncryptJWT(claims).setProtectedHeader({ alg: "dir", enc: "A256GCM" })
    .setSubject("alice").setAudience(audience).setIssuer(RULE.issuer).setExpirationTime("1h")
    .encrypt(key);
}

describe("OIDC login", () => {
  it("loads its key from the environment, or makes one in the data dir and keeps it", () => {
    const env = Buffer.alloc(32, 7).toString("base64url");
    assert.deepEqual([...loadSessionKey(dir, env)], [...Buffer.alloc(32, 7)]);
    assert.throws(() => loadSessionKey(dir, "c2hvcnQ"), /32 bytes/);
    const made = loadSessionKey(join(dir, "data"), undefined);
    assert.equal(made.length, 32);
    const file = join(dir, "data", "http-session.key");
    assert.equal(statSync(file).mode & 0o777, 0o600, "readable by the daemon alone");
    assert.deepEqual([...loadSessionKey(join(dir, "data"), undefined)], [...made], "kept");
    assert.ok(readFileSync(file, "utf8").trim().length >= 43);
  });

  it("takes a session cookie made with its key for this host, provider and client only", async () => {
    const key = new Uint8Array(32).fill(1);
    setSessionKeySource(() => key);
    const login = new OidcLogin(RULE);
    const good = await session(key, { cid: "c", email: "alice@example.com" });
    assert.deepEqual(await login.check(post(`a=b; __tunnelmux_session=${good}`)), {
      ok: true,
      identity: { sub: "alice", email: "alice@example.com" },
    });
    const refused = [
      await session(new Uint8Array(32).fill(2), { cid: "c" }), // another key
      await session(key, { cid: "c" }, "other.test"), // another host
      await session(key, { cid: "other" }), // another client
      `${good.slice(0, -3)}AAA`, // changed
    ];
    for (const cookie of refused) {
      const verdict = await login.check(post(`__tunnelmux_session=${cookie}`));
      assert.equal(verdict.ok, false);
      assert.equal(!verdict.ok && verdict.status, 401, "a POST without a session: 401");
    }
  });

  it("answers the logout and a callback without its state itself", async () => {
    setSessionKeySource(() => new Uint8Array(32).fill(1));
    const login = new OidcLogin(RULE);
    const out = await login.check(post(undefined, "app.test", "/.tunnelmux/oidc/logout"));
    assert.equal(!out.ok && out.status, 200);
    assert.match(
      String(!out.ok && out.fields.find(([n]) => n === "set-cookie")?.[1]),
      /^__tunnelmux_session=; Path=\/; Max-Age=0; HttpOnly; SameSite=Lax; Secure$/,
    );
    const back = await login.check(post(undefined, "app.test", "/.tunnelmux/oidc/callback?code=x"));
    assert.equal(!back.ok && back.status, 400);
  });

  it("sends a visitor back to a path of this host only", () => {
    assert.equal(returnPath("/a/b?c=d"), "/a/b?c=d");
    for (
      const elsewhere of ["//evil.test/", "/\\evil.test", "/a\\..\\", "https://evil.test/", "", 7]
    ) {
      assert.equal(returnPath(elsewhere), "/", String(elsewhere));
    }
  });

  it("keeps its cookies from the app, and the app's own", () => {
    assert.deepEqual(
      withoutLoginCookies([
        ["Host", "a"],
        ["Cookie", "app=1; __tunnelmux_session=s; __tunnelmux_oidc=t; other=2"],
        ["cookie", "__tunnelmux_session=s"],
      ]),
      [["Host", "a"], ["Cookie", "app=1; other=2"]],
    );
  });
});
