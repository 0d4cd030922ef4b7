/** Host names for HTTP(S) tunnels: what a client may hold, and which host a request names. */

import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { claimableHost, hostAllowed, isHostName, requestHost } from "./host_names.ts";

const DOMAIN = "tunnels.example.com";

describe("host names", () => {
  it("knows a host name from what is not one", () => {
    for (const good of ["a", "my-app", "xn--bcher-kva.example", "a.b.c", "x".repeat(63) + ".io"]) {
      assert.ok(isHostName(good), good);
    }
    for (
      const bad of [
        "",
        "-a",
        "a-",
        "a..b",
        "a.",
        ".a",
        "a_b",
        "Upper",
        "1.2.3.4",
        "x".repeat(64),
        `${"a.".repeat(126)}ab`,
        "ä.example",
      ]
    ) {
      assert.ok(!isHostName(bad), bad);
    }
  });

  it("puts a single label under the base domain and keeps a full name", () => {
    assert.deepEqual(claimableHost("MyApp", ["*"], DOMAIN), {
      ok: true,
      host: "myapp.tunnels.example.com",
    });
    assert.deepEqual(claimableHost("app.example.org", ["app.example.org"], DOMAIN), {
      ok: true,
      host: "app.example.org",
    });
    assert.equal(claimableHost("myapp", ["*"], null).ok, false);
    assert.deepEqual(
      (claimableHost("myapp", ["*"], null) as { code: string }).code,
      "no_domain",
    );
    assert.equal((claimableHost("my_app", ["*"], DOMAIN) as { code: string }).code, "bad_name");
  });

  it("allows only what the client's patterns name", () => {
    // `*` is one label under the base domain, not deeper and not another domain.
    assert.ok(hostAllowed("a.tunnels.example.com", ["*"], DOMAIN));
    assert.ok(!hostAllowed("a.b.tunnels.example.com", ["*"], DOMAIN));
    assert.ok(!hostAllowed("tunnels.example.com", ["*"], DOMAIN));
    assert.ok(!hostAllowed("a.example.org", ["*"], DOMAIN));
    assert.ok(!hostAllowed("a.tunnels.example.com", ["*"], null));
    // `*.NAME` is one label under NAME; exact names match themselves only.
    assert.ok(hostAllowed("x.dev.example.org", ["*.dev.example.org"], DOMAIN));
    assert.ok(!hostAllowed("dev.example.org", ["*.dev.example.org"], DOMAIN));
    assert.ok(!hostAllowed("x.y.dev.example.org", ["*.Dev.Example.org"], DOMAIN));
    assert.ok(hostAllowed("app.example.org", ["App.Example.org"], DOMAIN));
    // A single label is that label under the base domain.
    assert.ok(hostAllowed("bob.tunnels.example.com", ["bob"], DOMAIN));
    assert.ok(!hostAllowed("bob.example.org", ["bob"], DOMAIN));
    assert.ok(!hostAllowed("bob.tunnels.example.com", ["bob"], null));
    assert.ok(!hostAllowed("evilapp.example.org", ["app.example.org"], DOMAIN));
    assert.equal(
      (claimableHost("other", ["mine"], DOMAIN) as { code: string }).code,
      "not_allowed",
    );
    assert.equal((claimableHost("other", [], DOMAIN) as { code: string }).code, "not_allowed");
  });

  it("reads the host a request is for from its Host value", () => {
    assert.equal(requestHost("MyApp.Tunnels.Example.com:8080"), "myapp.tunnels.example.com");
    assert.equal(requestHost("myapp.tunnels.example.com."), "myapp.tunnels.example.com");
    assert.equal(requestHost(" a.b "), "a.b");
    for (const none of ["127.0.0.1", "127.0.0.1:80", "[::1]:80", "a.b:x", "a.b/c", "u@a.b", ""]) {
      assert.equal(requestHost(none), undefined, none);
    }
  });
});
