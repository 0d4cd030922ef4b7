import { afterEach, describe, it } from "node:test";
import assert from "node:assert/strict";
import { ReverseTunnel } from "../tunnels/reverse_tunnel.ts";
import { Fixture, testConfig, UnreachableRegistry } from "./_handler_fixture.ts";
import { exposeHttp } from "./expose_http.ts";
import { tunnelView } from "../registry/views.ts";
import type { ExposeMessage } from "./expose.ts";

let f: Fixture;

/** Asks for host `name` as expose request 4 and returns what was answered (nothing, if nothing). */
async function ask(
  name: string,
  fields: Partial<ExposeMessage> = {},
): Promise<Record<string, unknown>> {
  const message: ExposeMessage = { type: "expose", id: 4, port: 0, http: name, ...fields };
  await exposeHttp(f.context, f.client, message, name, f.answer(message));
  assert.ok(f.sent.length <= 1, "one answer at most");
  return (f.sent[0] ?? {}) as Record<string, unknown>;
}

/** Asserts the request was refused with `code` and `text`, logged, and holds nothing. */
function assertRefused(answer: Record<string, unknown>, code: string, text: string): void {
  assert.deepEqual(answer, { type: "error", id: 4, code, message: text });
  assert.equal(f.logged("expose refused")[0]?.reason, code);
  assert.deepEqual(f.registry.tunnels(), []);
  assert.equal(f.tunnels.size, 0);
}

describe("exposeHttp: tunnels by host name", () => {
  afterEach(() => f.close());

  it("holds a label under the base domain on the HTTP port and answers its URL", async () => {
    f = new Fixture();
    f.httpPort = 8080;
    const answer = await ask("MyApp", { label: "site" });
    const host = "myapp.tunnels.example.com";
    assert.equal(answer.type, "exposed");
    assert.equal(answer.id, 4);
    assert.equal(answer.bindHost, host);
    assert.equal(answer.port, 8080);
    assert.equal(answer.url, `http://${host}:8080/`);
    const tunnel = f.tunnels.get(answer.tunnel as string)!;
    assert.ok(tunnel instanceof ReverseTunnel);
    assert.equal(tunnel.host, host);
    assert.equal(tunnel.passthrough, false);
    assert.equal(tunnel.label, "site");
    assert.equal(f.registry.hostRoute(host), tunnel);
    assert.equal(f.registry.tunnel(tunnel.id), tunnel);
    assert.deepEqual(f.certificatesWanted, [], "no HTTPS port, no certificate");
    assert.deepEqual(f.events, [{
      type: "tunnel_up",
      fields: { tunnel: tunnel.id, client: "alice", session: "s1", bind: answer.url },
    }]);
  });

  it("sends visitors to HTTPS where the daemon terminates TLS for the name", async () => {
    f = new Fixture();
    f.httpPort = 80;
    f.httpsPort = 443;
    f.terminated.add("app.tunnels.example.com");
    const answer = await ask("app");
    assert.equal(answer.port, 443);
    assert.equal(answer.url, "https://app.tunnels.example.com/", "the default port is left out");
    assert.deepEqual(f.certificatesWanted, ["app.tunnels.example.com"]);
    // Its requests are taken on the HTTP port too: operators see both ways in.
    const tunnel = f.registry.tunnel(answer.tunnel as string)!;
    assert.deepEqual(tunnelView(tunnel, "s1").urls, [
      "http://app.tunnels.example.com/",
      "https://app.tunnels.example.com/",
    ]);
  });

  it("stays on plain HTTP where no certificate serves the name, and asks for one", async () => {
    f = new Fixture();
    f.httpPort = 80;
    f.httpsPort = 8443;
    const answer = await ask("app");
    assert.equal(answer.url, "http://app.tunnels.example.com/");
    assert.deepEqual(f.certificatesWanted, ["app.tunnels.example.com"]);
    assert.deepEqual(f.registry.tunnel(answer.tunnel as string)!.urls, [answer.url]);
  });

  it("passes a TLS tunnel's connections through on the HTTPS port", async () => {
    f = new Fixture();
    f.httpPort = 8080;
    f.httpsPort = 8443;
    const answer = await ask("secure", { passthrough: true });
    assert.equal(answer.port, 8443);
    assert.equal(answer.url, "https://secure.tunnels.example.com:8443/");
    assert.equal(f.tunnels.get(answer.tunnel as string)?.passthrough, true);
    assert.deepEqual(f.certificatesWanted, [], "its client terminates TLS itself");
    assert.equal(f.events[0].fields.bind, "tls://secure.tunnels.example.com:8443");
    assert.deepEqual(f.registry.tunnel(answer.tunnel as string)!.urls, [answer.url]);
  });

  it("refuses a TLS tunnel without an HTTPS port, and any without an HTTP or HTTPS port", async () => {
    f = new Fixture();
    f.httpPort = 8080;
    assertRefused(
      await ask("app", { passthrough: true }),
      "not_allowed",
      "this daemon has no HTTPS listener for TLS tunnels",
    );
    f.httpPort = undefined;
    f.sent.length = 0;
    assertRefused(await ask("app"), "not_allowed", "this daemon has no HTTP or HTTPS listener");
  });

  it("refuses a port or a group with a name", async () => {
    f = new Fixture();
    f.httpPort = 8080;
    const text = "an HTTP tunnel takes a name, not a port or a group";
    assertRefused(await ask("app", { port: 9000 }), "not_allowed", text);
    f.sent.length = 0;
    assertRefused(await ask("app", { group: "team" }), "not_allowed", text);
  });

  it("refuses a bad host name, a label without a base domain and a name not allowed", async () => {
    f = new Fixture({ config: testConfig({ expose: { hosts: ["*.dev.example.org"] } }) });
    f.httpPort = 8080;
    assertRefused(await ask("bad name!"), "not_allowed", '"bad name!" is not a host name');
    f.sent.length = 0;
    assertRefused(
      await ask("other.example.org"),
      "not_allowed",
      "this client may not hold other.example.org",
    );
    f.config = testConfig({}, { http: { domain: null } });
    f.sent.length = 0;
    assertRefused(
      await ask("app"),
      "not_allowed",
      '"app" is a single label and the daemon has no base domain',
    );
  });

  it("refuses a name another tunnel holds", async () => {
    f = new Fixture();
    f.httpPort = 8080;
    assert.equal((await ask("app")).type, "exposed");
    f.sent.length = 0;
    const answer = await ask("APP");
    assert.deepEqual(answer, {
      type: "error",
      id: 4,
      code: "conflict",
      message: "app.tunnels.example.com is held by another tunnel",
    });
    assert.equal(f.tunnels.size, 1);
  });

  it("refuses when the registry cannot be reached", async () => {
    f = new Fixture({ registry: new UnreachableRegistry() });
    f.httpPort = 8080;
    assertRefused(
      await ask("app"),
      "unavailable",
      "the cluster registry cannot be reached; try again",
    );
  });

  it("releases the name and answers nothing when the session ended while it was claimed", async () => {
    f = new Fixture();
    f.httpPort = 8080;
    const claimHost = f.registry.claimHost.bind(f.registry);
    f.registry.claimHost = (claim, tunnel) => {
      f.ended = true;
      return claimHost(claim, tunnel);
    };
    assert.deepEqual(await ask("app"), {});
    assert.equal(f.registry.hostRoute("app.tunnels.example.com"), undefined);
    assert.equal(f.tunnels.size, 0);
    assert.deepEqual(f.events, []);
  });
});
