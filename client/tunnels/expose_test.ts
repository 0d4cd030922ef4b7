import { describe, it } from "node:test";
import assert from "node:assert/strict";
import {
  type ExposeOptions,
  exposeRequest,
  newTunnelRecord,
  recordExposed,
  tunnelById,
  type TunnelRecord,
  tunnelView,
} from "./expose.ts";
import { HealthMonitor } from "./health_check.ts";

const NONE = () => Promise.resolve();

/** A record of `options` the daemon exposed as `id` on `host:port` (and `url`, if it said one). */
function exposed(
  id: string,
  host: string,
  port: number,
  options: ExposeOptions = { local: "127.0.0.1:3000" },
  url?: string,
): TunnelRecord {
  const record = newTunnelRecord(options, false);
  recordExposed(record, { type: "exposed", id: 1, tunnel: id, bindHost: host, port, url });
  return record;
}

describe("newTunnelRecord", () => {
  it("starts unexposed, and refuses a bad local address at once", () => {
    const record = newTunnelRecord({ local: "127.0.0.1:3000" }, true);
    assert.deepEqual(
      { id: record.id, port: record.remotePort, closed: record.closed, kept: record.kept },
      { id: "", port: 0, closed: false, kept: true },
    );
    assert.throws(() => newTunnelRecord({ local: "no-port-here" }, false));
  });

  it("a UDP tunnel gets its counters, and refuses what only a TCP tunnel takes", () => {
    const record = newTunnelRecord({ local: "127.0.0.1:53", protocol: "udp" }, false);
    assert.equal(record.udp?.flows, 0);
    assert.equal(newTunnelRecord({ local: "127.0.0.1:53" }, false).udp, undefined);
    assert.throws(
      () => newTunnelRecord({ local: "127.0.0.1:53", protocol: "udp", proxyProtocol: "v2" }, false),
      /a UDP tunnel takes no proxyProtocol/,
    );
    assert.throws(
      () => newTunnelRecord({ local: "127.0.0.1:53", protocol: "udp", tls: "x", http: "y" }, false),
      /a UDP tunnel takes no http, tls/,
    );
    assert.throws(
      () => newTunnelRecord({ local: "127.0.0.1:53", protocol: "sctp" as "udp" }, false),
      /protocol must be "tcp" or "udp"/,
    );
  });
});

describe("exposeRequest", () => {
  it("asks for the port, with the options the daemon reads", () => {
    const request = exposeRequest(
      { local: "127.0.0.1:3000", bindHost: "0.0.0.0", label: "web", shared: true },
      8080,
    );
    assert.deepEqual(request, {
      type: "expose",
      port: 8080,
      bindHost: "0.0.0.0",
      label: "web",
      group: undefined,
      groupKey: undefined,
      shared: true,
      http: undefined,
      passthrough: undefined,
    });
  });

  it("names the protocol only for UDP, which an older daemon then refuses", () => {
    const udp = exposeRequest({ local: "127.0.0.1:53", protocol: "udp" }, 5353);
    assert.equal(udp.type === "expose" && udp.protocol, "udp");
    assert.equal(udp.type === "expose" && udp.port, 5353);
    const tcp = exposeRequest({ local: "127.0.0.1:53", protocol: "tcp" }, 5353);
    assert.equal(tcp.type === "expose" && "protocol" in tcp, false);
  });

  it("an HTTP tunnel holds a name on port 0; a TLS tunnel too, passed through", () => {
    const http = exposeRequest({ local: "127.0.0.1:3000", http: "app" }, 8080);
    assert.equal(http.type === "expose" && http.port, 0);
    assert.equal(http.type === "expose" && http.http, "app");
    assert.equal(http.type === "expose" && http.passthrough, undefined);
    const tls = exposeRequest({ local: "127.0.0.1:3443", tls: "secure" }, 0);
    assert.equal(tls.type === "expose" && tls.http, "secure");
    assert.equal(tls.type === "expose" && tls.passthrough, true);
    const policy = { http: { hostRewrite: "localhost:3000" } };
    const guarded = exposeRequest({ local: "127.0.0.1:3000", http: "app", policy }, 0);
    assert.deepEqual(guarded.type === "expose" && guarded.policy, policy, "the policy goes along");
  });
});

describe("recordExposed", () => {
  it("takes the daemon's id, address and port; refuses any other answer", () => {
    const record = newTunnelRecord({ local: "127.0.0.1:3000" }, false);
    assert.equal(recordExposed(record, { type: "ok", id: 1 }), false);
    assert.equal(record.id, "");
    const reply = {
      type: "exposed",
      id: 1,
      tunnel: "t7",
      bindHost: "0.0.0.0",
      port: 9000,
    } as const;
    assert.equal(recordExposed(record, reply), true);
    assert.deepEqual([record.id, record.remoteHost, record.remotePort], ["t7", "0.0.0.0", 9000]);
  });
});

describe("tunnelById", () => {
  it("finds the record the daemon knows by that id, or none", () => {
    const records = [exposed("t1", "h", 1), exposed("t2", "h", 2)];
    assert.equal(tunnelById(records, "t2"), records[1]);
    assert.equal(tunnelById(records, "t3"), undefined);
  });
});

describe("tunnelView", () => {
  it("follows the record across reconnects", () => {
    const record = exposed("t1", "0.0.0.0", 8080);
    const view = tunnelView(record, NONE, NONE);
    assert.deepEqual([view.id, view.remotePort, view.url], ["t1", 8080, undefined]);
    recordExposed(record, {
      type: "exposed",
      id: 2,
      tunnel: "t5",
      bindHost: "0.0.0.0",
      port: 8080,
    });
    assert.equal(view.id, "t5", "a new session's id");
  });

  it("an HTTP tunnel's url: the daemon's, else its HTTP port's, none before it is exposed", () => {
    const http = { local: "127.0.0.1:3000", http: "app" };
    const host = "app.example.com";
    const told = exposed("t1", host, 443, http, "https://app.example.com/");
    assert.equal(tunnelView(told, NONE, NONE).url, "https://app.example.com/");
    // A daemon that does not say.
    assert.equal(
      tunnelView(exposed("t1", host, 8080, http), NONE, NONE).url,
      `http://${host}:8080/`,
    );
    assert.equal(tunnelView(exposed("t1", host, 80, http), NONE, NONE).url, `http://${host}/`);
    assert.equal(tunnelView(newTunnelRecord(http, true), NONE, NONE).url, undefined);
  });

  it("close() marks the record closed, stops its health check and forgets it, once", async () => {
    const record = exposed("t1", "0.0.0.0", 8080);
    // Never started, so stop() is all that can happen to it.
    record.monitor = new HealthMonitor("127.0.0.1:3000", { check: { kind: "tcp" } }, () => {});
    let stopped = 0;
    record.monitor.stop = () => void stopped++;
    let forgotten = 0;
    const view = tunnelView(record, () => Promise.resolve(void forgotten++), NONE);
    await view.close();
    await view.close();
    assert.deepEqual([record.closed, stopped, forgotten], [true, 1, 1]);
  });
});

describe("exposeRequest: the visitor policy", () => {
  it("carries the rules checked and canonical, and none when there are none", () => {
    const record = newTunnelRecord({
      local: "127.0.0.1:3000",
      policy: { allow: ["2001:DB8::/32"], connectionsPerVisitor: 2 },
    }, false);
    const request = exposeRequest(record.request, 0);
    assert.deepEqual(request.type === "expose" && request.policy, {
      allow: ["2001:db8::/32"],
      connectionsPerVisitor: 2,
    });
    const none = exposeRequest({ local: "127.0.0.1:3000", policy: {} }, 0);
    assert.ok(!("policy" in none));
    assert.throws(
      () => newTunnelRecord({ local: "127.0.0.1:3000", policy: { rate: 1 } as never }, false),
      /bad visitor policy: policy\.rate: unknown key/,
    );
  });
});
