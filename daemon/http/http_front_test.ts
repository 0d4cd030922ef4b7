/**
 * The HTTP front over real sockets: a TCP listener serving visitors with `serveHttpConnection`,
 * two "clients" (yamux sessions whose streams are piped to their own node:http service, as the
 * client does for a tunnel), and visitors that are node:http agents and raw sockets. Routing per
 * request on one kept-alive connection, bodies exactly framed both ways, forwarded fields,
 * upgrades, and every refusal before a byte reaches a client.
 */

import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { Agent, createServer, request, type Server } from "node:http";
import { connect as netConnect, type Socket } from "node:net";
import { Session } from "../../protocol/session.ts";
import { connectTcp, listenTcp, memoryPair, type TransportListener } from "../../transport/mod.ts";
import { ResetReason } from "../../tunnel/stream/reset_reasons.ts";
import { splice, streamEnd, transportEnd } from "../../tunnel/splice.ts";
import { DEFAULT_TIMEOUT_MS, waitFor, withTimeout } from "../../testing/wait.ts";
import { tcpConnect } from "../../testing/visitors.ts";
import { AddressRules } from "../../tunnel/policy/visitor_policy.ts";
import {
  forwardedVisitor,
  type HttpExchange,
  type HttpFrontOptions,
  type HttpRoute,
  serveHttpConnection,
} from "./http_front.ts";

/** A local service named `name`: echoes what it was asked, serves bodies and upgrades. */
function service(name: string, hits: { count: number }): Server {
  const server = createServer((req, res) => {
    hits.count++;
    const chunks: Uint8Array[] = [];
    req.on("data", (c: Uint8Array) => chunks.push(c));
    req.on("end", () => {
      const body = Buffer.concat(chunks);
      if (req.url?.startsWith("/big")) {
        const n = Number(new URL(req.url, "http://x").searchParams.get("n"));
        res.writeHead(200, { "content-length": String(n) });
        return res.end(Buffer.alloc(n, 7));
      }
      res.setHeader("content-type", "application/json");
      res.end(JSON.stringify({
        name,
        method: req.method,
        url: req.url,
        headers: req.headers,
        bodyLength: body.length,
        bodySha: createHash("sha256").update(body).digest("hex"),
      }));
    });
  });
  server.on("upgrade", (_req, socket) => {
    hits.count++;
    socket.write(
      "HTTP/1.1 101 Switching Protocols\r\nUpgrade: echo\r\nConnection: Upgrade\r\n\r\n",
    );
    socket.pipe(socket);
  });
  return server;
}

/** A "client" whose every stream is piped to `port`, as the tunnelmux client does for a visitor. */
function tunnelTo(port: number): { route: HttpRoute; close(): void } {
  const [near, far] = memoryPair();
  const daemonSide = new Session(near, { client: false });
  const clientSide = new Session(far, {
    client: true,
    onStream: (stream) => {
      connectTcp({ hostname: "127.0.0.1", port }).then(
        (socket) => splice(streamEnd(stream), transportEnd(socket)),
        () => stream.reset(),
      );
    },
  });
  return {
    route: { open: () => daemonSide.open() },
    close: () => {
      daemonSide.close();
      clientSide.close();
    },
  };
}

/**
 * A "client" that answers every request with `response`, written at once to its stream (as one
 * Data frame up to `maxDataFrameSize`), `delayMs` after the request's first bytes came, then ends
 * the stream.
 */
function answering(
  response: string,
  { maxDataFrameSize, delayMs = 0 }: { maxDataFrameSize?: number; delayMs?: number } = {},
): { route: HttpRoute; close(): void } {
  const [near, far] = memoryPair();
  const config = { enableKeepAlive: false, ...(maxDataFrameSize ? { maxDataFrameSize } : {}) };
  const daemonSide = new Session(near, { client: false, config });
  const clientSide = new Session(far, {
    client: true,
    config,
    onStream: (stream) => {
      stream.onData = () => {
        stream.onData = null;
        setTimeout(() => {
          stream.write(new TextEncoder().encode(response));
          stream.end();
        }, delayMs);
      };
    },
  });
  return {
    route: { open: () => daemonSide.open() },
    close: () => {
      daemonSide.close();
      clientSide.close();
    },
  };
}

describe("http_front", () => {
  const hits = { a: { count: 0 }, b: { count: 0 } };
  const services = [service("A", hits.a), service("B", hits.b)];
  const tunnels: { route: HttpRoute; close(): void }[] = [];
  const exchanges: HttpExchange[] = [];
  const routes = new Map<string, HttpRoute | null>();
  let listener: TransportListener;
  let port: number;

  /** A front on a new loopback port over `routes`, plain HTTP unless `options` say otherwise. */
  function front(options: Partial<HttpFrontOptions>): Promise<TransportListener> {
    return listenTcp({ hostname: "127.0.0.1", port: 0 }, (visitor) =>
      serveHttpConnection(visitor, {
        route: (host) => routes.get(host) ?? undefined,
        proto: "http",
        trustForwarded: false,
        ...options,
      }));
  }

  before(async () => {
    for (const s of services) await new Promise<void>((r) => s.listen(0, "127.0.0.1", r));
    for (const s of services) tunnels.push(tunnelTo((s.address() as { port: number }).port));
    routes.set("a.tunnels.test", tunnels[0].route);
    routes.set("b.tunnels.test", tunnels[1].route);
    routes.set("gone.tunnels.test", { open: () => undefined });
    // A client that takes the request's stream and never answers.
    const [near, far] = memoryPair();
    const silent = new Session(near, { client: false });
    new Session(far, { client: true, onStream: () => {} });
    routes.set("silent.tunnels.test", { open: () => silent.open() });
    listener = await front({
      headerTimeoutMs: 500,
      idleTimeoutMs: 600,
      responseTimeoutMs: () => 300,
      onExchange: (e) => exchanges.push(e),
      acmeAnswer: (token) => token === "tok-1" ? "tok-1.thumbprint" : undefined,
    });
    port = listener.port;
  });

  after(async () => {
    listener.close();
    for (const t of tunnels) t.close();
    for (const s of services) await new Promise((r) => s.close(r));
  });

  /** One request through `agent`; the parsed JSON body (or raw bytes) and the socket reuse. */
  function get(
    agent: Agent,
    host: string,
    path: string,
    options: { method?: string; body?: Uint8Array; headers?: Record<string, string> } = {},
  ): Promise<{ status: number; body: Buffer; reused: boolean }> {
    return new Promise((resolve, reject) => {
      const req = request({
        host: "127.0.0.1",
        port,
        path,
        agent,
        method: options.method ?? "GET",
        headers: { host, ...options.headers },
      }, (res) => {
        const chunks: Buffer[] = [];
        res.on("data", (c: Buffer) => chunks.push(c));
        res.on(
          "end",
          () =>
            resolve({
              status: res.statusCode!,
              body: Buffer.concat(chunks),
              reused: req.reusedSocket,
            }),
        );
      });
      req.on("error", reject);
      req.end(options.body);
    });
  }

  /** Raw bytes in, everything the front answers until it closes (bounded). */
  function raw(bytes: string | Uint8Array, to = port): Promise<string> {
    let socket: Socket | undefined;
    const answer = new Promise<string>((resolve, reject) => {
      socket = netConnect({ host: "127.0.0.1", port: to }, () => socket!.write(bytes));
      let out = "";
      socket.setEncoding("latin1");
      socket.on("data", (d: string) => (out += d));
      socket.on("end", () => {
        socket!.end();
        resolve(out);
      });
      socket.on("error", reject);
    });
    return withTimeout(answer, DEFAULT_TIMEOUT_MS, "the front's answer and close")
      .finally(() => socket?.destroy());
  }

  /** A raw visitor connection whose answers are read one response at a time (bounded waits). */
  async function visitorConnection(to = port) {
    const socket = await tcpConnect(to);
    let text = "";
    socket.setEncoding("latin1");
    socket.on("data", (d: string) => (text += d));
    /** The length of the first whole response in `text` (by its Content-Length), or 0. */
    const whole = (headOnly: boolean) => {
      const end = text.indexOf("\r\n\r\n");
      if (end < 0) return 0;
      const length = headOnly ? 0 : Number(/content-length: (\d+)/i.exec(text.slice(0, end))?.[1]);
      return text.length >= end + 4 + length ? end + 4 + length : 0;
    };
    return {
      send: (bytes: string) => void socket.write(bytes),
      /** The next response, taken off what came: its head alone when `headOnly` (a HEAD's). */
      async next(headOnly = false): Promise<string> {
        const size = await waitFor(() => whole(headOnly), "a whole response");
        const response = text.slice(0, size);
        text = text.slice(size);
        return response;
      },
      /** What came and was not taken as a response yet. */
      unread: () => text,
      destroy: () => socket.destroy(),
    };
  }

  it("routes each request of one kept-alive connection by its Host", async () => {
    const agent = new Agent({ keepAlive: true, maxSockets: 1 });
    try {
      const first = await get(agent, "a.tunnels.test", "/one");
      const second = await get(agent, "B.Tunnels.Test:80", "/two");
      const third = await get(agent, "a.tunnels.test", "/three");
      assert.deepEqual([first.status, second.status, third.status], [200, 200, 200]);
      assert.equal(JSON.parse(first.body.toString()).name, "A");
      assert.equal(JSON.parse(second.body.toString()).name, "B");
      assert.equal(JSON.parse(third.body.toString()).url, "/three");
      assert.ok(second.reused && third.reused, "one connection carried all three");
    } finally {
      agent.destroy();
    }
  });

  it("writes the forwarding fields itself, dropping a visitor's own", async () => {
    const agent = new Agent({ keepAlive: false });
    const { body } = await get(agent, "a.tunnels.test", "/h", {
      headers: {
        "x-forwarded-for": "6.6.6.6",
        "forwarded": "for=6.6.6.6",
        "x-forwarded-host": "evil",
      },
    });
    const { headers } = JSON.parse(body.toString());
    assert.equal(headers["x-forwarded-for"], "127.0.0.1");
    assert.equal(headers["x-forwarded-proto"], "http");
    assert.equal(headers["x-forwarded-host"], "a.tunnels.test");
    assert.equal(headers["forwarded"], 'for=127.0.0.1;host="a.tunnels.test";proto=http');
    assert.equal(headers["host"], "a.tunnels.test");
  });

  it("carries request bodies exactly, by length and chunked, and a 20 MiB response", async () => {
    const agent = new Agent({ keepAlive: true, maxSockets: 1 });
    try {
      const body = new Uint8Array(300_000).map((_, i) => i * 13);
      const sha = createHash("sha256").update(body).digest("hex");
      const sized = await get(agent, "a.tunnels.test", "/p", { method: "POST", body });
      assert.equal(JSON.parse(sized.body.toString()).bodySha, sha);
      const chunked = await get(agent, "b.tunnels.test", "/p", {
        method: "POST",
        body,
        headers: { "transfer-encoding": "chunked" },
      });
      assert.equal(JSON.parse(chunked.body.toString()).bodySha, sha);
      assert.ok(chunked.reused);
      const big = await get(agent, "a.tunnels.test", `/big?n=${20 * 1024 * 1024}`);
      assert.equal(big.body.length, 20 * 1024 * 1024);
      assert.ok(big.body.every((b) => b === 7));
      const after = await get(agent, "b.tunnels.test", "/after");
      assert.equal(JSON.parse(after.body.toString()).name, "B");
    } finally {
      agent.destroy();
    }
  });

  it("answers pipelined requests in order", async () => {
    const out = await raw(
      "GET /p1 HTTP/1.1\r\nHost: a.tunnels.test\r\n\r\n" +
        "GET /p2 HTTP/1.1\r\nHost: b.tunnels.test\r\nConnection: close\r\n\r\n",
    );
    const names = [...out.matchAll(/"name":"(\w)","method":"GET","url":"(\/p\d)"/g)].map((m) =>
      m[1] + m[2]
    );
    assert.deepEqual(names, ["A/p1", "B/p2"]);
  });

  it("passes a protocol upgrade through as a tunnel", async () => {
    const out = await new Promise<string>((resolve, reject) => {
      const socket = netConnect({ host: "127.0.0.1", port }, () =>
        socket.write(
          "GET /ws HTTP/1.1\r\nHost: b.tunnels.test\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\n",
        ));
      let text = "";
      socket.setEncoding("latin1");
      socket.on("data", (d: string) => {
        text += d;
        if (text.includes("\r\n\r\n") && !text.includes("ping")) socket.write("ping after upgrade");
        if (text.endsWith("ping after upgrade")) {
          socket.end();
          resolve(text);
        }
      });
      socket.on("error", reject);
    });
    assert.match(out, /^HTTP\/1\.1 101 /);
    assert.ok(out.endsWith("ping after upgrade"));
  });

  it("refuses what it cannot route or trust before any client sees it", async () => {
    const before = hits.a.count + hits.b.count;
    const answers = await Promise.all([
      // (These two would keep the connection for another request, unless asked to close.)
      raw("GET / HTTP/1.1\r\nHost: nobody.tunnels.test\r\nConnection: close\r\n\r\n"),
      raw("GET / HTTP/1.1\r\nHost: gone.tunnels.test\r\nConnection: close\r\n\r\n"),
      raw("GET / HTTP/1.1\r\n\r\n"),
      raw("GET / HTTP/1.1\r\nHost: a.tunnels.test\r\nHost: b.tunnels.test\r\n\r\n"),
      raw(
        "POST / HTTP/1.1\r\nHost: a.tunnels.test\r\nContent-Length: 4\r\n" +
          "Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
      ),
      raw(
        "POST / HTTP/1.1\r\nHost: a.tunnels.test\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\nx",
      ),
      raw("GET / HTTP/1.1\r\nHost: a.tunnels.test\r\nX: 1\r\n folded\r\n\r\n"),
      raw("POST / HTTP/1.1\r\nHost: a.tunnels.test\r\nTransfer-Encoding: gzip\r\n\r\n"),
      raw(`GET / HTTP/1.1\r\nHost: a.tunnels.test\r\nX: ${"y".repeat(20_000)}\r\n\r\n`),
      raw("GET ftp://a.tunnels.test/ HTTP/1.1\r\nHost: a.tunnels.test\r\n\r\n"),
      raw("GET http://me@a.tunnels.test/ HTTP/1.1\r\nHost: a.tunnels.test\r\n\r\n"),
      raw("CONNECT a.tunnels.test:443 HTTP/1.1\r\nHost: a.tunnels.test:443\r\n\r\n"),
    ]);
    const statuses = answers.map((a) => Number(/^HTTP\/1\.1 (\d{3})/.exec(a)?.[1]));
    assert.deepEqual(statuses, [404, 502, 400, 400, 400, 400, 400, 501, 431, 400, 400, 405]);
    assert.equal(hits.a.count + hits.b.count, before, "no service saw any of them");
    assert.ok(exchanges.some((e) => e.host === "nobody.tunnels.test" && e.status === 404));
  });

  it("keeps a kept-alive connection after a 404 or a 502 it answers itself, for the next request", async () => {
    const visitor = await visitorConnection();
    try {
      visitor.send("GET /first HTTP/1.1\r\nHost: nobody.tunnels.test\r\n\r\n");
      const notFound = await visitor.next();
      assert.match(notFound, /^HTTP\/1\.1 404 /);
      assert.doesNotMatch(notFound, /connection: close/i);
      assert.ok(notFound.endsWith("\r\n\r\nno tunnel for nobody.tunnels.test\n"));
      visitor.send("GET /second HTTP/1.1\r\nHost: a.tunnels.test\r\n\r\n");
      const served = await visitor.next();
      assert.match(served, /^HTTP\/1\.1 200 /);
      assert.equal(JSON.parse(served.slice(served.indexOf("\r\n\r\n") + 4)).url, "/second");
      // Pipelined: a 502 (the route opens nothing), a HEAD's 404 (its head alone), then a 200.
      visitor.send(
        "GET /third HTTP/1.1\r\nHost: gone.tunnels.test\r\n\r\n" +
          "HEAD /fourth HTTP/1.1\r\nHost: nobody.tunnels.test\r\n\r\n" +
          "GET /fifth HTTP/1.1\r\nHost: b.tunnels.test\r\n\r\n",
      );
      assert.match(await visitor.next(), /^HTTP\/1\.1 502 /);
      assert.match(await visitor.next(true), /^HTTP\/1\.1 404 [^]*content-length: \d+\r\n/i);
      const fifth = await visitor.next();
      assert.match(fifth, /^HTTP\/1\.1 200 /, "the HEAD's answer had no body to misread");
      assert.equal(JSON.parse(fifth.slice(fifth.indexOf("\r\n\r\n") + 4)).name, "B");
      assert.equal(visitor.unread(), "");
    } finally {
      visitor.destroy();
    }
  });

  it("keeps the connection after a 502 for a service that closed without answering, the request all sent", async () => {
    const closer = answering("");
    routes.set("closer.tunnels.test", closer.route);
    const visitor = await visitorConnection();
    try {
      visitor.send(
        "POST /p HTTP/1.1\r\nHost: closer.tunnels.test\r\nContent-Length: 3\r\n\r\nabc",
      );
      const bad = await visitor.next();
      assert.match(bad, /^HTTP\/1\.1 502 /);
      assert.ok(bad.endsWith("\r\n\r\nthe service closed without a response\n"));
      visitor.send("GET /next HTTP/1.1\r\nHost: a.tunnels.test\r\n\r\n");
      assert.match(await visitor.next(), /^HTTP\/1\.1 200 /);
    } finally {
      visitor.destroy();
      closer.close();
      routes.delete("closer.tunnels.test");
    }
  });

  it("answers 429 with the policy's page when the tunnel's node refuses the visitor (a limit)", async () => {
    // As a cluster node holding the tunnel answers a visitor relayed to it over its rate limit.
    const [near, far] = memoryPair();
    const config = { enableKeepAlive: false };
    const daemonSide = new Session(near, { client: false, config });
    const holder = new Session(far, {
      client: true,
      config,
      onStream: (stream) => {
        stream.onData = () => stream.reset(ResetReason.LimitReached);
      },
    });
    routes.set("limited.tunnels.test", { open: () => daemonSide.open() });
    const visitor = await visitorConnection();
    try {
      visitor.send("GET /p HTTP/1.1\r\nHost: limited.tunnels.test\r\n\r\n");
      const refused = await visitor.next();
      assert.match(refused, /^HTTP\/1\.1 429 /);
      assert.match(refused, /retry-after: 1/i);
      assert.match(refused, /<h1>429 Too Many Requests<\/h1>/);
      visitor.send("GET /next HTTP/1.1\r\nHost: a.tunnels.test\r\n\r\n");
      assert.match(await visitor.next(), /^HTTP\/1\.1 200 /, "the connection kept");
    } finally {
      visitor.destroy();
      daemonSide.close();
      holder.close();
      routes.delete("limited.tunnels.test");
    }
  });

  it("still closes after a 404 when the visitor said close, or left a body unread", async () => {
    const answers = await Promise.all([
      raw("GET / HTTP/1.1\r\nHost: nobody.tunnels.test\r\nConnection: close\r\n\r\n"),
      raw("GET / HTTP/1.0\r\nHost: nobody.tunnels.test\r\n\r\n"),
      raw("POST / HTTP/1.1\r\nHost: nobody.tunnels.test\r\nContent-Length: 3\r\n\r\nabc"),
      raw("POST / HTTP/1.1\r\nHost: nobody.tunnels.test\r\nTransfer-Encoding: chunked\r\n\r\n"),
    ]);
    for (const answer of answers) {
      assert.match(answer, /^HTTP\/1\.1 404 [^]*connection: close\r\n/);
    }
  });

  it("says connection: close on the last response a connection takes, so keep-alive moves on", async () => {
    const limited = await front({ maxRequests: 2 });
    const agent = new Agent({ keepAlive: true, maxSockets: 1 });
    const one = (path: string) =>
      new Promise<{ connection?: string; reused: boolean; status: number }>((resolve, reject) => {
        const req = request({
          host: "127.0.0.1",
          port: limited.port,
          path,
          agent,
          headers: { host: "a.tunnels.test" },
        }, (res) => {
          res.resume();
          res.on("end", () =>
            resolve({
              connection: res.headers.connection,
              reused: req.reusedSocket,
              status: res.statusCode!,
            }));
        });
        req.on("error", reject).end();
      });
    try {
      const first = await one("/1");
      const second = await one("/2");
      const third = await one("/3");
      assert.deepEqual([first.status, second.status, third.status], [200, 200, 200]);
      assert.equal(second.reused, true);
      assert.equal(second.connection, "close", "the second is the connection's last");
      assert.equal(third.reused, false, "the third went on a new connection");
    } finally {
      agent.destroy();
      limited.close();
    }
  });

  it("keeps a connection's stream for the next request to the same host, and resends a GET the service's closed connection never answered", async () => {
    // Two services counting the connections they accept; the second one drops each connection
    // at its second request without answering (a keep-alive connection closed under a request).
    const accepted = { keep: 0, other: 0, closer: 0 };
    const make = (name: keyof typeof accepted) => {
      const server = createServer((req, res) => {
        const socket = req.socket as typeof req.socket & { served?: number };
        socket.served = (socket.served ?? 0) + 1;
        if (name === "closer" && socket.served === 2) return void socket.destroy();
        res.end(`${name} ${req.url}`);
      });
      server.on("connection", () => accepted[name]++);
      return server;
    };
    const servers = [make("keep"), make("other"), make("closer")];
    for (const s of servers) await new Promise<void>((r) => s.listen(0, "127.0.0.1", r));
    const made = servers.map((s) => tunnelTo((s.address() as { port: number }).port));
    routes.set("keep.tunnels.test", made[0].route);
    routes.set("other.tunnels.test", made[1].route);
    routes.set("closer.tunnels.test", made[2].route);
    const agent = new Agent({ keepAlive: true, maxSockets: 1 });
    try {
      const text = async (host: string, path: string) => {
        const got = await get(agent, host, path);
        assert.equal(got.status, 200, `${host}${path}`);
        return got.body.toString();
      };
      assert.equal(await text("keep.tunnels.test", "/1"), "keep /1");
      assert.equal(await text("keep.tunnels.test", "/2"), "keep /2");
      assert.equal(await text("keep.tunnels.test", "/3"), "keep /3");
      assert.equal(accepted.keep, 1, "three requests, one connection to the service");
      assert.equal(await text("other.tunnels.test", "/4"), "other /4");
      assert.equal(await text("keep.tunnels.test", "/5"), "keep /5");
      assert.deepEqual([accepted.keep, accepted.other], [2, 1], "another host: a new stream");
      assert.equal(await text("closer.tunnels.test", "/6"), "closer /6");
      assert.equal(await text("closer.tunnels.test", "/7"), "closer /7");
      assert.equal(accepted.closer, 2, "the dropped request went again on a new connection");
    } finally {
      agent.destroy();
      for (const t of made) t.close();
      for (const s of servers) s.close();
      for (const host of ["keep", "other", "closer"]) routes.delete(`${host}.tunnels.test`);
    }
  });

  it("routes an absolute-form request by its authority, sending it on in origin-form", async () => {
    const answer = await raw(
      "GET http://A.tunnels.test/abs?q=1 HTTP/1.1\r\nHost: b.tunnels.test\r\nConnection: close\r\n\r\n",
    );
    assert.match(answer, /^HTTP\/1\.1 200 /);
    const body = JSON.parse(answer.slice(answer.indexOf("\r\n\r\n") + 4));
    assert.equal(body.name, "A");
    assert.equal(body.url, "/abs?q=1");
    assert.equal(body.headers.host, "A.tunnels.test");
  });

  it("answers 421 for a host the connection may not carry (a TLS connection's certificate)", async () => {
    const narrow = await front({ proto: "https", authority: (host) => host === "a.tunnels.test" });
    const agent = new Agent({ keepAlive: true, maxSockets: 1 });
    const status = (host: string) =>
      new Promise<number>((resolve, reject) => {
        request(
          { host: "127.0.0.1", port: narrow.port, path: "/", agent, headers: { host } },
          (res) => {
            res.resume();
            res.on("end", () => resolve(res.statusCode!));
          },
        ).on("error", reject).end();
      });
    try {
      const before = hits.b.count;
      assert.equal(await status("a.tunnels.test"), 200);
      assert.equal(await status("b.tunnels.test"), 421);
      assert.equal(hits.b.count, before, "b's service never saw it");
    } finally {
      agent.destroy();
      narrow.close();
    }
  });

  it("answers an ACME HTTP-01 challenge it holds itself, and routes any other", async () => {
    const before = hits.a.count;
    const answer = await raw(
      "GET /.well-known/acme-challenge/tok-1 HTTP/1.1\r\nHost: a.tunnels.test\r\n\r\n",
    );
    assert.match(answer, /^HTTP\/1\.1 200 /);
    assert.ok(answer.endsWith("\r\n\r\ntok-1.thumbprint"), "the key authorization exactly");
    assert.equal(hits.a.count, before, "the tunnel's service never saw it");
    // Not ours (another token, or not a GET): the tunnel's service answers.
    const agent = new Agent();
    const routed = await get(agent, "a.tunnels.test", "/.well-known/acme-challenge/other");
    assert.equal(routed.status, 200);
    assert.equal(hits.a.count, before + 1);
    agent.destroy();
  });

  it("answers 504 when no response head comes within the response deadline, read at each request", async () => {
    let deadline = 60_000;
    const seen: HttpExchange[] = [];
    // The idle timeout stays long: only the response deadline can answer in time.
    const timed = await front({
      idleTimeoutMs: 60_000,
      responseTimeoutMs: () => deadline,
      onExchange: (e) => seen.push(e),
    });
    const visitor = await visitorConnection(timed.port);
    try {
      visitor.send("GET /first HTTP/1.1\r\nHost: a.tunnels.test\r\n\r\n");
      assert.match(await visitor.next(), /^HTTP\/1\.1 200 /);
      // As a reload would: the connection's next request waits this long.
      deadline = 200;
      visitor.send("GET /frozen HTTP/1.1\r\nHost: silent.tunnels.test\r\n\r\n");
      const timedOut = await visitor.next();
      assert.match(timedOut, /^HTTP\/1\.1 504 /);
      assert.match(timedOut, /\r\ncontent-type: text\/plain; charset=utf-8\r\n/);
      assert.ok(timedOut.endsWith("\r\n\r\nno response in time\n"));
      assert.deepEqual(seen.map((e) => [e.host, e.status]), [
        ["a.tunnels.test", 200],
        ["silent.tunnels.test", 504],
      ]);
    } finally {
      visitor.destroy();
      timed.close();
    }
  });

  it("lets a request wait for its response head past the idle timeout, within the response deadline", async () => {
    const slow = answering("HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nlate", { delayMs: 400 });
    routes.set("slow.tunnels.test", slow.route);
    const patient = await front({ idleTimeoutMs: 50, responseTimeoutMs: () => 60_000 });
    try {
      const answer = await raw(
        "GET / HTTP/1.1\r\nHost: slow.tunnels.test\r\nConnection: close\r\n\r\n",
        patient.port,
      );
      assert.match(answer, /^HTTP\/1\.1 200 /);
      assert.ok(answer.endsWith("\r\n\r\nlate"));
    } finally {
      patient.close();
      slow.close();
      routes.delete("slow.tunnels.test");
    }
  });

  it("answers 504 when the service never answers, and cuts a request body that stops", async () => {
    const silent = await raw("GET / HTTP/1.1\r\nHost: silent.tunnels.test\r\n\r\n");
    assert.match(silent, /^HTTP\/1\.1 504 /);
    // Half a body, then nothing: the connection is closed, not held.
    const stalled = await raw(
      "POST / HTTP/1.1\r\nHost: silent.tunnels.test\r\nContent-Length: 10\r\n\r\nhalf",
    );
    assert.match(stalled, /^(HTTP\/1\.1 504 |$)/);
  });

  it("answers a head whose lines end in a bare LF with 400 at once, not 408 at its deadline", async () => {
    const before = hits.a.count;
    const answers = await Promise.all([
      raw("GET / HTTP/1.1\n\n"),
      raw("GET / HTTP/1.1\r\nHost: a.tunnels.test\n\n"),
      // The same head with CRLFs is served.
      raw("GET / HTTP/1.1\r\nHost: a.tunnels.test\r\nConnection: close\r\n\r\n"),
    ]);
    const statuses = answers.map((a) => Number(/^HTTP\/1\.1 (\d{3})/.exec(a)?.[1]));
    assert.deepEqual(statuses, [400, 400, 200]);
    assert.match(answers[0], /\r\n\r\nmalformed request head\n$/);
    assert.equal(hits.a.count, before + 1, "only the well-formed one reached a service");
  });

  it("answers 502 to a response head over 64 KiB, whether it comes in one read or several, and counts it", async () => {
    const head = (size: number) =>
      `HTTP/1.1 200 OK\r\nX-Big: ${"a".repeat(size)}\r\nContent-Length: 2\r\n\r\nhi`;
    const made = {
      // 100 KB in one Data frame: one read on the front's side.
      "one-read.tunnels.test": answering(head(100_000), { maxDataFrameSize: 256 * 1024 }),
      // The same in 64 KiB frames: the head's end arrives in the second read.
      "two-reads.tunnels.test": answering(head(100_000)),
      // Under the cap: served.
      "fits.tunnels.test": answering(head(60_000)),
    };
    for (const [host, tunnel] of Object.entries(made)) routes.set(host, tunnel.route);
    try {
      const answers = await Promise.all(
        Object.keys(made).map((host) =>
          raw(`GET / HTTP/1.1\r\nHost: ${host}\r\nConnection: close\r\n\r\n`)
        ),
      );
      const statuses = answers.map((a) => Number(/^HTTP\/1\.1 (\d{3})/.exec(a)?.[1]));
      assert.deepEqual(statuses, [502, 502, 200]);
      assert.match(answers[0], /\r\n\r\nresponse head too large\n$/);
      assert.ok(answers[2].endsWith("\r\n\r\nhi"));
      for (const host of ["one-read.tunnels.test", "two-reads.tunnels.test"]) {
        assert.ok(exchanges.some((e) => e.host === host && e.status === 502), `${host} counted`);
      }
    } finally {
      for (const [host, tunnel] of Object.entries(made)) {
        tunnel.close();
        routes.delete(host);
      }
    }
  });

  it("answers a head that never completes with 408", async () => {
    const out = await raw("GET / HTTP/1.1\r\nHost: a.tunn");
    assert.match(out, /^HTTP\/1\.1 408 /);
  });
});

describe("forwardedVisitor: whose address a tunnel's policy judges", () => {
  const trusted = new AddressRules({ allow: ["10.0.0.0/8", "2001:db8::/32"] });
  const xff = (value: string): [string, string][] => [["X-Forwarded-For", value]];

  it("is the connection's own address without trusted fronts, whatever the headers say", () => {
    assert.equal(
      forwardedVisitor("198.51.100.1:5000", xff("192.0.2.9"), undefined),
      "198.51.100.1",
    );
    assert.equal(
      forwardedVisitor("[2001:db8::1]:5000", xff("192.0.2.9"), undefined),
      "2001:db8::1",
    );
    assert.equal(forwardedVisitor("198.51.100.1:5000", xff("192.0.2.9"), trusted), "198.51.100.1");
  });

  it("from a trusted front, the nearest address of its chain that is not a trusted front's", () => {
    assert.equal(forwardedVisitor("10.0.0.2:5000", xff("192.0.2.9"), trusted), "192.0.2.9");
    // The visitor wrote the first entry itself: only what trusted hops appended counts.
    assert.equal(
      forwardedVisitor("10.0.0.2:5000", xff("203.0.113.66, 192.0.2.9, 10.1.1.1"), trusted),
      "192.0.2.9",
    );
    assert.equal(
      forwardedVisitor(
        "10.0.0.2:5000",
        [["Forwarded", 'for="[2001:db9::5]:80";proto=https']],
        trusted,
      ),
      "2001:db9::5",
    );
    assert.equal(forwardedVisitor("10.0.0.2:5000", [], trusted), "10.0.0.2", "no chain: the front");
    assert.equal(forwardedVisitor("10.0.0.2:5000", xff("unknown"), trusted), "unknown");
  });
});
