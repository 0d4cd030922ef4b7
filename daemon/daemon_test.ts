// The daemon in this process, driven by raw yamux sessions, for behaviour the CLI tests reach
// only slowly: idle and handshake timeouts, and streams opened before hello.
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { Daemon, listenerLines } from "./daemon.ts";
import { validateConfig } from "./config/mod.ts";
import { Logger } from "../util/log.ts";
import { Session } from "../protocol/session.ts";
import { ControlChannel } from "../tunnel/control/control_channel.ts";
import { encodeStreamHeader } from "../tunnel/stream/stream_header.ts";
import { ResetReason } from "../tunnel/stream/reset_reasons.ts";
import type { YamuxError } from "../protocol/errors.ts";
import { connectTcp, listenTcp } from "../transport/mod.ts";
import { connect as netConnect } from "node:net";
import { Buffer } from "node:buffer";
import { FrameType, HEADER_LENGTH } from "../protocol/constants.ts";
import { writeHeader } from "../protocol/header.ts";
import { concat } from "../util/bytes/bytes.ts";
import { waitFor } from "../testing/wait.ts";
import { openUdp, type UdpSocket } from "../transport/udp.ts";
import { DatagramDecoder, encodeDatagram } from "../tunnel/udp/udp_framing.ts";

const TOKEN = "daemon-test-token-0123456789abcdef";

async function startDaemon(limits: Record<string, number> = {}) {
  const result = validateConfig({
    listen: { tcp: "127.0.0.1:0", websocket: null, admin: null },
    limits: { handshakeTimeoutMs: 300, ...limits },
    clients: [{ name: "alice", token: TOKEN, expose: { ports: [0, "20000-30000"] } }],
  });
  assert.deepEqual(result.errors, []);
  const lines: string[] = [];
  const log = new Logger({ level: "debug", format: "json", sink: (l) => lines.push(l) });
  const daemon = new Daemon(result.config!, { log });
  await daemon.start();
  const [, port] = daemon.addresses.tcp!.split(":");
  return { daemon, port: Number(port), lines };
}

async function dial(port: number): Promise<Session> {
  return new Session(await connectTcp({ hostname: "127.0.0.1", port }), {
    client: true,
    config: { enableKeepAlive: false },
  });
}

function hello(session: Session): Promise<unknown> {
  const stream = session.open();
  stream.write(encodeStreamHeader({ kind: "control" }));
  const control = new ControlChannel(stream);
  const answer = new Promise((resolve) => control.onMessage = resolve);
  control.start();
  control.send({ type: "hello", version: 1, token: TOKEN });
  return answer;
}

function closedWith(stream: { onClose: ((e?: Error) => void) | null }): Promise<Error | undefined> {
  return new Promise((resolve) => stream.onClose = resolve);
}

describe("Daemon (in process)", () => {
  it("resets a stream opened before hello with NotAuthenticated, then serves the hello", async () => {
    const { daemon, port } = await startDaemon();
    const session = await dial(port);
    try {
      const control = session.open();
      control.write(encodeStreamHeader({ kind: "control" }));
      const early = session.open();
      early.write(encodeStreamHeader({ kind: "echo" }));
      const error = (await closedWith(early)) as YamuxError;
      assert.equal(error.resetCode, ResetReason.NotAuthenticated);
      const channel = new ControlChannel(control);
      const answer = new Promise((resolve) => channel.onMessage = resolve);
      channel.start();
      channel.send({ type: "hello", version: 1, token: TOKEN });
      assert.equal((await answer as { type: string }).type, "welcome");
    } finally {
      session.destroy();
      daemon.stop();
    }
  });

  it("resolves stopped once its ports can be bound again, with a client still connected", async () => {
    const { daemon, port } = await startDaemon();
    const session = await dial(port);
    try {
      daemon.stop();
      await daemon.stopped;
      // Deno frees a listening port a turn of the event loop after close(): a daemon started
      // right after `stopped` in the same process (a restart in a test) must find it free.
      const again = await listenTcp({ hostname: "127.0.0.1", port }, (t) => t.close());
      await again.close();
    } finally {
      session.destroy();
    }
  });

  it("closes a connection that never says hello, after the handshake timeout", async () => {
    const { daemon, port, lines } = await startDaemon();
    const session = await dial(port);
    try {
      await session.closed;
      assert.equal(session.remoteGoAway, true, "the daemon said GoAway before closing");
      assert.equal(daemon.counters.get("handshake_timeout"), 1);
      assert.ok(lines.some((l) => JSON.parse(l).msg.includes("no handshake")));
    } finally {
      session.destroy();
      daemon.stop();
    }
  });

  it("publishes session, tunnel and auth events to subscribers", async () => {
    const { daemon, port } = await startDaemon();
    const seen: string[] = [];
    daemon.events.subscribe((event) => seen.push(`${event.type}:${event.fields.client ?? "-"}`));
    const good = await dial(port);
    const bad = await dial(port);
    try {
      assert.equal((await hello(good) as { type: string }).type, "welcome");
      const control = [...good.streams()][0];
      const channel = new ControlChannel(control);
      const exposed = new Promise<{ tunnel: string }>((resolve) => {
        channel.onMessage = (m) => resolve(m as { tunnel: string });
      });
      channel.start();
      channel.send({ type: "expose", id: 1, port: 0 });
      const { tunnel } = await exposed;
      const unexposed = new Promise((resolve) => channel.onMessage = resolve);
      channel.send({ type: "unexpose", id: 2, tunnel });
      await unexposed;
      const stream = bad.open();
      stream.write(encodeStreamHeader({ kind: "control" }));
      const badChannel = new ControlChannel(stream);
      badChannel.send({ type: "hello", version: 1, token: "wrong-token-0123456789abcdefghij" });
      await bad.closed;
      good.destroy();
      await good.closed;
      for (let i = 0; i < 100 && !seen.includes("session_closed:alice"); i++) {
        await new Promise((r) => setTimeout(r, 10));
      }
      assert.deepEqual(seen, [
        "session_opened:alice",
        "tunnel_up:alice",
        "tunnel_down:alice",
        "auth_failure:-",
        "session_closed:alice",
      ]);
    } finally {
      good.destroy();
      bad.destroy();
      daemon.stop();
    }
  });

  it("closes a session idle past limits.idleTimeoutMs, not one holding a tunnel", async () => {
    const { daemon, port } = await startDaemon({ idleTimeoutMs: 200 });
    const idle = await dial(port);
    const busy = await dial(port);
    try {
      assert.equal((await hello(idle) as { type: string }).type, "welcome");
      assert.equal((await hello(busy) as { type: string }).type, "welcome");
      const control = [...busy.streams()][0];
      const channel = new ControlChannel(control);
      const exposed = new Promise((resolve) => channel.onMessage = resolve);
      channel.start();
      channel.send({ type: "expose", id: 1, port: 0 });
      assert.equal((await exposed as { type: string }).type, "exposed");
      await idle.closed;
      assert.equal(daemon.counters.get("idle_timeout"), 1);
      assert.equal(busy.state, "open", "the session with a tunnel stays");
    } finally {
      idle.destroy();
      busy.destroy();
      daemon.stop();
    }
  });
});

describe("Daemon: a hello that arrives in one read with its stream header", () => {
  /** A yamux Data frame for stream 1 (SYN on the first), written out by hand. */
  function dataFrame(flags: number, payload: Uint8Array): Uint8Array {
    const out = new Uint8Array(HEADER_LENGTH + payload.length);
    writeHeader(out, 0, FrameType.Data, flags, 1, payload.length);
    out.set(payload, HEADER_LENGTH);
    return out;
  }

  it("is answered with welcome: header and hello as two frames in one write", async () => {
    const { daemon, port } = await startDaemon({ handshakeTimeoutMs: 10_000 });
    const socket = netConnect({ host: "127.0.0.1", port });
    try {
      const body = new TextEncoder().encode(
        JSON.stringify({ type: "hello", version: 1, token: TOKEN }),
      );
      const hello = new Uint8Array(4 + body.length);
      new DataView(hello.buffer).setUint32(0, body.length);
      hello.set(body, 4);
      const SYN = 1;
      const bytes = concat([
        dataFrame(SYN, encodeStreamHeader({ kind: "control" })),
        dataFrame(0, hello),
      ]);
      const received: Buffer[] = [];
      socket.on("data", (chunk: Buffer) => received.push(chunk));
      await new Promise<void>((resolve) => socket.on("connect", () => resolve()));
      socket.write(bytes); // one write: the daemon reads both frames together
      // The answer: Data frames on stream 1 carrying a length-prefixed JSON message.
      const welcome = await waitFor(() => {
        const all = Buffer.concat(received);
        let payload = Buffer.alloc(0);
        for (let at = 0; at + HEADER_LENGTH <= all.length;) {
          const type = all[at + 1];
          const stream = all.readUInt32BE(at + 4);
          const length = all.readUInt32BE(at + 8);
          const size = type === FrameType.Data ? length : 0;
          if (at + HEADER_LENGTH + size > all.length) break;
          if (type === FrameType.Data && stream === 1) {
            payload = Buffer.concat([
              payload,
              all.subarray(at + HEADER_LENGTH, at + HEADER_LENGTH + size),
            ]);
          }
          at += HEADER_LENGTH + size;
        }
        if (payload.length < 4 || payload.length < 4 + payload.readUInt32BE(0)) return undefined;
        return JSON.parse(payload.subarray(4, 4 + payload.readUInt32BE(0)).toString());
      }, "an answer on the control stream");
      assert.equal(welcome.type, "welcome", JSON.stringify(welcome));
      assert.equal(welcome.client, "alice");
    } finally {
      socket.destroy();
      daemon.stop();
    }
  });
});

describe("daemon: a listener that cannot bind", () => {
  it("names the listener, its address and the flag to change", async () => {
    const holder = await listenTcp({ hostname: "127.0.0.1", port: 0 }, (t) => t.close());
    try {
      const result = validateConfig({
        listen: { tcp: `127.0.0.1:${holder.port}`, websocket: null, admin: null },
        clients: [{ name: "a", token: "a-token-0123456789abcdefghij" }],
      });
      const log = new Logger({ level: "error", format: "json", sink: () => {} });
      const daemon = new Daemon(result.config!, { log });
      await assert.rejects(daemon.start(), (error: Error) => {
        assert.equal(
          error.message,
          `cannot listen for tunnels over TCP on 127.0.0.1:${holder.port}: the address is in use ` +
            "(another daemon?); choose another with --listen-tcp",
        );
        return true;
      });
    } finally {
      holder.close();
    }
  });
});

describe("daemon: the lines it prints once listening", () => {
  it("names a cluster node's relay listener last, with the address it advertises", () => {
    const addresses = {
      tcp: "127.0.0.1:7000",
      cluster: "0.0.0.0:41000",
      advertise: "10.0.0.1:41000",
    };
    assert.deepEqual(listenerLines(addresses, false), [
      "tunnels over TCP on 127.0.0.1:7000",
      "cluster relays on 0.0.0.0:41000, advertised as 10.0.0.1:41000",
    ]);
  });

  it("names every bound listener, the HTTP and HTTPS ports of web tunnels included", async () => {
    const result = validateConfig({
      listen: {
        tcp: "127.0.0.1:0",
        websocket: "127.0.0.1:0",
        admin: null,
        http: "127.0.0.1:0",
        https: "127.0.0.1:0",
      },
      clients: [{ name: "a", token: "a-token-0123456789abcdefghij" }],
    });
    assert.deepEqual(result.errors, []);
    const log = new Logger({ level: "error", format: "json", sink: () => {} });
    const daemon = new Daemon(result.config!, { log });
    await daemon.start();
    try {
      const { tcp, websocket, http, https } = daemon.addresses;
      assert.deepEqual(listenerLines(daemon.addresses, false), [
        `tunnels over TCP on ${tcp}`,
        `tunnels over WebSocket on ws://${websocket}`,
        `HTTP tunnels on http://${http}`,
        `HTTPS and TLS tunnels on https://${https}`,
      ]);
      assert.match(https!, /^127\.0\.0\.1:\d+$/);
    } finally {
      daemon.stop();
      await daemon.stopped;
    }
  });

  it("serves a udpForward stream to an allowlisted target and refuses another", async () => {
    const echo: UdpSocket = await openUdp({
      onMessage: (bytes, remote) => echo.send(bytes, remote.hostname, remote.port),
    });
    const result = validateConfig({
      listen: { tcp: "127.0.0.1:0", websocket: null, admin: null },
      clients: [{ name: "alice", token: TOKEN, forward: [`127.0.0.1:${echo.local.port}`] }],
    });
    assert.deepEqual(result.errors, []);
    const daemon = new Daemon(result.config!, {
      log: new Logger({ level: "error", format: "json", sink: () => {} }),
    });
    await daemon.start();
    const session = await dial(Number(daemon.addresses.tcp!.split(":")[1]));
    try {
      assert.equal((await hello(session) as { type: string }).type, "welcome");
      const allowed = session.open();
      allowed.write(
        encodeStreamHeader({ kind: "udpForward", target: `127.0.0.1:${echo.local.port}` }),
      );
      const decoder = new DatagramDecoder();
      const got: Uint8Array[] = [];
      allowed.onData = (chunk) => got.push(...decoder.push(chunk));
      allowed.write(encodeDatagram(new Uint8Array([1, 2, 3])));
      allowed.write(encodeDatagram(new Uint8Array(0)));
      await waitFor(() => got.length === 2, "the echoed datagrams");
      assert.deepEqual(got, [new Uint8Array([1, 2, 3]), new Uint8Array(0)]);

      const refused = session.open();
      refused.write(encodeStreamHeader({ kind: "udpForward", target: "127.0.0.1:9" }));
      const error = (await closedWith(refused)) as YamuxError;
      assert.equal(error.resetCode, ResetReason.NotAllowed);
    } finally {
      session.destroy();
      echo.close();
      daemon.stop();
      await daemon.stopped;
    }
  });
});
