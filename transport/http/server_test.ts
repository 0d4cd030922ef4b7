/**
 * Our HTTP/1.1 server (the admin API's listener on Deno), driven over raw TCP so that slow,
 * malformed and hostile clients can be written by hand. Runs on every runtime.
 */

import { after, describe, it } from "node:test";
import assert from "node:assert/strict";
import { connect as netConnect, type Socket } from "node:net";
import { type Http1Server, type Http1ServerOptions, serveHttp1 } from "./server.ts";
import { waitFor } from "../../testing/wait.ts";

const servers: Http1Server[] = [];
after(async () => {
  for (const server of servers) await server.close();
});

async function serve(
  handler: (request: Request) => Response | Promise<Response>,
  options: Http1ServerOptions = {},
): Promise<Http1Server> {
  const server = await serveHttp1({ hostname: "127.0.0.1", port: 0 }, handler, options);
  servers.push(server);
  return server;
}

/** A raw connection: what it received so far, and whether the server closed it. */
function rawClient(port: number): { socket: Socket; text: () => string; ended: () => boolean } {
  const socket = netConnect({ host: "127.0.0.1", port, allowHalfOpen: true });
  let text = "";
  let ended = false;
  socket.on("data", (chunk: Uint8Array) => text += new TextDecoder().decode(chunk));
  socket.on("end", () => ended = true);
  socket.on("close", () => ended = true);
  socket.on("error", () => ended = true);
  return { socket, text: () => text, ended: () => ended };
}

async function exchange(port: number, request: string): Promise<string> {
  const client = rawClient(port);
  client.socket.write(request);
  await waitFor(client.ended, { timeoutMs: 15_000, message: "the server to close" });
  client.socket.destroy();
  return client.text();
}

const echo = async (request: Request) =>
  new Response(`${request.method} ${new URL(request.url).pathname} ${await request.text()}`, {
    headers: { "content-type": "text/plain" },
  });

describe("serveHttp1", () => {
  it("serves fetch() requests, with bodies, on a keep-alive connection", async () => {
    const server = await serve(echo);
    const url = `http://127.0.0.1:${server.port}`;
    assert.equal(await (await fetch(`${url}/a`)).text(), "GET /a ");
    const posted = await fetch(`${url}/b`, { method: "POST", body: "hello" });
    assert.equal(await posted.text(), "POST /b hello");
    const head = await fetch(`${url}/c`, { method: "HEAD" });
    assert.equal(head.status, 200);
    assert.equal(await head.text(), "");
  });

  it("answers pipelined requests in order, then closes on Connection: close", async () => {
    const server = await serve(echo);
    const text = await exchange(
      server.port,
      "GET /1 HTTP/1.1\r\nHost: x\r\n\r\nPOST /2 HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc" +
        "GET /3 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    );
    const bodies = [...text.matchAll(/\r\n[0-9a-f]+\r\n([A-Z]+ \/\d[^\r]*)/g)].map((m) =>
      m[1].trim()
    );
    assert.deepEqual(bodies, ["GET /1", "POST /2 abc", "GET /3"]);
    assert.match(text, /connection: close/i);
  });

  it("decodes a chunked body, with extensions and trailers", async () => {
    const server = await serve(echo);
    const text = await exchange(
      server.port,
      "POST /c HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n" +
        "3;ext=1\r\nabc\r\n2\r\nde\r\n0\r\nTrailer: t\r\n\r\n",
    );
    assert.match(text, /^HTTP\/1\.1 200 /);
    assert.match(text, /POST \/c abcde/);
  });

  it("answers 408 and closes when a request never completes (slowloris), head or body", async () => {
    const server = await serve(echo, { requestTimeoutMs: 200 });
    const client = rawClient(server.port);
    client.socket.write("GET / HTTP/1.1\r\nHost: x\r\nX-Slow: ");
    await waitFor(client.ended, { timeoutMs: 15_000, message: "closed" });
    assert.match(client.text(), /^HTTP\/1\.1 408 /);
    const body = await exchange(
      server.port,
      "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\nonly part",
    );
    assert.match(body, /^HTTP\/1\.1 408 /);
    await waitFor(() => server.connections === 0, "connections released");
  });

  it("answers 400 at once to bytes that cannot start a request (TLS or yamux on this port)", async () => {
    const server = await serve(echo, { requestTimeoutMs: 60_000 });
    const client = rawClient(server.port);
    client.socket.write(new Uint8Array([0x16, 0x03, 0x01, 0x02, 0x00])); // a TLS ClientHello's start
    await waitFor(client.ended, { timeoutMs: 15_000, message: "closed" });
    assert.match(client.text(), /^HTTP\/1\.1 400 /);
  });

  it("closes an idle keep-alive connection after keepAliveTimeoutMs", async () => {
    const server = await serve(echo, { keepAliveTimeoutMs: 100 });
    const client = rawClient(server.port);
    client.socket.write("GET / HTTP/1.1\r\nHost: x\r\n\r\n");
    await waitFor(client.ended, { timeoutMs: 15_000, message: "closed when idle" });
    assert.match(client.text(), /^HTTP\/1\.1 200 /);
    client.socket.destroy();
  });

  const refused: [string, string, number][] = [
    [
      "Content-Length with Transfer-Encoding",
      "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
      400,
    ],
    [
      "a duplicate Content-Length",
      "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nContent-Length: 3\r\n\r\nabc",
      400,
    ],
    [
      "an unknown transfer coding",
      "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n",
      501,
    ],
    ["obs-fold", "GET / HTTP/1.1\r\nHost: x\r\nX: a\r\n b\r\n\r\n", 400],
    ["no Host in HTTP/1.1", "GET / HTTP/1.1\r\n\r\n", 400],
    [
      "a body above the limit, by its Content-Length",
      "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 99999\r\n\r\n",
      413,
    ],
    [
      "a chunked body above the limit",
      `POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n${
        "400\r\n" + "a".repeat(1024) + "\r\n"
      }`,
      413,
    ],
    ["a head above 16 KiB", `GET / HTTP/1.1\r\nHost: x\r\nX: ${"a".repeat(17_000)}\r\n\r\n`, 431],
    ["garbage", "\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\r\n\r\n", 400],
  ];
  for (const [what, request, status] of refused) {
    it(`refuses ${what} with ${status} and closes, without calling the handler`, async () => {
      let calls = 0;
      const server = await serve((r) => {
        calls++;
        return echo(r);
      }, { maxBodyBytes: 1000 });
      const text = await exchange(server.port, request);
      assert.match(text, new RegExp(`^HTTP/1\\.1 ${status} `));
      assert.equal(calls, 0);
    });
  }

  it("streams a response of unknown length chunked, and aborts it when the client goes away", async () => {
    let cancelled = false;
    let aborted = false;
    const server = await serve((request) => {
      request.signal.addEventListener("abort", () => aborted = true);
      let n = 0;
      const body = new ReadableStream<Uint8Array>({
        async pull(controller) {
          await new Promise((r) => setTimeout(r, 5));
          controller.enqueue(new TextEncoder().encode(`data: ${n++}\n\n`));
        },
        cancel() {
          cancelled = true;
        },
      });
      return new Response(body, { headers: { "content-type": "text/event-stream" } });
    });
    const client = rawClient(server.port);
    client.socket.write("GET /events HTTP/1.1\r\nHost: x\r\n\r\n");
    await waitFor(() => client.text().includes("data: 3"), "four events");
    assert.match(client.text(), /transfer-encoding: chunked/i);
    client.socket.destroy();
    await waitFor(() => cancelled && aborted, "the stream cancelled and the request aborted");
    await waitFor(() => server.connections === 0, "the connection released");
  });

  /** An endless body of 1 KiB chunks that counts its pulls; `fail` errors it. */
  function countedBody() {
    const state = { pulls: 0, cancelled: false, fail: (_error: Error) => {} };
    const chunk = new Uint8Array(1024).fill(0x61);
    const body = new ReadableStream<Uint8Array>({
      start(controller) {
        state.fail = (error) => controller.error(error);
      },
      pull(controller) {
        state.pulls++;
        controller.enqueue(chunk.slice());
      },
      cancel() {
        state.cancelled = true;
      },
    }, { highWaterMark: 1 });
    return { state, body };
  }

  /** Waits until `count` stays the same over several polls: the server stopped pulling. */
  async function plateau(count: () => number): Promise<number> {
    let last = -1;
    let same = 0;
    await waitFor(() => {
      const now = count();
      same = now === last ? same + 1 : 0;
      last = now;
      return same >= 8;
    }, { intervalMs: 50, message: "the server to stop pulling the body" });
    return last;
  }

  it("stops pulling a body while the client does not read, and resumes once it reads", async () => {
    const { state, body } = countedBody();
    const server = await serve(() => new Response(body), { highWaterMark: 16 * 1024 });
    const client = rawClient(server.port);
    let received = 0;
    client.socket.on("data", (chunk: Uint8Array) => received += chunk.length);
    client.socket.pause();
    client.socket.write("GET / HTTP/1.1\r\nHost: x\r\n\r\n");
    const stalled = await plateau(() => state.pulls);
    assert.ok(stalled > 0, "the body was pulled at all");
    assert.equal(received, 0, "the client has not read");
    client.socket.resume();
    // Reading makes room: the transport drains and the server pulls again.
    await waitFor(() => state.pulls > stalled + 64, "pulls resumed after the client read");
    assert.ok(received > 0);
    client.socket.destroy();
    await waitFor(() => state.cancelled, "the body cancelled once the client left");
    await waitFor(() => server.connections === 0, "the connection released");
  });

  it("ends the connection when the body fails while the client does not read", async () => {
    const { state, body } = countedBody();
    const server = await serve(() => new Response(body), { keepAliveTimeoutMs: 60_000 });
    const client = rawClient(server.port);
    client.socket.pause();
    client.socket.write("GET / HTTP/1.1\r\nHost: x\r\n\r\n");
    await plateau(() => state.pulls);
    assert.equal(server.connections, 1);
    // What an event feed does to a reader that fell too far behind.
    state.fail(new Error("reader fell behind"));
    // Without this, the server would wait forever for a drain the client never brings, holding
    // the connection and everything queued for it.
    await waitFor(() => server.connections === 0, "the connection closed while still unread");
    client.socket.destroy();
  });

  it("closes the connection after a body that fails, instead of keeping it alive", async () => {
    let fail!: (error: Error) => void;
    const server = await serve(() =>
      new Response(
        new ReadableStream<Uint8Array>({
          start(controller) {
            controller.enqueue(new TextEncoder().encode("first"));
            fail = (error) => controller.error(error);
          },
        }),
      ), { keepAliveTimeoutMs: 60_000 });
    const client = rawClient(server.port);
    client.socket.write("GET / HTTP/1.1\r\nHost: x\r\n\r\n");
    await waitFor(() => client.text().includes("first"), "the first chunk");
    fail(new Error("broken body"));
    // A chunked response without its last chunk: only the close tells the client it was cut.
    await waitFor(client.ended, "the connection closed");
    assert.doesNotMatch(client.text(), /\r\n0\r\n\r\n$/, "no last chunk: the response was cut");
    assert.equal(server.connections, 0);
    client.socket.destroy();
  });

  it("stops reading while a response is in progress, past one request's worth, then answers the rest", async () => {
    let release!: () => void;
    const held = new Promise<void>((resolve) => release = resolve);
    const server = await serve(async (request) => {
      if (new URL(request.url).pathname === "/0") await held;
      return new Response(new URL(request.url).pathname);
    }, { maxBodyBytes: 1000, maxRequests: 10_000 });
    const client = rawClient(server.port);
    client.socket.write("GET /0 HTTP/1.1\r\nHost: x\r\n\r\n");
    await waitFor(() => server.pendingRequests === 1, "/0 in progress");
    // 32 MiB of pipelined requests: far more than the kernel's buffers on both sides hold, so
    // what they cannot take stays in the client's own buffer once the server stops reading (it
    // would all be read, and kept, if the server did not).
    const pad = "p".repeat(14_000);
    const count = 2400;
    for (let n = 1; n <= count; n++) {
      const close = n === count ? "Connection: close\r\n" : "";
      client.socket.write(`GET /${n} HTTP/1.1\r\nHost: x\r\nX-Pad: ${pad}\r\n${close}\r\n`);
    }
    const unsent = await plateau(() => client.socket.writableLength);
    assert.ok(unsent > 0, "the server stopped reading");
    release();
    await waitFor(client.ended, "every request answered, then the connection closed");
    const answered = [...client.text().matchAll(/\r\n\r\n[0-9a-f]+\r\n(\/\d+)\r\n/g)].map((m) =>
      m[1]
    );
    assert.equal(answered.length, count + 1);
    assert.deepEqual(answered.slice(0, 3), ["/0", "/1", "/2"]);
    assert.equal(answered.at(-1), `/${count}`);
  });

  it("close() lets a response in flight finish within the grace, then destroys what is left", async () => {
    const server = await serve(() => new Response(new ReadableStream({ pull() {} })), {
      closeGraceMs: 100,
    });
    const client = rawClient(server.port);
    client.socket.write("GET / HTTP/1.1\r\nHost: x\r\n\r\n");
    await waitFor(() => client.text().startsWith("HTTP/1.1 200"), "a response started");
    await server.close();
    await waitFor(client.ended, "the never-ending response cut");
    assert.equal(server.connections, 0);
  });
});
