/** `policy.http`: the strict parser (errors by JSON path) and the operator/client narrowing. */

import { describe, it } from "node:test";
import assert from "node:assert/strict";
import {
  type HttpPolicy,
  httpPolicyView,
  narrowHttpPolicy,
  parseHttpPolicy,
  underPrefix,
} from "./http_policy.ts";

const HASH = `scrypt:16384:8:1:${"A".repeat(22)}:${"B".repeat(43)}`;

function error(value: unknown): string {
  const parsed = parseHttpPolicy(value, "policy.http");
  assert.ok(!parsed.ok, `accepted ${JSON.stringify(value)}`);
  return parsed.error;
}

describe("parseHttpPolicy", () => {
  it("takes the whole shape", () => {
    const value = {
      basicAuth: [{ user: "alice", passwordHash: HASH }],
      oidc: {
        issuer: "https://idp.example",
        clientId: "c",
        clientSecret: "s",
        scopes: ["openid", "email"],
        allowEmails: ["A@X.example"],
        allowDomains: ["Example.com"],
        allowGroups: ["ops"],
        groupsClaim: "groups",
      },
      requestHeaders: { add: { "X-A": "1" }, set: { "x-s": "v" }, remove: ["X-B"] },
      responseHeaders: { add: {}, set: {}, remove: [] },
      hostRewrite: "localhost:3000",
      pathPrefix: "/api/",
    };
    const parsed = parseHttpPolicy(value, "policy.http");
    assert.ok(parsed.ok, parsed.ok ? "" : parsed.error);
    assert.deepEqual(parsed.policy.requestHeaders, {
      add: { "x-a": "1" },
      set: { "x-s": "v" },
      remove: ["x-b"],
    });
    assert.equal(parsed.policy.pathPrefix, "/api");
    assert.deepEqual(parsed.policy.oidc?.allowEmails, ["a@x.example"]);
    const jwt = parseHttpPolicy({
      jwt: { jwksUrl: "http://127.0.0.1:9/jwks", issuer: "i", audience: ["a", "b"] },
    }, "p");
    assert.ok(jwt.ok);
  });

  it("refuses bad fields, naming each by its JSON path", () => {
    const cases: [unknown, string][] = [
      [[], "policy.http: must be an object"],
      [{ basicauth: [] }, "policy.http.basicauth: unknown key"],
      [{ basicAuth: [] }, "policy.http.basicAuth: must be a non-empty array"],
      [{ basicAuth: [{ user: "a", password: "x" }] }, "policy.http.basicAuth[0].password: unknown"],
      [
        { basicAuth: [{ user: "a:b", passwordHash: HASH }] },
        "policy.http.basicAuth[0].user: must not hold a colon",
      ],
      [
        { basicAuth: [{ user: "a", passwordHash: "plain" }] },
        "policy.http.basicAuth[0].passwordHash: must be",
      ],
      [
        { basicAuth: [{ user: "a", passwordHash: HASH.replace("16384", "1024") }] },
        "policy.http.basicAuth[0].passwordHash: scrypt N",
      ],
      [
        { basicAuth: [{ user: "a", passwordHash: HASH.replace("16384", "1048576") }] },
        "memory bound",
      ],
      [
        { basicAuth: [{ user: "a", passwordHash: HASH }, { user: "a", passwordHash: HASH }] },
        "policy.http.basicAuth[1].user: a is listed twice",
      ],
      [
        { jwt: { jwksUrl: "http://idp.example/jwks", issuer: "i", audience: "a" } },
        "policy.http.jwt.jwksUrl: must be an https URL",
      ],
      [{ jwt: { jwksUrl: "https://x/j", issuer: "i" } }, "policy.http.jwt.audience: must be"],
      [
        {
          basicAuth: [{ user: "a", passwordHash: HASH }],
          jwt: { jwksUrl: "https://x/j", issuer: "i", audience: "a" },
        },
        "policy.http.jwt: cannot be required together with basicAuth",
      ],
      [{ oidc: { issuer: "https://x" } }, "policy.http.oidc.clientId: must be"],
      [{ oidc: { issuer: "https://x", clientId: "c", x: 1 } }, "policy.http.oidc.x: unknown key"],
      [{ requestHeaders: { add: { "bad name": "1" } } }, "requestHeaders.add.bad name: is not"],
      [{ requestHeaders: { set: { "x-a": "1\r\nx-b: 2" } } }, "requestHeaders.set.x-a: must be"],
      [{ requestHeaders: { add: { "x-a": 1 } } }, "requestHeaders.add.x-a: must be"],
      [{ responseHeaders: { remove: ["Content-Length"] } }, "responseHeaders.remove[0]: Content"],
      [{ requestHeaders: { set: { Host: "x" } } }, "use hostRewrite for Host"],
      [{ requestHeaders: { set: { "X-Tunnelmux-User": "admin" } } }, "written by the daemon"],
      [{ requestHeaders: { move: [] } }, "policy.http.requestHeaders.move: unknown key"],
      [{ hostRewrite: "a b" }, "policy.http.hostRewrite: must be a host"],
      [{ pathPrefix: "api" }, "policy.http.pathPrefix: must be a path"],
      [{ pathPrefix: "/a//b" }, "policy.http.pathPrefix: must be a path"],
    ];
    for (const [value, expected] of cases) {
      const message = error(value);
      assert.ok(message.includes(expected), `${message} (wanted ${expected})`);
    }
  });
});

describe("narrowHttpPolicy", () => {
  const alice = { user: "alice", passwordHash: HASH };
  const bob = { user: "bob", passwordHash: HASH };

  it("keeps the operator's auth, and a client picks only among its users", () => {
    const operator: HttpPolicy = { basicAuth: [alice, bob] };
    assert.deepEqual(narrowHttpPolicy(operator, {})?.basicAuth, [alice, bob]);
    const mallory = { user: "mallory", passwordHash: HASH };
    assert.deepEqual(narrowHttpPolicy(operator, { basicAuth: [bob, mallory] })?.basicAuth, [bob]);
    // A client's own auth where the operator has none is required too.
    assert.deepEqual(narrowHttpPolicy({}, { basicAuth: [mallory] })?.basicAuth, [mallory]);
    const jwt = { jwksUrl: "https://op/j", issuer: "op", audience: "a" };
    const mine = { jwksUrl: "https://me/j", issuer: "me", audience: "a" };
    assert.deepEqual(narrowHttpPolicy({ jwt }, { jwt: mine })?.jwt, jwt);
    assert.deepEqual(narrowHttpPolicy({ jwt }, { basicAuth: [bob] }), { jwt, basicAuth: [bob] });
  });

  it("joins header rules, the operator's value winning, and keeps its rewrite and prefix", () => {
    const narrowed = narrowHttpPolicy(
      { requestHeaders: { set: { "x-a": "op" }, remove: ["x-b"] }, hostRewrite: "op:1" },
      {
        requestHeaders: { set: { "x-a": "me", "x-c": "me" }, remove: ["x-d", "x-b"] },
        hostRewrite: "me:1",
        pathPrefix: "/x",
      },
    );
    assert.deepEqual(narrowed, {
      requestHeaders: { add: {}, set: { "x-a": "op", "x-c": "me" }, remove: ["x-b", "x-d"] },
      hostRewrite: "op:1",
      pathPrefix: "/x",
    });
    assert.equal(
      narrowHttpPolicy({ pathPrefix: "/api" }, { pathPrefix: "/x" })?.pathPrefix,
      "/api",
    );
    assert.equal(
      narrowHttpPolicy({ pathPrefix: "/api" }, { pathPrefix: "/api/v1" })?.pathPrefix,
      "/api/v1",
    );
    assert.equal(narrowHttpPolicy(undefined, { hostRewrite: "a" })?.hostRewrite, "a");
  });

  it("knows what lies under a prefix", () => {
    assert.ok(underPrefix("/api", "/api"));
    assert.ok(underPrefix("/api/x", "/api"));
    assert.ok(underPrefix("/api?q", "/api"));
    assert.ok(!underPrefix("/apix", "/api"));
    assert.ok(underPrefix("/anything", "/"));
  });
});

describe("httpPolicyView", () => {
  it("shows users without their hashes and no OIDC client secret", () => {
    const view = httpPolicyView({
      basicAuth: [{ user: "alice", passwordHash: HASH }],
      oidc: { issuer: "https://idp", clientId: "c", clientSecret: "s3cret" },
      hostRewrite: "h",
    });
    assert.deepEqual(view, {
      basicAuth: [{ user: "alice" }],
      oidc: { issuer: "https://idp", clientId: "c", clientSecret: "(set)" },
      hostRewrite: "h",
    });
    assert.doesNotMatch(JSON.stringify(view), /s3cret|scrypt/);
  });
});
