// WebSocket transports: the transport contract (as far as WebSocket can honour it), backpressure,
// close codes, HTTP refusals, a yamux session over WebSocket, and wss with a self-signed cert.
// Runs under `deno test -A transport/ws_test.ts` and `bun test --timeout 60000 transport/ws_test.ts`.
//
// The shared `transportContract` of _contract.ts does not fit as a whole: WebSocket has no
// half-close (its "echo 4 MiB" and "half-closes" cases need the peer to write after our end), and
// Deno's WebSocket cannot stop reading (its "write returns false while the peer is paused" case).
// Its other cases are repeated below against WebSocket pairs, with WebSocket versions of those three.

import assert from "node:assert/strict";
import { before, describe, it } from "node:test";
import { Session } from "../../protocol/mod.ts";
import type { Transport, TransportListener } from "../../protocol/transport.ts";
import { checkEcho } from "../../tools/echo_check.ts";
import { echoStream } from "../../tunnel/echo.ts";
import { type Pair, transportContract, withPair } from "../_contract.ts";
import { hasOpenssl, makeTestIdentity } from "../_test_certificate.ts";
import { echo, pattern, Probe, sameBytes, tick, writeAll } from "../_test_util.ts";
import { RawWebSocket } from "./_test_util.ts";
import {
  CloseCode,
  connectWebSocket,
  listenWebSocket,
  WebSocketConnectError,
  type WebSocketListenOptions,
} from "./mod.ts";
import { MESSAGE_SIZE } from "./transport.ts";
import { decodeClosePayload, encodeFrame, MessageDecoder, Opcode } from "./frame.ts";
import { acceptFor } from "./handshake.ts";
import { listenTcp } from "../mod.ts";
import { waitFor } from "../../testing/wait.ts";

const KIB = 1024;
const MIB = 1024 * KIB;

/** A listener plus a way to await what it accepts. */
async function serve(
  options: Partial<WebSocketListenOptions> = {},
): Promise<{ listener: TransportListener; next(): Promise<Transport>; url: string }> {
  const accepted: Transport[] = [];
  const listener = await listenWebSocket(
    { hostname: "127.0.0.1", port: 0, ...options },
    (t) => accepted.push(t),
  );
  const scheme = options.tls ? "wss" : "ws";
  return {
    listener,
    url: `${scheme}://127.0.0.1:${listener.port}${options.path ?? "/tunnel"}`,
    async next() {
      await waitFor(() => accepted.length > 0, "accept");
      return accepted.shift()!;
    },
  };
}

/**
 * A WebSocket server of its own that ignores what the client says it accepts: it answers the
 * upgrade with a `size`-byte message at once, and reports the code of the client's close frame.
 */
async function rudeServer(size: number) {
  let resolveCode!: (code: number) => void;
  const closeCode = new Promise<number>((resolve) => resolveCode = resolve);
  const sockets: Transport[] = [];
  const listener = await listenTcp({ hostname: "127.0.0.1", port: 0 }, (tcp) => {
    sockets.push(tcp);
    let head = "";
    let upgraded = false;
    const decoder = new MessageDecoder({ masked: true, maxMessageSize: 1 << 20 });
    tcp.start({
      data(chunk) {
        if (upgraded) {
          decoder.push(chunk, (opcode, payload) => {
            if (opcode === Opcode.Close) resolveCode(decodeClosePayload(payload).code);
          });
          return;
        }
        head += new TextDecoder().decode(chunk);
        if (!head.includes("\r\n\r\n")) return;
        upgraded = true;
        const key = /sec-websocket-key: *([^\r]+)/i.exec(head)![1];
        tcp.write(
          new TextEncoder().encode(
            "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" +
              `Sec-WebSocket-Accept: ${acceptFor(key)}\r\n\r\n`,
          ),
        );
        tcp.write(encodeFrame(Opcode.Binary, new Uint8Array(size)));
      },
      drain() {},
      end() {},
      close() {},
    });
  });
  return {
    port: listener.port,
    closeCode,
    close() {
      for (const socket of sockets) socket.close();
      listener.close();
    },
  };
}

async function makePair(options: { highWaterMark?: number } = {}): Promise<Pair> {
  const server = await serve({ highWaterMark: options.highWaterMark });
  try {
    const a = await connectWebSocket(server.url, { highWaterMark: options.highWaterMark });
    const b = await server.next();
    return {
      a,
      b,
      cleanup() {
        a.close();
        b.close();
        server.listener.close();
      },
    };
  } catch (error) {
    server.listener.close();
    throw error;
  }
}

transportContract("ws", makePair, {
  halfClose: false,
  pauseStopsReading: true,
  handlerErrorCloseCode: CloseCode.InternalError,
});

describe("ws: beyond the transport contract", () => {
  it("returns false above the high-water mark, drains, loses nothing", async () => {
    const { a, b, cleanup } = await makePair({ highWaterMark: 64 * KIB });
    const pa = new Probe();
    const pb = new Probe();
    try {
      a.start(pa);
      b.start(pb);
      // Within one tick nothing leaves the queue, so the mark is reached on every runtime.
      const data = pattern(4 * MIB, 3);
      let refusedAt = -1;
      for (let offset = 0; offset < data.length; offset += 32 * KIB) {
        if (!a.write(data.subarray(offset, offset + 32 * KIB)) && refusedAt < 0) refusedAt = offset;
      }
      assert.equal(refusedAt, 32 * KIB, "write never returned false");
      assert.ok(a.bufferedAmount >= 64 * KIB);
      await pa.until(() => pa.drains === 1, "drain");
      assert.ok(a.bufferedAmount < 64 * KIB);
      await pb.until(() => pb.bytes === data.length, "all bytes");
      assert.ok(sameBytes(pb.received(), data));
    } finally {
      cleanup();
    }
  });

  it("reports host:port addresses; the listener binds port 0 and stops accepting on close", async () => {
    const server = await serve();
    assert.equal(server.listener.hostname, "127.0.0.1");
    assert.ok(server.listener.port > 0);
    const a = await connectWebSocket(server.url);
    const b = await server.next();
    const pa = new Probe();
    const pb = new Probe();
    try {
      assert.equal(a.remoteAddress, `127.0.0.1:${server.listener.port}`);
      assert.equal(b.localAddress, a.remoteAddress);
      assert.match(b.remoteAddress, /^127\.0\.0\.1:\d+$/);
      a.start(pa);
      b.start(pb);
      server.listener.close();
      server.listener.close();
      await assert.rejects(connectWebSocket(server.url));
      // Upgraded connections stay open, as the TransportListener contract says.
      a.write(new TextEncoder().encode("still here"));
      await pb.until(() => pb.bytes === 10, "data after listener close");
    } finally {
      a.close();
      b.close();
      server.listener.close();
    }
  });
});

describe("ws: backpressure", () => {
  it("echoes 8 MiB through a receiver that keeps pausing, losing nothing", async () => {
    await withPair(makePair, { highWaterMark: 256 * KIB }, async ({ a, b }, pa, pb) => {
      const data = pattern(8 * MIB, 11);
      echo(b, pb);
      // The receiving side stops for a moment after every 8th chunk.
      let count = 0;
      pa.onData = () => {
        if (++count % 8 !== 0) return;
        a.pause();
        setTimeout(() => a.resume(), 1);
      };
      a.start(pa);
      b.start(pb);
      await writeAll(a, pa, data, 48 * KIB);
      await pa.until(() => pa.bytes === data.length, "echo");
      assert.ok(sameBytes(pa.received(), data), "echoed bytes differ");
      assert.ok(pa.drains > 0, "the sender was never held back");
    });
  });

  it("server writes to a client that stops reading: false, drain after it reads, nothing lost", async () => {
    const server = await serve({ highWaterMark: 256 * KIB });
    const raw = await RawWebSocket.connect(server.listener.port);
    const b = await server.next();
    const pb = new Probe();
    try {
      b.start(pb);
      raw.tcp.pause();
      const data = pattern(64 * MIB, 5);
      let written = 0;
      // Kernel buffers take a few MiB first; the bound keeps a broken backpressure from looping on.
      while (written < data.length) {
        const ok = b.write(data.subarray(written, written + 64 * KIB));
        written += 64 * KIB;
        if (!ok) break;
        await tick(1);
      }
      assert.ok(written < data.length, "write never returned false");
      assert.equal(pb.drains, 0);
      raw.tcp.resume();
      await pb.until(() => pb.drains === 1, "drain");
      await waitFor(() => raw.binaryBytes === written, "all bytes at the client");
      assert.ok(raw.messages.every((m) => m.opcode === 2 && m.payload.length <= MESSAGE_SIZE));
      let offset = 0;
      for (const m of raw.messages) {
        assert.ok(sameBytes(m.payload, data.subarray(offset, offset + m.payload.length)));
        offset += m.payload.length;
      }
    } finally {
      raw.tcp.close();
      b.close();
      server.listener.close();
    }
  });
});

describe("ws: close codes", () => {
  it("a text message closes with 1003", async () => {
    const server = await serve();
    const raw = await RawWebSocket.connect(server.listener.port);
    const b = await server.next();
    const pb = new Probe();
    try {
      b.start(pb);
      raw.send(1, new TextEncoder().encode("hello"));
      await pb.until(() => pb.closes.length === 1, "server close");
      assert.match(String(pb.closes[0]?.message), /text message/);
      await waitFor(() => raw.closeCode !== undefined, "close frame");
      assert.equal(raw.closeCode, CloseCode.UnsupportedData);
    } finally {
      raw.tcp.close();
      server.listener.close();
    }
  });

  it("an inbound message over maxMessageSize closes with 1009, both ways", async () => {
    const server = await serve({ maxMessageSize: 1000 });
    const raw = await RawWebSocket.connect(server.listener.port);
    const b = await server.next();
    const pb = new Probe();
    try {
      b.start(pb);
      raw.send(2, new Uint8Array(1000));
      await pb.until(() => pb.bytes === 1000, "a message at the limit");
      raw.send(2, new Uint8Array(1001));
      await pb.until(() => pb.closes.length === 1, "server close");
      assert.match(String(pb.closes[0]?.message), /maxMessageSize/);
      await waitFor(() => raw.closeCode !== undefined, "close frame");
      assert.equal(raw.closeCode, CloseCode.MessageTooBig);
    } finally {
      raw.tcp.close();
      server.listener.close();
    }
    // The client side checks too, against a server that sends more than it said it accepts.
    const rude = await rudeServer(5000);
    const a = await connectWebSocket(`ws://127.0.0.1:${rude.port}/tunnel`, {
      maxMessageSize: 1000,
    });
    const pa = new Probe();
    try {
      a.start(pa);
      await pa.until(() => pa.closes.length === 1, "client close");
      assert.match(String(pa.closes[0]?.message), /maxMessageSize/);
      // Deno's global WebSocket could not send 1009 (WHATWG close() allows 1000, 3000-4999) and
      // sent 4009; our own client there (ws/client.ts) sends the real code, as Bun's does.
      assert.equal(await rude.closeCode, CloseCode.MessageTooBig);
    } finally {
      a.close();
      rude.close();
    }
  });

  it("our server keeps to the size of message the client said it accepts", async () => {
    const server = await serve();
    const a = await connectWebSocket(server.url, { maxMessageSize: 1000 });
    const b = await server.next();
    const pa = new Probe();
    const pb = new Probe();
    try {
      a.start(pa);
      b.start(pb);
      b.write(pattern(5000, 3));
      await pa.until(() => pa.bytes === 5000, "every byte, in messages of 1000");
      assert.ok(sameBytes(pa.received(), pattern(5000, 3)));
      assert.deepEqual([pa.closes, pb.closes], [[], []]);
    } finally {
      a.close();
      b.close();
      server.listener.close();
    }
  });

  it("a 1000 or 1001 close from the peer is a clean end", async () => {
    for (const code of [CloseCode.Normal, CloseCode.GoingAway]) {
      const server = await serve();
      const raw = await RawWebSocket.connect(server.listener.port);
      const b = await server.next();
      const pb = new Probe();
      try {
        b.start(pb);
        raw.send(2, new Uint8Array([1, 2, 3]));
        raw.sendClose(code);
        await pb.until(() => pb.closes.length === 1, "server close");
        assert.deepEqual(pb.log, ["end", "close"]);
        assert.deepEqual(pb.closes, [undefined]);
        assert.equal(pb.bytes, 3);
        await waitFor(() => raw.closeCode !== undefined, "close reply");
      } finally {
        raw.tcp.close();
        server.listener.close();
      }
    }
  });

  it("a client that vanishes without a close frame closes the server side with an error", async () => {
    const server = await serve();
    const raw = await RawWebSocket.connect(server.listener.port);
    const b = await server.next();
    const pb = new Probe();
    try {
      b.start(pb);
      raw.send(2, new Uint8Array(10));
      await pb.until(() => pb.bytes === 10, "data");
      raw.tcp.close();
      await pb.until(() => pb.closes.length === 1, "server close");
      assert.ok(pb.closes[0] instanceof Error, "an abrupt loss is an error");
    } finally {
      server.listener.close();
    }
  });

  it("a server-side close reaches the client as a clean end", async () => {
    const server = await serve();
    const a = await connectWebSocket(server.url);
    const b = await server.next();
    const pa = new Probe();
    const pb = new Probe();
    try {
      a.start(pa);
      b.start(pb);
      b.write(new TextEncoder().encode("bye"));
      b.end();
      await waitFor(() => pa.closes.length === 1 && pb.closes.length === 1, "both closed");
      assert.equal(new TextDecoder().decode(pa.received()), "bye");
      assert.deepEqual([...pa.log, ...pb.log], ["end", "close", "end", "close"]);
      assert.deepEqual([...pa.closes, ...pb.closes], [undefined, undefined]);
    } finally {
      a.close();
      server.listener.close();
    }
  });
});

describe("ws: HTTP side", () => {
  it("answers 404 off the path and 426 without an upgrade; a client gets a clear error", async () => {
    const server = await serve({ path: "/t" });
    try {
      const base = `http://127.0.0.1:${server.listener.port}`;
      const off = await fetch(`${base}/other`);
      assert.equal(off.status, 404);
      await off.body?.cancel();
      const plain = await fetch(`${base}/t`);
      assert.equal(plain.status, 426);
      await plain.body?.cancel();
      const error = await connectWebSocket(`ws://127.0.0.1:${server.listener.port}/other`).then(
        () => undefined,
        (e) => e,
      );
      assert.ok(error instanceof WebSocketConnectError);
      assert.equal(error.status, 404);
      assert.match(error.message, /refused with HTTP 404/);
    } finally {
      server.listener.close();
    }
  });

  it("authorize sees the Authorization header and peer address, and its Response refuses", async () => {
    const seen: { auth: string | null; remote: string }[] = [];
    const server = await serve({
      authorize(request, remote) {
        seen.push({ auth: request.headers.get("authorization"), remote });
        if (request.headers.get("authorization") === "Bearer good") return undefined;
        return Promise.resolve(
          new Response(JSON.stringify({ error: "unauthorized" }), {
            status: 401,
            headers: { "content-type": "application/json" },
          }),
        );
      },
    });
    try {
      const error = await connectWebSocket(server.url, {
        headers: { Authorization: "Bearer bad" },
      }).then(() => undefined, (e) => e);
      assert.ok(error instanceof WebSocketConnectError, String(error));
      assert.equal(error.status, 401);
      assert.match(error.message, /refused with HTTP 401/);
      const a = await connectWebSocket(server.url, { headers: { Authorization: "Bearer good" } });
      const b = await server.next();
      a.close();
      b.close();
      assert.deepEqual(seen.map((s) => s.auth), ["Bearer bad", "Bearer good"]);
      assert.match(seen[0].remote, /^127\.0\.0\.1:\d+$/);
      assert.equal(seen[1].remote, b.remoteAddress);
    } finally {
      server.listener.close();
    }
  });
});

describe("ws: yamux over WebSocket", () => {
  it("echoes 100 concurrent streams through a Session pair", async () => {
    const sessions: Session[] = [];
    const listener = await listenWebSocket(
      { hostname: "127.0.0.1", port: 0 },
      (t) => sessions.push(new Session(t, { client: false, onStream: echoStream })),
    );
    const client = new Session(
      await connectWebSocket(`ws://127.0.0.1:${listener.port}/tunnel`),
      { client: true },
    );
    try {
      const result = await checkEcho(client, {
        streams: 100,
        maxSize: 128 * KIB,
        concurrency: 100,
        seed: 42,
      });
      assert.equal(result.streams, 100);
      assert.equal(await client.close(), undefined);
      await waitFor(() => sessions.length === 1, "server session");
      assert.equal(await sessions[0].closed, undefined);
    } finally {
      client.destroy();
      for (const s of sessions) s.destroy();
      listener.close();
    }
  });
});

describe("ws: wss with a self-signed certificate", () => {
  let cert = "";
  let key = "";
  before(() => {
    if (hasOpenssl) ({ cert, key } = makeTestIdentity());
  });

  it("carries bytes over wss when the client trusts the certificate, and refuses otherwise", {
    skip: hasOpenssl ? false : "openssl is not installed",
  }, async () => {
    const server = await serve({ tls: { cert, key } });
    try {
      assert.ok(server.url.startsWith("wss://"));
      await assert.rejects(connectWebSocket(server.url), WebSocketConnectError);
      const a = await connectWebSocket(server.url, { caCerts: [cert] });
      const b = await server.next();
      const pa = new Probe();
      const pb = new Probe();
      try {
        echo(b, pb);
        a.start(pa);
        b.start(pb);
        const data = pattern(1 * MIB, 13);
        await writeAll(a, pa, data);
        await pa.until(() => pa.bytes === data.length, "echo");
        assert.ok(sameBytes(pa.received(), data));
        a.end();
        await pa.until(() => pa.closes.length === 1, "closed");
        assert.deepEqual(pa.closes, [undefined]);
      } finally {
        a.close();
        b.close();
      }
    } finally {
      server.listener.close();
    }
  });
});

describe("ws: message size", () => {
  it("our ends send each other messages of up to 256 KiB, no larger than the other wants", async () => {
    const server = await serve({ maxMessageSize: 100_000 });
    const a = await connectWebSocket(server.url);
    const b = await server.next();
    const pa = new Probe();
    const pb = new Probe();
    try {
      // The server wants what it accepts (100,000 bytes here).
      assert.equal(a.framableSize, 100_000, "what the server asked for");
      assert.equal(b.framableSize, 256 * KIB, "the client said it accepts 1 MiB");
      a.start(pa);
      b.start(pb);
      const up = pattern(2 * MIB, 1);
      const down = pattern(2 * MIB, 2);
      // Written in pieces larger than either message size: joined and split by the transports.
      await Promise.all([writeAll(a, pa, up, 300 * KIB), writeAll(b, pb, down, 300 * KIB)]);
      await pb.until(() => pb.bytes === up.length, "all bytes at the server");
      await pa.until(() => pa.bytes === down.length, "all bytes at the client");
      assert.ok(sameBytes(pb.received(), up));
      assert.ok(sameBytes(pa.received(), down));
      assert.deepEqual([pa.closes, pb.closes], [[], []], "no 1009");
    } finally {
      a.close();
      b.close();
      server.listener.close();
    }
  });
});
