// Our own WebSocket client (ws/client.ts), called directly so it is tested on both runtimes
// (connectWebSocket uses it on Deno only): against the real servers of listenWebSocket, and
// against a scripted server on plain TCP for the handshake checks and the frames a real server
// would not send (masked, oversized, fragmented, pings).
// Runs under `deno test -A` and `bun test --timeout 60000`.

import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { Session, type Stream } from "../../protocol/mod.ts";
import type { Transport } from "../../protocol/transport.ts";
import { hasOpenssl, makeTestIdentity } from "../_test_certificate.ts";
import { echo, pattern, Probe, sameBytes, writeAll } from "../_test_util.ts";
import { concat } from "../../util/bytes/bytes.ts";
import { acceptFor } from "./handshake.ts";
import { headEnd } from "../http/head.ts";
import { listenTcp } from "../mod.ts";
import { CloseCode, listenWebSocket, WebSocketCloseError, WebSocketConnectError } from "./mod.ts";
import { connectRawWebSocket } from "./client.ts";
import { encodeClosePayload, encodeFrame, MessageDecoder, Opcode } from "./frame.ts";
import { waitFor, withTimeout } from "../../testing/wait.ts";

/** The server end of one scripted connection. */
interface Scripted {
  /** The server's TCP transport. */
  tcp: Transport;
  /** Its events after the request head. */
  probe: Probe;
  /** The upgrade request head, as text. */
  request: string;
  /** Frames the client sent, unmasked. */
  frames: { opcode: number; payload: Uint8Array }[];
}

/**
 * A TCP server that reads one upgrade request and answers with `respond(acceptValue)` (the bytes
 * of a response head, maybe followed by frames), then records the client's frames.
 */
async function scriptedServer(
  respond: (accept: string) => string | Uint8Array,
): Promise<{ url: string; next(): Promise<Scripted>; close(): void }> {
  const ready: Scripted[] = [];
  const listener = await listenTcp({ hostname: "127.0.0.1", port: 0 }, (tcp) => {
    const probe = new Probe();
    let pending: Uint8Array = new Uint8Array(0);
    let scripted: Scripted | undefined;
    const decoder = new MessageDecoder({ masked: true, maxMessageSize: 1 << 20 });
    probe.onData = (chunk) => {
      if (scripted) {
        decoder.push(chunk, (opcode, payload) => scripted!.frames.push({ opcode, payload }));
        return;
      }
      pending = concat([pending, chunk]);
      const end = headEnd(pending);
      if (end < 0) return;
      const request = new TextDecoder().decode(pending.subarray(0, end));
      const key = /sec-websocket-key: *(\S+)/i.exec(request)?.[1] ?? "";
      const answer = respond(acceptFor(key));
      tcp.write(typeof answer === "string" ? new TextEncoder().encode(answer) : answer);
      scripted = { tcp, probe, request, frames: [] };
      ready.push(scripted);
    };
    tcp.start(probe);
  });
  return {
    url: `ws://127.0.0.1:${listener.port}/tunnel`,
    async next() {
      await waitFor(() => ready.length > 0, "scripted connection");
      return ready.shift()!;
    },
    close: () => listener.close(),
  };
}

/** A valid 101 response head for `accept`. */
function switching(accept: string): string {
  return "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" +
    `Sec-WebSocket-Accept: ${accept}\r\n\r\n`;
}

/** Reads a close frame's code. */
function closeCode(payload: Uint8Array): number {
  return (payload[0] << 8) | payload[1];
}

describe("ws/client: against the real servers", () => {
  it("completes 200 sequential 64-byte request/response round trips over a yamux Session", async () => {
    // The pattern that stalled on Deno's global WebSocket (Nagle: ~44 ms per exchange, measured by
    // hand, not here): the server opens each stream, like a visitor of a reverse tunnel, and the
    // client answers a moment later, like a tunnel client after dialing its local service, so
    // the client's stream ACK and its answer are two small writes in a row.
    const sessions: Session[] = [];
    const listener = await listenWebSocket(
      { hostname: "127.0.0.1", port: 0 },
      (t) => sessions.push(new Session(t, { client: false })),
    );
    const client = new Session(
      await connectRawWebSocket(`ws://127.0.0.1:${listener.port}/tunnel`),
      {
        client: true,
        onStream(stream) {
          stream.onData = (chunk) => setTimeout(() => stream.write(chunk), 0);
          stream.onEnd = () => setTimeout(() => stream.end(), 0);
        },
      },
    );
    try {
      await waitFor(() => sessions.length === 1, "server session");
      const server = sessions[0];
      for (let i = 0; i < 200; i++) {
        const request = pattern(64, i);
        const stream: Stream = server.open();
        const received: Uint8Array[] = [];
        const done = new Promise<void>((resolve, reject) => {
          stream.onData = (chunk) => received.push(chunk.slice());
          stream.onEnd = () => resolve();
          stream.onClose = (error) => error && reject(error);
        });
        stream.write(request);
        stream.end();
        await done;
        assert.ok(sameBytes(concat(received), request), `round trip ${i}`);
      }
      assert.equal(await client.close(), undefined);
    } finally {
      client.destroy();
      for (const s of sessions) s.destroy();
      listener.close();
    }
  });

  it("carries bytes over wss with caCerts, and refuses an untrusted certificate", {
    skip: hasOpenssl ? false : "openssl is not installed",
  }, async () => {
    const { cert, key } = makeTestIdentity();
    const accepted: Transport[] = [];
    const listener = await listenWebSocket(
      { hostname: "127.0.0.1", port: 0, tls: { cert, key } },
      (t) => accepted.push(t),
    );
    const url = `wss://127.0.0.1:${listener.port}/tunnel`;
    try {
      await assert.rejects(connectRawWebSocket(url), WebSocketConnectError);
      const a = await connectRawWebSocket(url, { caCerts: [cert] });
      await waitFor(() => accepted.length === 1, "accept");
      const b = accepted[0];
      const pa = new Probe();
      const pb = new Probe();
      try {
        echo(b, pb);
        a.start(pa);
        b.start(pb);
        const data = pattern(512 * 1024, 3);
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
      listener.close();
    }
  });
});

describe("ws/client: handshake", () => {
  it("sends a well-formed upgrade request with the extra headers", async () => {
    const server = await scriptedServer(switching);
    try {
      const a = await connectRawWebSocket(`${server.url}?x=1`, {
        headers: { Authorization: "Bearer t" },
      });
      const { request } = await server.next();
      const lines = request.split("\r\n");
      assert.equal(lines[0], "GET /tunnel?x=1 HTTP/1.1");
      assert.ok(lines.includes(`Host: ${new URL(server.url).host}`));
      assert.ok(lines.includes("Upgrade: websocket"));
      assert.ok(lines.includes("Connection: Upgrade"));
      assert.ok(lines.includes("Sec-WebSocket-Version: 13"));
      assert.ok(lines.includes("Authorization: Bearer t"));
      const key = /^Sec-WebSocket-Key: (.*)$/m.exec(request)?.[1] ?? "";
      assert.equal(atob(key).length, 16);
      a.close();
    } finally {
      server.close();
    }
  });

  it("rejects a non-101 answer with its status, a wrong accept key, and an endless head", async () => {
    const cases: [(accept: string) => string, RegExp, number | undefined][] = [
      [() => "HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n", /refused with HTTP 403/, 403],
      [(a) => switching(a).replace(a, "AAAA"), /Sec-WebSocket-Accept/, undefined],
      [() => "HTTP/1.1 101 OK\r\n" + "X-Pad: y\r\n".repeat(3000), /too large/, undefined],
      [(a) => switching(a).replace("Upgrade: websocket\r\n", ""), /Upgrade/, undefined],
    ];
    for (const [respond, message, status] of cases) {
      const server = await scriptedServer(respond);
      try {
        const error = await connectRawWebSocket(server.url).then(() => undefined, (e) => e);
        assert.ok(error instanceof WebSocketConnectError, String(error));
        assert.match(error.message, message);
        assert.equal(error.status, status);
      } finally {
        server.close();
      }
    }
  });

  it("rejects at once an answer that is not HTTP (a yamux port), with its first bytes", async () => {
    const yamuxFrame = new Uint8Array([0, 2, 0, 1, 0, 0, 0, 0, 0, 0, 0, 1]);
    const server = await scriptedServer(() => yamuxFrame); // and keeps the connection open
    try {
      const error = await withTimeout(
        connectRawWebSocket(server.url).then(() => undefined, (e) => e),
        20_000,
        "the rejection",
      );
      assert.ok(error instanceof WebSocketConnectError, String(error));
      assert.match(error.message, /a protocol other than HTTP/);
      assert.deepEqual(error.answer, yamuxFrame);
      assert.equal(error.status, undefined);
    } finally {
      server.close();
    }
  });

  it("refuses headers that could inject lines or break the handshake, before dialing", async () => {
    const bad: Record<string, string>[] = [
      { "X-A": "a\r\nX-B: b" },
      { "Bad Name": "x" },
      { Upgrade: "h2c" },
    ];
    for (const headers of bad) {
      await assert.rejects(connectRawWebSocket("ws://127.0.0.1:9/t", { headers }), TypeError);
    }
    await assert.rejects(connectRawWebSocket("http://127.0.0.1:9/t"), TypeError);
  });

  it("reports a refused connection as a WebSocketConnectError", async () => {
    const server = await scriptedServer(switching);
    const url = server.url;
    server.close();
    await assert.rejects(connectRawWebSocket(url), WebSocketConnectError);
  });
});

describe("ws/client: frames", () => {
  it("delivers frames sent with the 101, reassembles fragments, answers pings, masks its frames", async () => {
    const early = encodeFrame(Opcode.Binary, pattern(10, 1));
    const server = await scriptedServer((accept) =>
      concat([new TextEncoder().encode(switching(accept)), early])
    );
    try {
      const a = await connectRawWebSocket(server.url);
      const s = await server.next();
      const pa = new Probe();
      a.start(pa);
      await pa.until(() => pa.bytes === 10, "the early frame");
      const whole = pattern(70000, 2);
      s.tcp.write(concat([
        encodeFrame(Opcode.Binary, whole.subarray(0, 100), undefined, false),
        encodeFrame(Opcode.Ping, pattern(5, 3)),
        encodeFrame(Opcode.Continuation, whole.subarray(100, 66000), undefined, false),
        encodeFrame(Opcode.Continuation, whole.subarray(66000)),
      ]));
      await pa.until(() => pa.bytes === 70010, "the fragmented message");
      assert.equal(pa.chunks.length, 2, "one chunk per message");
      assert.ok(sameBytes(pa.chunks[1], whole));
      await waitFor(() => s.frames.length === 1, "pong");
      assert.equal(s.frames[0].opcode, Opcode.Pong);
      assert.ok(sameBytes(s.frames[0].payload, pattern(5, 3)));
      // Our data goes out masked (the server-side decoder insists) and intact.
      a.write(pattern(300, 4));
      await waitFor(() => s.frames.length === 2, "data frame");
      assert.ok(sameBytes(s.frames[1].payload, pattern(300, 4)));
      a.close();
    } finally {
      server.close();
    }
  });

  it("closes with 1002 on a masked server frame and 1009 on an oversized header", async () => {
    const cases: [Uint8Array, number, RegExp][] = [
      [encodeFrame(Opcode.Binary, new Uint8Array(4), Uint8Array.of(1, 2, 3, 4)), 1002, /masked/],
      // Only the header of a 70000-byte frame: refused before any payload is sent.
      [encodeFrame(Opcode.Binary, new Uint8Array(70000)).subarray(0, 10), 1009, /maxMessageSize/],
    ];
    for (const [bytes, code, message] of cases) {
      const server = await scriptedServer(switching);
      try {
        const a = await connectRawWebSocket(server.url, { maxMessageSize: 65536 });
        const s = await server.next();
        const pa = new Probe();
        a.start(pa);
        s.tcp.write(bytes);
        await pa.until(() => pa.closes.length === 1, "client close");
        const error = pa.closes[0];
        assert.ok(error instanceof WebSocketCloseError, String(error));
        assert.equal(error.code, code);
        assert.match(error.message, message);
        await waitFor(() => s.frames.length === 1, "close frame");
        assert.equal(s.frames[0].opcode, Opcode.Close);
        assert.equal(closeCode(s.frames[0].payload), code);
        // Then the client half-closes its TCP side.
        await s.probe.until(() => s.probe.ends === 1, "TCP end");
        s.tcp.close();
      } finally {
        server.close();
      }
    }
  });

  it("answers the server's close with the same code, ends cleanly, and half-closes TCP", async () => {
    const server = await scriptedServer(switching);
    try {
      const a = await connectRawWebSocket(server.url);
      const s = await server.next();
      const pa = new Probe();
      a.start(pa);
      s.tcp.write(concat([
        encodeFrame(Opcode.Binary, pattern(3, 1)),
        encodeFrame(Opcode.Close, encodeClosePayload(CloseCode.GoingAway, "bye")),
      ]));
      await s.probe.until(() => s.probe.ends === 1, "TCP end");
      assert.equal(s.frames.length, 1);
      assert.equal(closeCode(s.frames[0].payload), CloseCode.GoingAway);
      s.tcp.close();
      await pa.until(() => pa.closes.length === 1, "client close");
      assert.deepEqual(pa.log, ["end", "close"]);
      assert.deepEqual(pa.closes, [undefined]);
      assert.equal(pa.bytes, 3);
    } finally {
      server.close();
    }
  });

  it("reports a lost connection (no close frame) as an error", async () => {
    const server = await scriptedServer(switching);
    try {
      const a = await connectRawWebSocket(server.url);
      const s = await server.next();
      const pa = new Probe();
      a.start(pa);
      s.tcp.close();
      await pa.until(() => pa.closes.length === 1, "client close");
      assert.ok(pa.closes[0] instanceof WebSocketCloseError);
      assert.equal((pa.closes[0] as WebSocketCloseError).code, CloseCode.Abnormal);
    } finally {
      server.close();
    }
  });
});
