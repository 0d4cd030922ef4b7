import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { inspectAddress, isLoopback, startInspector } from "./start.ts";
import { startInspector as fromSdk } from "../mod.ts";

describe("startInspector", () => {
  it("listens on a loopback address and serves its page and API there", async () => {
    const server = await startInspector({ address: "127.0.0.1:0" });
    try {
      assert.match(server.url, /^http:\/\/127\.0\.0\.1:\d+$/);
      const page = await fetch(server.url + "/");
      assert.equal(page.status, 200);
      assert.match(await page.text(), /tunnelmux inspector/);
      const list = await (await fetch(server.url + "/api/requests")).json();
      assert.deepEqual(list.requests, []);
    } finally {
      await server.close();
    }
  });

  it("refuses an address other machines may reach without a token, and a short token", async () => {
    await assert.rejects(startInspector({ address: "0.0.0.0:0" }), /give it a token/);
    await assert.rejects(
      startInspector({ address: "127.0.0.1:0", token: "short" }),
      /at least 16 characters/,
    );
    const guarded = await startInspector({ address: "127.0.0.1:0", token: "a-token-of-16-chars+" });
    try {
      assert.equal((await fetch(guarded.url + "/api/requests")).status, 401);
    } finally {
      await guarded.close();
    }
  });

  it("is started through the SDK too, loading its modules on the first call", async () => {
    const server = await fromSdk({ address: "127.0.0.1:0" });
    try {
      assert.equal((await fetch(server.url + "/api/requests")).status, 200);
    } finally {
      await server.close();
    }
  });

  it("reads addresses: default, bare port, loopbacks", () => {
    assert.deepEqual(inspectAddress(undefined), { hostname: "127.0.0.1", port: 4040 });
    assert.deepEqual(inspectAddress("4041"), { hostname: "127.0.0.1", port: 4041 });
    for (
      const host of ["127.0.0.1", "127.1.2.3", "::1", "[::1]", "localhost", "::ffff:127.0.0.1"]
    ) {
      assert.equal(isLoopback(host), true, host);
    }
    for (const host of ["0.0.0.0", "::", "192.168.1.2", "example.com", "::2"]) {
      assert.equal(isLoopback(host), false, host);
    }
    assert.throws(() => inspectAddress("no-port"));
  });
});
