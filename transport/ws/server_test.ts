/**
 * Hostile WebSocket clients, written by hand over TCP, against the WebSocket listener (our own
 * server on both runtimes): RFC 6455 violations get the close code the spec names, an oversized
 * frame is refused from its header, and no connection outlives its deadline (an unfinished
 * request head, a close the peer never answers).
 */

import { describe, it } from "node:test";
import assert from "node:assert/strict";
import type { Transport, TransportListener } from "../../protocol/transport.ts";
import { Probe } from "../_test_util.ts";
import { RawWebSocket } from "./_test_util.ts";
import { connectTcp } from "../mod.ts";
import { listenWebSocket, type WebSocketListenOptions } from "./mod.ts";
import { listenRawWebSocket } from "./server.ts";
import { waitFor } from "../../testing/wait.ts";

type Listen = (
  options: WebSocketListenOptions,
  onTransport: (transport: Transport) => void,
) => Promise<TransportListener>;

const servers: [string, Listen][] = [
  ["our own server (ws/server), as listenWebSocket picks it", listenWebSocket],
];

/** Waits (up to 15 s: the close deadline is 5 s) until the server ended or closed the TCP connection. */
function peerGone(raw: RawWebSocket, what: string): Promise<unknown> {
  return waitFor(
    () => raw.probe.closes.length > 0 || raw.probe.log.includes("end"),
    { timeoutMs: 15_000, message: what },
  );
}

/** A masked frame header with `opcode` declaring `length` bytes (zero mask key). */
function frameHeader(opcode: number, length: number, masked = true): Uint8Array {
  const head = new Uint8Array(2 + 8 + (masked ? 4 : 0));
  head[0] = 0x80 | opcode;
  head[1] = (masked ? 0x80 : 0) | 127;
  new DataView(head.buffer).setBigUint64(2, BigInt(length));
  return head;
}

for (const [label, listen] of servers) {
  describe(`WebSocket server vs hostile clients: ${label}`, () => {
    async function withClient(
      options: Partial<WebSocketListenOptions>,
      body: (raw: RawWebSocket, server: Transport, probe: Probe) => Promise<void>,
    ): Promise<void> {
      const accepted: Transport[] = [];
      const listener = await listen(
        { hostname: "127.0.0.1", port: 0, ...options },
        (t) => accepted.push(t),
      );
      const raw = await RawWebSocket.connect(listener.port);
      try {
        await waitFor(() => accepted.length > 0, "accept");
        const probe = new Probe();
        accepted[0].start(probe);
        await body(raw, accepted[0], probe);
      } finally {
        raw.tcp.close();
        for (const t of accepted) t.close();
        listener.close();
      }
    }

    it("fails an unmasked client frame with 1002 and closes the connection (§5.1)", async () => {
      await withClient({}, async (raw, _server, probe) => {
        raw.sendRaw(new Uint8Array([0x82, 0x03, 1, 2, 3])); // binary, unmasked
        await waitFor(() => raw.closeCode !== undefined, "close frame");
        assert.equal(raw.closeCode, 1002);
        await peerGone(raw, "TCP closed");
        assert.equal(probe.bytes, 0, "nothing of the unmasked frame was delivered");
      });
    });

    it("fails an unknown opcode with 1002", async () => {
      await withClient({}, async (raw, _server, probe) => {
        raw.sendRaw(new Uint8Array([0x83, 0x81, 0, 0, 0, 0, 7])); // opcode 3, masked
        await waitFor(() => raw.closeCode !== undefined, "close frame");
        assert.equal(raw.closeCode, 1002);
        await peerGone(raw, "TCP closed");
        assert.equal(probe.bytes, 0);
      });
    });

    it("refuses a frame declaring more than the message limit from its header alone (1009)", async () => {
      await withClient({ maxMessageSize: 64 * 1024 }, async (raw) => {
        raw.sendRaw(frameHeader(2, 2 ** 40)); // a terabyte announced, not one payload byte sent
        await waitFor(() => raw.closeCode !== undefined, "close frame");
        assert.equal(raw.closeCode, 1009);
        await peerGone(raw, "TCP closed");
      });
    });

    // Waits out the close deadline (5 s): more than `bun test`'s default per-test timeout.
    it("destroys a connection whose peer never answers our close frame", {
      timeout: 20_000,
    }, async () => {
      await withClient({}, async (raw, server, probe) => {
        server.close();
        await waitFor(() => raw.closeCode !== undefined, "our close frame");
        // The raw client does not answer and keeps its socket open: the server must cut it.
        await peerGone(raw, "TCP closed by the server");
        await probe.until(() => probe.closes.length === 1, "server transport closed");
      });
    });
  });
}

describe("our own WebSocket server: the request head", () => {
  async function exchange(
    requestTimeoutMs: number,
    send: Uint8Array,
  ): Promise<{ text: string; closed: boolean }> {
    const listener = await listenRawWebSocket(
      { hostname: "127.0.0.1", port: 0, requestTimeoutMs },
      (t) => t.close(),
    );
    const tcp = await connectTcp({ hostname: "127.0.0.1", port: listener.port });
    const probe = new Probe();
    let text = "";
    probe.onData = (chunk) => text += new TextDecoder().decode(chunk);
    tcp.start(probe);
    try {
      if (send.length > 0) tcp.write(send);
      await probe.until(() => probe.closes.length === 1 || probe.log.includes("end"), "closed");
      return { text, closed: true };
    } finally {
      tcp.close();
      listener.close();
    }
  }

  it("answers 408 and closes a connection whose request head never completes (slowloris)", async () => {
    const partial = new TextEncoder().encode("GET /tunnel HTTP/1.1\r\nHost: x\r\nX-Slow: ");
    const { text } = await exchange(200, partial);
    assert.match(text, /^HTTP\/1\.1 408 /);
  });

  it("closes a connection that sends nothing at all", async () => {
    const { text } = await exchange(200, new Uint8Array(0));
    assert.match(text, /^HTTP\/1\.1 408 /);
  });

  it("answers 431 to a head above 16 KiB without waiting for its end", async () => {
    const huge = new TextEncoder().encode(`GET /tunnel HTTP/1.1\r\nX: ${"a".repeat(20_000)}`);
    const { text } = await exchange(10_000, huge);
    assert.match(text, /^HTTP\/1\.1 431 /);
  });

  it("answers 400 at once to bytes that cannot start a request (a yamux client on this port)", async () => {
    // A yamux window update opening stream 1 and no head end: without the early check this waits
    // for the 10 s request deadline.
    const yamux = new Uint8Array([0, 1, 0, 1, 0, 0, 0, 1, 0, 0, 0, 0]);
    const { text } = await exchange(60_000, yamux);
    assert.match(text, /^HTTP\/1\.1 400 /);
    assert.match(text, /not an HTTP request/);
  });

  const bad: [string, string, RegExp][] = [
    ["not HTTP", "HELLO\r\n\r\n", /^HTTP\/1\.1 400 /],
    ["obs-fold", "GET /tunnel HTTP/1.1\r\nHost: x\r\n folded\r\n\r\n", /^HTTP\/1\.1 400 /],
    ["space before colon", "GET /tunnel HTTP/1.1\r\nHost : x\r\n\r\n", /^HTTP\/1\.1 400 /],
    ["another path", "GET /other HTTP/1.1\r\nHost: x\r\n\r\n", /^HTTP\/1\.1 404 /],
    ["no upgrade", "GET /tunnel HTTP/1.1\r\nHost: x\r\n\r\n", /^HTTP\/1\.1 426 /],
    [
      "a wrong version",
      "GET /tunnel HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" +
      "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 8\r\n\r\n",
      /^HTTP\/1\.1 426 /,
    ],
    [
      "a malformed key",
      "GET /tunnel HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" +
      "Sec-WebSocket-Key: short\r\nSec-WebSocket-Version: 13\r\n\r\n",
      /^HTTP\/1\.1 400 /,
    ],
  ];
  for (const [what, request, status] of bad) {
    it(`refuses ${what} with an HTTP error and closes`, async () => {
      const { text } = await exchange(10_000, new TextEncoder().encode(request));
      assert.match(text, status);
      assert.match(text, /connection: close/i);
    });
  }
});
