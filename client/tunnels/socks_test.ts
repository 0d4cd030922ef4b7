// The SOCKS5 front against a daemon in this process, with real sockets: the `socks` npm client and
// raw bytes (UDP ASSOCIATE: socks_udp_test.ts). The daemon's name lookup is replaced, so the names it is asked for are seen, and no
// test depends on the machine's DNS. The CLI with curl is in e2e/socks_test.ts.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import type { Socket } from "node:net";
import { SocksClient } from "socks";
import { connect, type SocksServer } from "../client.ts";
import { connectHa } from "../ha_client.ts";
import type { Client } from "../client.ts";
import type { ClientError } from "../errors.ts";
import { Daemon } from "../../daemon/daemon.ts";
import { validateConfig } from "../../daemon/config/mod.ts";
import type { LookupFn } from "../../daemon/policy/resolve.ts";
import { Logger } from "../../util/log.ts";
import { SocksReply, socksReply } from "./socks_parser.ts";
import { socksOptionsProblem, socksReplyForReset } from "./socks.ts";
import { ResetReason } from "../../tunnel/stream/reset_reasons.ts";
import {
  closedPort,
  concat,
  pattern,
  startEchoServer,
  tcpConnect,
  type TestServer,
  waitFor,
  withTimeout,
} from "../../testing/mod.ts";

const TOKEN = "socks-test-token-0123456789abcdef";
const port = (n: number) => [n >> 8, n & 0xff];
const text = (s: string) => new TextEncoder().encode(s);
const connectV4 = (p: number) => [5, 1, 0, 1, 127, 0, 0, 1, ...port(p)];
const connectName = (
  name: string,
  p: number,
) => [5, 1, 0, 3, name.length, ...text(name), ...port(p)];

/** Sends `chunks` (one write each, a turn apart), then reads until `want` bytes or the end. */
async function exchange(
  socksPort: number,
  chunks: number[][],
  want: number,
): Promise<{ bytes: number[]; ended: boolean; socket: Socket }> {
  const socket = await tcpConnect(socksPort);
  socket.setNoDelay(true);
  const received: Uint8Array[] = [];
  let length = 0;
  let ended = false;
  const done = new Promise<void>((resolve) => {
    socket.on("data", (chunk: Uint8Array) => {
      received.push(chunk);
      length += chunk.length;
      if (length >= want) resolve();
    });
    socket.on("end", () => (ended = true, resolve()));
    socket.on("close", () => resolve());
  });
  for (const chunk of chunks) {
    socket.write(Uint8Array.from(chunk));
    await new Promise((resolve) => setImmediate(resolve));
  }
  await withTimeout(done, 15_000, `${want} bytes from the SOCKS front`);
  return { bytes: [...concat(received)], ended, socket };
}

/** Resolves once the peer ended (or reset) the connection. */
function ended(socket: Socket): Promise<void> {
  if (socket.readableEnded || socket.destroyed) return Promise.resolve();
  return new Promise((resolve) => {
    socket.once("end", resolve);
    socket.once("close", resolve);
  });
}

describe("SOCKS5 front (daemon in process)", () => {
  let echo: TestServer;
  let refusing: number;
  let daemon: Daemon;
  let client: Client;
  let socks: SocksServer;
  const asked: string[] = [];
  const errors: ClientError[] = [];
  // Names: loop.test is loopback (never allowed through a name rule); the rest do not resolve.
  const lookup: LookupFn = (host) => {
    asked.push(host);
    if (host === "loop.test") return Promise.resolve([{ address: "127.0.0.1", family: 4 }]);
    return Promise.reject(Object.assign(new Error("not found"), { code: "ENOTFOUND" }));
  };

  before(async () => {
    echo = await startEchoServer();
    refusing = await closedPort();
    const result = validateConfig({
      listen: { tcp: "127.0.0.1:0", websocket: null, admin: null },
      clients: [{
        name: "alice",
        token: TOKEN,
        forward: [`127.0.0.1:${echo.port}`, `127.0.0.1:${refusing}`, "*.test:*"],
      }],
    });
    assert.deepEqual(result.errors, []);
    daemon = new Daemon(result.config!, {
      log: new Logger({ level: "error", format: "json", sink: () => {} }),
      lookup,
    });
    await daemon.start();
    client = await connect(`tcp://${daemon.addresses.tcp}`, { token: TOKEN });
    client.on("error", (error) => errors.push(error));
    socks = await client.socks({ listen: "127.0.0.1:0" });
  });
  after(async () => {
    await socks.close();
    await client.close();
    await daemon.stop();
    await echo.close();
  });

  it("carries a CONNECT from the socks client, bytes verified both ways on a bulk transfer", async () => {
    const { socket } = await SocksClient.createConnection({
      proxy: { host: "127.0.0.1", port: Number(socks.address.split(":")[1]), type: 5 },
      command: "connect",
      destination: { host: "127.0.0.1", port: echo.port },
      timeout: 15_000,
    });
    const sent = pattern(3 * 1024 * 1024 + 17, 5);
    const chunks: Uint8Array[] = [];
    let length = 0;
    const back = new Promise<void>((resolve, reject) => {
      socket.on("data", (chunk: Uint8Array) => {
        chunks.push(chunk);
        length += chunk.length;
      });
      socket.on("end", resolve);
      socket.on("error", reject);
    });
    socket.end(sent);
    await withTimeout(back, 60_000, "the echo of the bulk transfer");
    assert.equal(length, sent.length);
    assert.ok(Buffer.from(concat(chunks)).equals(Buffer.from(sent)), "the bytes came back intact");
    socket.destroy();
    await waitFor(() => socks.stats.active === 0, "the connection to be gone");
    assert.ok(socks.stats.aToB >= sent.length && socks.stats.bToA >= sent.length);
  });

  it("keeps the first payload bytes that came in the same chunk as greeting and request", async () => {
    const got = await exchange(
      Number(socks.address.split(":")[1]),
      [[5, 1, 0, ...connectV4(echo.port), ...text("early bytes")]],
      2 + 10 + 11,
    );
    assert.deepEqual(got.bytes.slice(0, 2), [5, 0]);
    assert.deepEqual(got.bytes.slice(2, 12), [...socksReply(SocksReply.Succeeded)]);
    assert.deepEqual(got.bytes.slice(12), [...text("early bytes")]);
    got.socket.destroy();
  });

  it("takes a handshake split into single bytes", async () => {
    const bytes = [5, 1, 0, ...connectV4(echo.port), ...text("hi")];
    const got = await exchange(Number(socks.address.split(":")[1]), bytes.map((b) => [b]), 14);
    assert.deepEqual(got.bytes, [5, 0, ...socksReply(SocksReply.Succeeded), ...text("hi")]);
    got.socket.destroy();
  });

  const refusals: [string, () => number[], number, RegExp][] = [
    [
      "a target not on the allowlist: 0x02",
      () => connectV4(echo.port + 1),
      SocksReply.NotAllowed,
      /NotAllowed/,
    ],
    [
      "a name the daemon cannot resolve: 0x04, the name resolved there and not here",
      () => connectName("nowhere.test", 80),
      SocksReply.HostUnreachable,
      /ResolveFailed/,
    ],
    [
      "a name that resolves to loopback: 0x02 (name rules never reach loopback)",
      () => connectName("loop.test", echo.port),
      SocksReply.NotAllowed,
      /LoopbackDenied/,
    ],
    [
      "an allowed target that refuses: 0x05",
      () => connectV4(refusing),
      SocksReply.ConnectionRefused,
      /DialRefused/,
    ],
    [
      "BIND: 0x07",
      () => [5, 2, 0, 1, 127, 0, 0, 1, 0, 80],
      SocksReply.CommandNotSupported,
      /^$/,
    ],
  ];
  for (const [name, request, code, error] of refusals) {
    it(`refuses ${name}`, async () => {
      const before = errors.length;
      const got = await exchange(Number(socks.address.split(":")[1]), [[5, 1, 0], request()], 12);
      assert.deepEqual(got.bytes, [5, 0, ...socksReply(code)]);
      await withTimeout(ended(got.socket), 15_000, "the SOCKS front to end the refused connection");
      got.socket.destroy();
      if (error.source !== "^$") {
        assert.match(errors.slice(before).map((e) => e.message).join("\n"), error);
      }
    });
  }

  it("sends names to the daemon unresolved", () => {
    assert.ok(asked.includes("nowhere.test"), `the daemon was asked for ${asked.join(", ")}`);
  });

  it("refuses SOCKS4 in SOCKS4's words", async () => {
    await assert.rejects(
      SocksClient.createConnection({
        proxy: { host: "127.0.0.1", port: Number(socks.address.split(":")[1]), type: 4 },
        command: "connect",
        destination: { host: "127.0.0.1", port: echo.port },
        timeout: 15_000,
      }),
      /Socks4 Proxy rejected connection - \(Failed\)/,
    );
  });

  it("requires credentials when set, compared as given", async () => {
    const guarded = await client.socks({
      listen: "127.0.0.1:0",
      user: "alice",
      password: "pässword",
    });
    try {
      const proxy = {
        host: "127.0.0.1",
        port: Number(guarded.address.split(":")[1]),
        type: 5 as const,
      };
      const destination = { host: "127.0.0.1", port: echo.port };
      const { socket } = await SocksClient.createConnection({
        proxy: { ...proxy, userId: "alice", password: "pässword" },
        command: "connect",
        destination,
        timeout: 15_000,
      });
      const back = new Promise<string>((resolve) =>
        socket.once("data", (d: Buffer) => resolve(d.toString()))
      );
      socket.write("ping");
      assert.equal(await withTimeout(back, 15_000, "the echo"), "ping");
      socket.destroy();
      await assert.rejects(
        SocksClient.createConnection({
          proxy: { ...proxy, userId: "alice", password: "password" },
          command: "connect",
          destination,
          timeout: 15_000,
        }),
        /Authentication failed/,
      );
      await assert.rejects(
        SocksClient.createConnection({ proxy, command: "connect", destination, timeout: 15_000 }),
        /no accepted authentication type/i,
      );
      assert.ok(errors.some((e) => e.code === "socks_refused" && /wrong username/.test(e.message)));
    } finally {
      await guarded.close();
    }
  });

  it("refuses a non-loopback listen address without credentials, and says why", async () => {
    await assert.rejects(
      client.socks({ listen: "0.0.0.0:0" }),
      (error: Error) =>
        error instanceof TypeError && /not a loopback address.*password/.test(error.message),
    );
    assert.equal(socksOptionsProblem({ listen: "0.0.0.0:0", user: "a", password: "b" }), undefined);
    assert.match(socksOptionsProblem({ listen: "127.0.0.1:0", user: "a" })!, /needs a password/);
  });

  it("closes connections over the cap at once, and idle handshakes at their deadline", async () => {
    const capped = await client.socks({
      listen: "127.0.0.1:0",
      maxConnections: 1,
      handshakeTimeoutMs: 300,
    });
    try {
      const capPort = Number(capped.address.split(":")[1]);
      const idle = await tcpConnect(capPort);
      idle.on("data", () => {});
      const idleClosed = ended(idle);
      await waitFor(() => capped.stats.active === 1, "the first connection to be counted");
      const over = await exchange(capPort, [[5, 1, 0]], 1);
      assert.deepEqual(over.bytes, [], "the connection over the cap got no answer");
      // The idle one never sent a greeting: its handshake deadline closes it.
      await withTimeout(idleClosed, 15_000, "the idle handshake to be closed");
      assert.equal(capped.stats.refused, 2);
      await waitFor(() => capped.stats.active === 0, "both to be gone");
    } finally {
      await capped.close();
    }
  });

  it("holds back a SOCKS client that writes and never reads, through the stream's backpressure", async () => {
    // A raw socket: the socks client's keeps reading on its own, which would defeat the test.
    const { socket, bytes } = await exchange(
      Number(socks.address.split(":")[1]),
      [[5, 1, 0, ...connectV4(echo.port)]],
      12,
    );
    assert.deepEqual(bytes, [5, 0, ...socksReply(SocksReply.Succeeded)]);
    socket.removeAllListeners("data");
    // The echo answers everything; nobody reads its answers, so both directions fill up.
    const limit = 1024 * 1024 * 1024;
    const chunk = pattern(256 * 1024, 3);
    let written = 0;
    const pump = () => {
      while (written < limit && !socket.destroyed) {
        written += chunk.length;
        if (!socket.write(chunk)) return;
      }
    };
    socket.on("drain", pump);
    socket.pause();
    pump();
    let last = -1, still = 0;
    await waitFor(() => {
      still = written === last ? still + 1 : 0;
      last = written;
      return still >= 10;
    }, { timeoutMs: 60_000, intervalMs: 50, message: "the writer to be held back" });
    assert.ok(written < limit, `the writer could write everything (${written} bytes)`);
    socket.destroy();
    await waitFor(() => socks.stats.active === 0, "the held connection to be gone");
  });

  it("serves an HA client's SOCKS through a ready session", async () => {
    const ha = await connectHa([`tcp://${daemon.addresses.tcp}`], { token: TOKEN, sessions: 2 });
    const front = await ha.socks({ listen: "127.0.0.1:0" });
    try {
      const got = await exchange(
        Number(front.address.split(":")[1]),
        [[5, 1, 0, ...connectV4(echo.port), ...text("ha")]],
        14,
      );
      assert.deepEqual(got.bytes, [5, 0, ...socksReply(SocksReply.Succeeded), ...text("ha")]);
      got.socket.destroy();
    } finally {
      await front.close();
      await ha.close();
    }
  });

  it("maps reset reasons to SOCKS reply codes", () => {
    const cases: [number | undefined, number][] = [
      [ResetReason.NotAllowed, 2],
      [ResetReason.LoopbackDenied, 2],
      [ResetReason.MetadataDenied, 2],
      [ResetReason.AddressDenied, 2],
      [ResetReason.ResolveFailed, 4],
      [ResetReason.DialFailed, 4],
      [ResetReason.DialRefused, 5],
      [ResetReason.DialTimeout, 6],
      [ResetReason.NetworkUnreachable, 3],
      [ResetReason.LimitReached, 1],
      [ResetReason.BadHeader, 1],
      [undefined, 1],
    ];
    for (const [reset, reply] of cases) assert.equal(socksReplyForReset(reset), reply, `${reset}`);
  });
});
