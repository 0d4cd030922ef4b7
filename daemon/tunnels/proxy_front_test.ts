import { describe, it } from "node:test";
import assert from "node:assert/strict";
import type { Socket } from "node:net";
import { listenTcp } from "../../transport/mod.ts";
import type { Transport } from "../../protocol/transport.ts";
import { encodeProxyV1, encodeProxyV2 } from "../../tunnel/proxy_protocol/proxy_protocol.ts";
import { AddressRules } from "../../tunnel/policy/visitor_policy.ts";
import { tcpConnect } from "../../testing/visitors.ts";
import { DEFAULT_TIMEOUT_MS, withTimeout } from "../../testing/wait.ts";
import { fromTrustedFront, MAX_PROXY_HEADER, readProxyHeader } from "./proxy_front.ts";

const text = (s: string) => new TextEncoder().encode(s);

/** A listener on 127.0.0.1 whose accepted transports `accepted` hands out in order. */
async function server() {
  const waiting: ((t: Transport) => void)[] = [];
  const early: Transport[] = [];
  const listener = await listenTcp({ hostname: "127.0.0.1", port: 0 }, (t) => {
    const next = waiting.shift();
    if (next) next(t);
    else early.push(t);
  });
  return {
    port: listener.port,
    accepted: () =>
      early.length > 0
        ? Promise.resolve(early.shift()!)
        : new Promise<Transport>((resolve) => waiting.push(resolve)),
    close: () => listener.close(),
  };
}

/** Everything `visitor` delivers until it ends. */
function readAll(visitor: Transport): Promise<string> {
  return withTimeout(
    new Promise<string>((resolve) => {
      let got = "";
      visitor.start({
        data: (chunk) => got += new TextDecoder().decode(chunk),
        drain: () => {},
        end: () => resolve(got),
        close: () => resolve(got),
      });
    }),
    DEFAULT_TIMEOUT_MS,
    "the visitor's bytes",
  );
}

/** Writes `chunks` from a socket bound to `from`, one write each, then ends. */
async function front(port: number, from: string, chunks: Uint8Array[]): Promise<Socket> {
  const socket = await tcpConnect(port, "127.0.0.1", from);
  for (const chunk of chunks) {
    socket.write(chunk);
    await new Promise((r) => setTimeout(r, 5)); // separate segments, most likely
  }
  socket.end();
  return socket;
}

describe("proxy_front: a trusted front's PROXY header", () => {
  it("trusts only the listed fronts", async () => {
    const s = await server();
    try {
      const trusted = new AddressRules({ allow: ["127.0.0.8/32"] });
      await tcpConnect(s.port, "127.0.0.1", "127.0.0.8");
      assert.ok(fromTrustedFront(await s.accepted(), trusted));
      await tcpConnect(s.port, "127.0.0.1", "127.0.0.9");
      const other = await s.accepted();
      assert.ok(!fromTrustedFront(other, trusted));
      assert.ok(!fromTrustedFront(other, undefined));
    } finally {
      await s.close();
    }
  });

  it("takes the header off, split or whole, v1 or v2, and hands on the bytes after it", async () => {
    const s = await server();
    try {
      const v1 = encodeProxyV1("192.0.2.7:4000", "198.51.100.1:80");
      await front(s.port, "127.0.0.8", [v1.subarray(0, 9), v1.subarray(9), text("hello")]);
      const read = await readProxyHeader(await s.accepted(), DEFAULT_TIMEOUT_MS);
      assert.ok(read.ok);
      assert.equal(read.visitor.remoteAddress, "192.0.2.7:4000");
      assert.equal(read.visitor.localAddress, "198.51.100.1:80");
      assert.equal(await readAll(read.visitor), "hello");

      const v2 = encodeProxyV2("[2001:db8::7]:4000", "[2001:db8::1]:443");
      const joined = new Uint8Array([...v2, ...text("after")]);
      await front(s.port, "127.0.0.8", [joined]);
      const second = await readProxyHeader(await s.accepted(), DEFAULT_TIMEOUT_MS);
      assert.ok(second.ok);
      assert.equal(second.visitor.remoteAddress, "[2001:db8::7]:4000");
      assert.equal(await readAll(second.visitor), "after");
    } finally {
      await s.close();
    }
  });

  it("closes a front's connection whose header is malformed, endless, missing or late", async () => {
    const s = await server();
    try {
      await front(s.port, "127.0.0.8", [text("GET / HTTP/1.1\r\n\r\n")]);
      const bad = await readProxyHeader(await s.accepted(), DEFAULT_TIMEOUT_MS);
      assert.ok(!bad.ok && /not a PROXY protocol header/.test(bad.reason));

      const endless = new Uint8Array([
        ...encodeProxyV2("192.0.2.7:1", "192.0.2.8:2").subarray(0, 12),
      ]);
      const long = new Uint8Array(16 + MAX_PROXY_HEADER);
      long.set(endless);
      long.set([0x21, 0x11, 0xff, 0xff], 12); // PROXY TCP4, a length of 65535
      await front(s.port, "127.0.0.8", [long]);
      const tooLong = await readProxyHeader(await s.accepted(), DEFAULT_TIMEOUT_MS);
      assert.ok(!tooLong.ok && /too long/.test(tooLong.reason), JSON.stringify(tooLong));

      await front(s.port, "127.0.0.8", []);
      const missing = await readProxyHeader(await s.accepted(), DEFAULT_TIMEOUT_MS);
      assert.ok(!missing.ok && /closed before/.test(missing.reason));

      const silent = await tcpConnect(s.port, "127.0.0.1", "127.0.0.8");
      const late = await readProxyHeader(await s.accepted(), 50);
      assert.ok(!late.ok && /in time/.test(late.reason));
      silent.destroy();
    } finally {
      await s.close();
    }
  });
});
