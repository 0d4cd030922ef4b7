/**
 * ClientHello parsing on real hellos from this runtime's TLS client (node:tls), split anywhere,
 * spread over two records, and on what is not a hello.
 */

import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { createServer, type Socket } from "node:net";
import { connect as tlsConnect } from "node:tls";
import { ClientHelloError, parseClientHello } from "./client_hello.ts";

/** The first bytes a TLS client sends, with `servername` and `alpn`, captured by a TCP server. */
async function capture(servername: string | undefined, alpn: string[]): Promise<Uint8Array> {
  const chunks: Uint8Array[] = [];
  let client: ReturnType<typeof tlsConnect> | undefined;
  const got = new Promise<void>((resolve) => {
    const server = createServer((socket: Socket) => {
      socket.on("data", (chunk: Uint8Array) => {
        chunks.push(new Uint8Array(chunk));
        const all = concat(chunks);
        try {
          if (parseClientHello(all)) {
            socket.destroy();
            server.close();
            resolve();
          }
        } catch {
          socket.destroy();
          server.close();
          resolve();
        }
      });
    });
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address() as { port: number };
      client = tlsConnect({
        host: "127.0.0.1",
        port,
        ...(servername ? { servername } : {}),
        ALPNProtocols: alpn,
        rejectUnauthorized: false,
      });
      client.on("error", () => {});
    });
  });
  await got;
  client?.destroy();
  return concat(chunks);
}

function concat(parts: Uint8Array[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const part of parts) {
    out.set(part, at);
    at += part.length;
  }
  return out;
}

describe("tls/client_hello", () => {
  it("reads the server name (lower-cased) and ALPN of a real ClientHello", async () => {
    const hello = await capture("App.Example.com", ["h2", "http/1.1"]);
    const info = parseClientHello(hello);
    assert.equal(info?.serverName, "app.example.com");
    assert.deepEqual(info?.alpn, ["h2", "http/1.1"]);
    assert.ok(info!.length <= hello.length);
  });

  it("has no server name when the client sends none (an IP address)", async () => {
    const info = parseClientHello(await capture(undefined, []));
    assert.equal(info?.serverName, undefined);
    assert.deepEqual(info?.alpn, []);
  });

  it("waits for more bytes at every cut, and reads a hello spread over two records", async () => {
    const hello = await capture("a.example.com", ["acme-tls/1"]);
    const { length } = parseClientHello(hello)!;
    for (let cut = 0; cut < length; cut++) {
      assert.equal(parseClientHello(hello.subarray(0, cut)), undefined, `cut at ${cut}`);
    }
    // The same handshake bytes in two records: split the one record's body at 40 bytes.
    const body = hello.subarray(5, length);
    const record = (part: Uint8Array) =>
      concat([new Uint8Array([22, 3, 1, part.length >> 8, part.length & 0xff]), part]);
    const two = concat([record(body.subarray(0, 40)), record(body.subarray(40))]);
    const info = parseClientHello(two);
    assert.equal(info?.serverName, "a.example.com");
    assert.deepEqual(info?.alpn, ["acme-tls/1"]);
    assert.equal(info?.length, two.length);
  });

  it("refuses what is not a ClientHello", async () => {
    const bytes = (text: string) => new TextEncoder().encode(text);
    assert.throws(() => parseClientHello(bytes("GET / HTTP/1.1\r\n\r\n")), ClientHelloError);
    // A handshake record holding another message (ServerHello = 2).
    assert.throws(
      () => parseClientHello(new Uint8Array([22, 3, 3, 0, 4, 2, 0, 0, 0])),
      ClientHelloError,
    );
    // A record longer than TLS allows.
    assert.throws(() => parseClientHello(new Uint8Array([22, 3, 1, 0x48, 0x01])), ClientHelloError);
    // A truncated body inside a complete record.
    const hello = await capture("b.example.com", []);
    const { length } = parseClientHello(hello)!;
    const broken = hello.slice(0, length);
    broken[3] = 0;
    broken[4] = 60; // the record now ends inside the hello's fields
    broken[6] = 0;
    broken[7] = 0;
    broken[8] = 56; // and the hello says it is 56 bytes long
    assert.throws(() => parseClientHello(broken.subarray(0, 65)), ClientHelloError);
  });
});
