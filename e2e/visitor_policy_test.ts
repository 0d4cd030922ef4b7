// A tunnel's visitor policy, end to end: a real daemon (its operator's rules for the client), the
// SDK as the client (its own rules, narrowed by the operator's), and real sockets as visitors from
// distinct loopback addresses (127.0.0.2, .3, …: Linux routes all of 127/8 to lo), for a port's
// tunnel and an HTTP tunnel.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import type { Socket } from "node:net";
import { type Client, connect } from "../client/mod.ts";
import { validateConfig } from "../daemon/config/mod.ts";
import type { Daemon } from "../daemon/daemon.ts";
import { renderMetrics } from "../daemon/admin/api/metrics.ts";
import { startEchoServer, startHttpServer, type TestServer } from "../testing/fake_servers.ts";
import { tcpConnect } from "../testing/visitors.ts";
import { DEFAULT_TIMEOUT_MS, waitFor, withTimeout } from "../testing/wait.ts";
import { portOf, startDaemonInProcess } from "./_in_process_daemon.ts";
import { concat, pattern } from "../util/bytes/bytes.ts";
import { encodeProxyV1, encodeProxyV2 } from "../tunnel/proxy_protocol/proxy_protocol.ts";

const TOKEN = "visitor-policy-token-0123456789abcdef";
const BOB = "visitor-policy-bob-0123456789abcdefgh";
const DOMAIN = "tunnels.test";

/** What `socket` receives after `text` is sent, until it echoes `text` or is closed. */
function echoOrClose(socket: Socket, text: string): Promise<string> {
  return withTimeout(
    new Promise<string>((resolve) => {
      let got = "";
      socket.setEncoding("latin1");
      socket.on("data", (d: string) => {
        got += d;
        if (got === text) resolve(got);
      });
      socket.on("end", () => resolve(got));
      socket.on("close", () => resolve(got));
      socket.on("error", () => {});
      socket.write(text);
    }),
    DEFAULT_TIMEOUT_MS,
    "echo or close",
  );
}

/** One visit of `port` from `from`: "echo" when served, "closed" when refused. */
async function visit(port: number, from: string): Promise<"echo" | "closed"> {
  const socket = await tcpConnect(port, "127.0.0.1", from);
  try {
    return await echoOrClose(socket, "ping") === "ping" ? "echo" : "closed";
  } finally {
    socket.destroy();
  }
}

/** A raw HTTP/1.1 GET of `path` for `host` from `from` (and extra head lines): status and body. */
async function httpVisit(
  port: number,
  host: string,
  from: string,
  extra = "",
): Promise<{ status: number; head: string; body: string }> {
  const socket = await tcpConnect(port, "127.0.0.1", from);
  try {
    const text = await withTimeout(
      new Promise<string>((resolve) => {
        let got = "";
        socket.setEncoding("latin1");
        socket.on("data", (d: string) => got += d);
        socket.on("end", () => resolve(got));
        socket.on("close", () => resolve(got));
        socket.write(`GET /hello HTTP/1.1\r\nHost: ${host}\r\n${extra}Connection: close\r\n\r\n`);
      }),
      DEFAULT_TIMEOUT_MS,
      "an HTTP answer",
    );
    const split = text.indexOf("\r\n\r\n");
    return {
      status: Number(/^HTTP\/1\.1 (\d{3})/.exec(text)?.[1] ?? 0),
      head: text.slice(0, split),
      body: text.slice(split + 4),
    };
  } finally {
    socket.destroy();
  }
}

describe("visitor policy: who and how much, for every tunnel", () => {
  let daemon: Daemon;
  let client: Client;
  let echo: TestServer;
  let web: TestServer;
  const config = {
    listen: { tcp: "127.0.0.1:0", websocket: null, admin: null, http: "127.0.0.1:0" },
    http: { domain: DOMAIN },
    trustedProxies: ["127.0.0.8/32"],
    clients: [{
      name: "alice",
      token: TOKEN,
      expose: { ports: [0, "20000-32767"], hosts: ["*"] },
      // The operator's rules for alice: the client's only narrow them.
      visitors: { allow: ["127.0.0.0/24"], deny: ["127.0.0.3/32"], connectionsPerVisitor: 4 },
    }, {
      name: "bob",
      token: BOB,
      expose: { ports: [0, "20000-32767"] },
      // The operator's bandwidth for all of bob's tunnels together.
      limits: { bandwidth: { in: 256 * 1024 } },
    }],
  };

  before(async () => {
    echo = await startEchoServer();
    web = await startHttpServer();
    daemon = await startDaemonInProcess(config);
    client = await connect(`tcp://127.0.0.1:${portOf(daemon.addresses.tcp)}`, {
      token: TOKEN,
      reconnect: false,
    });
  });
  after(async () => {
    await client?.close();
    await daemon?.stop();
    echo?.close();
    web?.close();
  });

  const local = () => `127.0.0.1:${echo.port}`;
  const held = (id: string) => daemon.registry.tunnels().find((t) => t.id === id)!;

  it("admits and refuses visitors by address, the operator's deny and the client's allow", async () => {
    const tunnel = await client.expose({
      local: local(),
      policy: { allow: ["127.0.0.0/29"], connectionsPerVisitor: 50 },
    });
    // Narrowed: the client's allow inside the operator's, the smaller cap, the operator's deny.
    assert.deepEqual(held(tunnel.id).policy, {
      allow: ["127.0.0.0/29"],
      deny: ["127.0.0.3/32"],
      connectionsPerVisitor: 4,
    });
    const before = daemon.counters.get("policy_address");
    const events: Record<string, unknown>[] = [];
    const unsubscribe = daemon.events.subscribe((e) => {
      if (e.type === "visitor_refused") events.push(e.fields);
    });
    assert.equal(await visit(tunnel.remotePort, "127.0.0.2"), "echo");
    assert.equal(await visit(tunnel.remotePort, "127.0.0.3"), "closed", "the operator's deny");
    assert.equal(await visit(tunnel.remotePort, "127.0.0.9"), "closed", "outside the allow list");
    unsubscribe();
    assert.equal(daemon.counters.get("policy_address") - before, 2);
    // At most one event a second per tunnel and reason: the first refusal is told, with its
    // visitor (the second too only if a second passed between them).
    assert.ok(events.length >= 1 && events.length <= 2, JSON.stringify(events));
    assert.equal(events[0].tunnel, tunnel.id);
    assert.equal(events[0].reason, "policy_address");
    assert.match(String(events[0].visitor), /^127\.0\.0\.3:/);
    assert.match(
      renderMetrics(daemon as never),
      /tunnelmux_visitor_policy_refusals_total\{reason="address"\} [2-9]/,
    );
    await tunnel.close();
  });

  it("refuses an expose whose rules reach outside the operator's, naming the field", async () => {
    await assert.rejects(
      client.expose({ local: local(), policy: { allow: ["192.168.0.0/16"] } }),
      (error: Error & { code?: string }) => {
        assert.equal(error.code, "not_allowed");
        assert.match(error.message, /policy\.allow/);
        return true;
      },
    );
  });

  it("caps connections at once per visitor address, each address on its own", async () => {
    const tunnel = await client.expose({ local: local(), policy: { connectionsPerVisitor: 2 } });
    const open: Socket[] = [];
    try {
      for (let i = 0; i < 2; i++) {
        const socket = await tcpConnect(tunnel.remotePort, "127.0.0.1", "127.0.0.4");
        open.push(socket);
        assert.equal(await echoOrClose(socket, `hold${i}`), `hold${i}`);
      }
      assert.equal(await visit(tunnel.remotePort, "127.0.0.4"), "closed", "a third at once");
      assert.equal(await visit(tunnel.remotePort, "127.0.0.5"), "echo", "another address");
      assert.ok(daemon.counters.get("policy_visitor_connections") >= 1);
      open.shift()!.destroy();
      await waitFor(async () => await visit(tunnel.remotePort, "127.0.0.4") === "echo", {
        message: "a place freed is taken again",
      });
    } finally {
      for (const socket of open) socket.destroy();
      await tunnel.close();
    }
  });

  it("refuses new connections past the per-visitor rate", async () => {
    // One a second, a burst of one: of five visits made at once at least four are refused
    // unless the visits take seconds each.
    const tunnel = await client.expose({ local: local(), policy: { connectionsPerSecond: 1 } });
    const outcomes = await Promise.all(
      Array.from({ length: 5 }, () => visit(tunnel.remotePort, "127.0.0.6")),
    );
    assert.ok(outcomes.includes("echo"), outcomes.join());
    assert.ok(outcomes.includes("closed"), outcomes.join());
    assert.ok(daemon.counters.get("policy_rate") >= 1);
    await tunnel.close();
  });

  /**
   * Echoes 1.25 MiB through `port` limited to `rate` bytes/s visitor → service, and checks it
   * took at least what the limit allows.
   */
  async function heldTransfer(port: number, rate: number): Promise<void> {
    const socket = await tcpConnect(port, "127.0.0.1", "127.0.0.2");
    try {
      const size = 1280 * 1024;
      const payload = pattern(size, 7);
      const started = performance.now();
      let got = 0;
      const done = withTimeout(
        new Promise<void>((resolve) => {
          socket.on("data", (d: Uint8Array) => {
            got += d.length;
            if (got >= size) resolve();
          });
        }),
        DEFAULT_TIMEOUT_MS,
        "the echoed transfer",
      );
      socket.write(payload);
      await done;
      // A lower bound only (a slow machine makes it longer, never shorter): past the bucket's
      // one second of burst and the one read that is let through before its hold (64 KiB on
      // Deno, up to 512 KiB on Bun), the rest cannot arrive faster than the rate.
      const seconds = (performance.now() - started) / 1000;
      const least = (size - rate - 512 * 1024) / rate;
      assert.ok(seconds >= least, `${size} bytes in ${seconds} s, at least ${least} s`);
    } finally {
      socket.destroy();
    }
  }

  it("holds a transfer to the tunnel's bandwidth instead of letting it through", async () => {
    const rate = 256 * 1024;
    const tunnel = await client.expose({ local: local(), policy: { bandwidth: { in: rate } } });
    await heldTransfer(tunnel.remotePort, rate);
    await tunnel.close();
  });

  it("holds a transfer to its client's bandwidth, set by the operator for all its tunnels", async () => {
    const bob = await connect(`tcp://127.0.0.1:${portOf(daemon.addresses.tcp)}`, {
      token: BOB,
      reconnect: false,
    });
    try {
      const tunnel = await bob.expose({ local: local() });
      await heldTransfer(tunnel.remotePort, 256 * 1024);
    } finally {
      await bob.close();
    }
  });

  /**
   * One HTTP request of `head` (and `body`) through the HTTP port from 127.0.0.2, read to its
   * end: the response's bytes and the achieved rate over what the bucket's burst and one read
   * (up to 512 KiB on Bun) may let through at once, in bytes per second.
   */
  async function httpTransfer(head: string, body: Uint8Array, size: number, rate: number) {
    const socket = await tcpConnect(portOf(daemon.addresses.http), "127.0.0.1", "127.0.0.2");
    try {
      const started = performance.now();
      let got = 0;
      const done = withTimeout(
        new Promise<void>((resolve) => {
          socket.on("data", (d: Uint8Array) => got += d.length);
          socket.on("end", () => resolve());
          socket.on("close", () => resolve());
        }),
        DEFAULT_TIMEOUT_MS,
        "the HTTP transfer",
      );
      socket.write(head);
      socket.write(body);
      await done;
      const seconds = (performance.now() - started) / 1000;
      return { got, achieved: (size - rate - 512 * 1024) / seconds };
    } finally {
      socket.destroy();
    }
  }

  it("holds an HTTP tunnel's request and response bodies to its bandwidth each way", async () => {
    const rate = 256 * 1024;
    const size = 1280 * 1024;
    const host = `held.${DOMAIN}`;
    const tunnel = await client.expose({
      local: `127.0.0.1:${web.port}`,
      http: "held",
      policy: { bandwidth: { in: rate, out: rate } },
    });
    try {
      // Upward: a POST body echoed back (the echo held as well, so the request's hold is a
      // lower bound on the whole).
      const up = await httpTransfer(
        `POST /echo HTTP/1.1\r\nHost: ${host}\r\nContent-Length: ${size}\r\n` +
          `Connection: close\r\n\r\n`,
        pattern(size, 3),
        size,
        rate,
      );
      assert.ok(up.got > size, `the echo came back: ${up.got} bytes`);
      // A lower bound only on the time (a slow machine makes it longer, never shorter).
      assert.ok(up.achieved < 1.5 * rate, `in: ${up.achieved} B/s past ${rate}`);
      const down = await httpTransfer(
        `GET /bytes?n=${size} HTTP/1.1\r\nHost: ${host}\r\nConnection: close\r\n\r\n`,
        new Uint8Array(0),
        size,
        rate,
      );
      assert.ok(down.got > size, `the body came: ${down.got} bytes`);
      assert.ok(down.achieved < 1.5 * rate, `out: ${down.achieved} B/s past ${rate}`);
    } finally {
      await tunnel.close();
    }
  });

  it("changes a tunnel's rules in place: same tunnel, its visitors stay, the next meet them", async () => {
    const tunnel = await client.expose({ local: local() });
    const id = tunnel.id;
    const stay = await tcpConnect(tunnel.remotePort, "127.0.0.1", "127.0.0.2");
    try {
      assert.equal(await echoOrClose(stay, "a"), "a");
      await tunnel.setPolicy({ deny: ["127.0.0.2/32"] });
      assert.equal(tunnel.id, id);
      assert.deepEqual(held(id).policy.deny, ["127.0.0.3/32", "127.0.0.2/32"]);
      assert.equal(await visit(tunnel.remotePort, "127.0.0.2"), "closed");
      assert.equal(await visit(tunnel.remotePort, "127.0.0.4"), "echo");
      stay.removeAllListeners("data");
      assert.equal(await echoOrClose(stay, "b"), "b", "the connected visitor stays");
      await assert.rejects(tunnel.setPolicy({ allow: ["10.0.0.0/8"] }), /policy\.allow/);
      // The operator's reload: rules narrowed again, the tunnel kept.
      const reloaded = validateConfig({
        ...config,
        clients: [
          { ...config.clients[0], visitors: { deny: ["127.0.0.4/32"] } },
          config.clients[1],
        ],
      });
      assert.deepEqual(reloaded.errors, []);
      daemon.reload(reloaded.config!);
      assert.deepEqual(held(id).policy, { deny: ["127.0.0.4/32", "127.0.0.2/32"] });
      assert.equal(await visit(tunnel.remotePort, "127.0.0.4"), "closed");
      assert.equal(await visit(tunnel.remotePort, "127.0.0.3"), "echo", "no longer denied");
      daemon.reload(validateConfig(config).config!);
    } finally {
      stay.destroy();
      await tunnel.close();
    }
  });

  it("answers an HTTP visitor it refuses with a 403 page, and believes only trusted fronts", async () => {
    const httpPort = portOf(daemon.addresses.http);
    const tunnel = await client.expose({
      local: `127.0.0.1:${web.port}`,
      http: "app",
      policy: { deny: ["127.0.0.7/32"] },
    });
    const host = `app.${DOMAIN}`;
    try {
      const served = await httpVisit(httpPort, host, "127.0.0.2");
      assert.equal(served.status, 200);
      assert.match(served.body, /hello/);
      const refused = await httpVisit(httpPort, host, "127.0.0.7");
      assert.equal(refused.status, 403);
      assert.match(refused.head, /content-type: text\/html/i);
      assert.doesNotMatch(refused.body, /127\.0\.0\.7|deny/, "the page reveals no rule");
      // Through the trusted front (127.0.0.8), its X-Forwarded-For names the visitor.
      const viaFront = (xff: string) =>
        httpVisit(httpPort, host, "127.0.0.8", `X-Forwarded-For: ${xff}\r\n`);
      assert.equal((await viaFront("127.0.0.7")).status, 403);
      assert.equal((await viaFront("127.0.0.2")).status, 200);
      // From anyone else the header is the visitor's own word: not believed.
      const spoofed = await httpVisit(
        httpPort,
        host,
        "127.0.0.2",
        "X-Forwarded-For: 127.0.0.7\r\n",
      );
      assert.equal(spoofed.status, 200);
      const forged = await httpVisit(httpPort, host, "127.0.0.7", "X-Forwarded-For: 127.0.0.2\r\n");
      assert.equal(forged.status, 403);
    } finally {
      await tunnel.close();
    }
  });

  it("believes a trusted front's PROXY header for the visitor of a port's tunnel, no one else's", async () => {
    const tunnel = await client.expose({ local: local(), policy: { deny: ["127.0.0.7/32"] } });
    /** What comes back for `bytes` sent from `from`, until it echoes `expect` or is closed. */
    const send = async (from: string, bytes: Uint8Array, expect: string) => {
      const socket = await tcpConnect(tunnel.remotePort, "127.0.0.1", from);
      try {
        return await withTimeout(
          new Promise<string>((resolve) => {
            let got = "";
            socket.setEncoding("latin1");
            socket.on("data", (d: string) => {
              got += d;
              if (got === expect) resolve(got);
            });
            socket.on("end", () => resolve(got));
            socket.on("close", () => resolve(got));
            socket.write(bytes);
          }),
          DEFAULT_TIMEOUT_MS,
          "an echo or a close",
        );
      } finally {
        socket.destroy();
      }
    };
    const withHeader = (header: Uint8Array) => concat([header, new TextEncoder().encode("ping")]);
    const to = `127.0.0.1:${tunnel.remotePort}`;
    // Through the front (127.0.0.8): the header is taken off, and its source is the visitor.
    assert.equal(
      await send("127.0.0.8", withHeader(encodeProxyV1("127.0.0.2:5555", to)), "ping"),
      "ping",
    );
    assert.equal(
      await send("127.0.0.8", withHeader(encodeProxyV2("127.0.0.2:5555", to)), "ping"),
      "ping",
    );
    assert.equal(
      await send("127.0.0.8", withHeader(encodeProxyV1("127.0.0.7:5555", to)), "ping"),
      "",
    );
    assert.equal(
      await send("127.0.0.8", new TextEncoder().encode("ping"), "ping"),
      "",
      "no header",
    );
    // From anyone else a header is the visitor's own bytes: passed on, never believed.
    const forged = withHeader(encodeProxyV1("127.0.0.2:5555", to));
    const echoed = await send("127.0.0.7", forged, new TextDecoder().decode(forged));
    assert.equal(echoed, "", "127.0.0.7 is denied whatever it writes");
    const plain = await send("127.0.0.2", forged, new TextDecoder().decode(forged));
    assert.equal(plain, new TextDecoder().decode(forged), "the header reached the service as data");
    await tunnel.close();
  });

  it("answers 429 to an HTTP visitor past its rate", async () => {
    const httpPort = portOf(daemon.addresses.http);
    const tunnel = await client.expose({
      local: `127.0.0.1:${web.port}`,
      http: "rated",
      policy: { connectionsPerSecond: 1 },
    });
    try {
      const statuses = await Promise.all(
        Array.from({ length: 5 }, () => httpVisit(httpPort, `rated.${DOMAIN}`, "127.0.0.5")),
      ).then((all) => all.map((r) => r.status));
      assert.ok(statuses.includes(200), statuses.join());
      assert.ok(statuses.includes(429), statuses.join());
    } finally {
      await tunnel.close();
    }
  });
});
