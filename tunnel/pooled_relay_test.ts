/**
 * The relay path with pooled buffers (util/bytes/buffer_pool.ts), as a tunnel runs it: a visitor's
 * TCP connection spliced onto a stream of a session over TCP, spliced on the other side onto a TCP
 * connection to an echo service that writes back what it reads, claims and all. Poisoning is on, so
 * a buffer given back while a view of it is still in use shows up as corrupted bytes, and one
 * written after its return as an error. On Deno every hop's reads and the batches come from the
 * pool; on Bun, whose sockets allocate each read themselves, only the batches do.
 */
import { afterEach, beforeEach, describe, it } from "node:test";
import assert from "node:assert/strict";
import { splice, streamEnd, transportEnd } from "./splice.ts";
import { Session } from "../protocol/session.ts";
import { connectTcp, connectWebSocket, listenTcp, listenWebSocket } from "../transport/mod.ts";
import type { Transport, TransportListener } from "../protocol/transport.ts";
import { pattern, sameBytes } from "../util/bytes/bytes.ts";
import { poisonReleasedBuffers, relayBuffers, releaseBytes } from "../util/bytes/buffer_pool.ts";

const QUIET = { enableKeepAlive: false };
const LOCAL = { hostname: "127.0.0.1", port: 0 };

/** Sends `payload` on a new connection to `port` and resolves with everything read back. */
function roundTrip(port: number, payload: Uint8Array): Promise<Uint8Array> {
  return new Promise((resolve, reject) => {
    const received = new Uint8Array(payload.length);
    let at = 0;
    connectTcp({ hostname: "127.0.0.1", port }).then((visitor) => {
      let sent = 0;
      const send = () => {
        while (sent < payload.length) {
          const piece = payload.subarray(sent, sent + 48 * 1024);
          sent += piece.length;
          if (!visitor.write(piece)) return;
        }
        visitor.end();
      };
      visitor.start({
        releases: true,
        data(chunk) {
          if (at + chunk.length > received.length) reject(new Error("more bytes than sent"));
          received.set(chunk, at);
          at += chunk.length;
          releaseBytes(chunk);
        },
        drain: send,
        end: () => resolve(received.subarray(0, at)),
        close: (error) => error && reject(error),
      });
      send();
    }, reject);
  });
}

describe("pooled relay buffers", () => {
  let wasPoisoning = false;
  beforeEach(() => wasPoisoning = poisonReleasedBuffers(true));
  afterEach(() => poisonReleasedBuffers(wasPoisoning));

  /** The session's link: a TCP connection or a WebSocket (our own framing on Deno). */
  const links = {
    tcp: {
      listen: (onTransport: (t: Transport) => void) => listenTcp(LOCAL, onTransport),
      connect: (port: number) => connectTcp({ hostname: "127.0.0.1", port }),
    },
    ws: {
      listen: (onTransport: (t: Transport) => void) =>
        listenWebSocket({ ...LOCAL, path: "/tunnel" }, (t) => onTransport(t)),
      connect: (port: number) => connectWebSocket(`ws://127.0.0.1:${port}/tunnel`),
    },
  };

  for (const [name, link] of Object.entries(links)) {
    it(`carry 2 × 24 MiB through two splices and an echo intact over ${name}, reused rather than collected`, async () => {
      await relayAndEcho(link);
    });
  }

  async function relayAndEcho(link: (typeof links)["tcp"]): Promise<void> {
    const closers: { close(): void }[] = [];
    try {
      // The service: echoes each chunk back with its claim, as a relay does.
      const service = await listenTcp(LOCAL, (socket: Transport) => {
        socket.start({
          releases: true,
          data(chunk) {
            if (!socket.write(chunk)) socket.pause();
          },
          drain: () => socket.resume(),
          end: () => socket.end(),
          close: () => {},
        });
      });
      closers.push(service);
      // The daemon side: each stream goes to the service.
      const sessions: Session[] = [];
      const control: TransportListener = await link.listen((transport) => {
        sessions.push(
          new Session(transport, {
            client: false,
            config: QUIET,
            onStream: async (stream) => {
              const socket = await connectTcp({ hostname: "127.0.0.1", port: service.port });
              splice(streamEnd(stream), transportEnd(socket));
            },
          }),
        );
      });
      closers.push(control);
      const client = new Session(await link.connect(control.port), {
        client: true,
        config: QUIET,
      });
      sessions.push(client);
      closers.push({ close: () => sessions.forEach((s) => s.destroy()) });
      // The public side: each visitor gets a stream.
      const visitors = await listenTcp(LOCAL, (visitor) => {
        splice(transportEnd(visitor), streamEnd(client.open()));
      });
      closers.push(visitors);

      const created = relayBuffers.created;
      const payloads = [pattern(24 * 1024 * 1024, 7), pattern(24 * 1024 * 1024, 8)];
      const echoed = await Promise.all(payloads.map((p) => roundTrip(visitors.port, p)));
      for (let i = 0; i < payloads.length; i++) {
        assert.equal(echoed[i].length, payloads[i].length);
        assert.ok(sameBytes(echoed[i], payloads[i]), `payload ${i} came back intact`);
      }
      // 96 MiB crossed eight relay hops; without reuse that is thousands of fresh buffers. With
      // reuse it is the most in flight at once, which grows when the machine is busy (up to 240
      // seen): the bound is well above that and well below no reuse at all.
      const fresh = relayBuffers.created - created;
      assert.ok(fresh < 1000, `${fresh} pooled buffers created for 96 MiB of relayed data`);
    } finally {
      for (const c of closers.reverse()) c.close();
    }
  }

  it("a chunk handed to a handler that keeps views is never reused under it", async () => {
    const kept: Uint8Array[] = [];
    let done!: () => void;
    const finished = new Promise<void>((resolve) => done = resolve);
    const listener = await listenTcp(LOCAL, (socket) => {
      // Keeps every chunk and knows nothing of claims (no `releases`).
      socket.start({ data: (c) => kept.push(c), drain() {}, end: done, close() {} });
    });
    try {
      const payload = pattern(8 * 1024 * 1024, 3);
      const sender = await connectTcp({ hostname: "127.0.0.1", port: listener.port });
      sender.start({ data() {}, drain() {}, end() {}, close() {} });
      sender.write(payload);
      sender.end();
      await finished;
      // A stray release of a kept chunk must not hand its memory out again either.
      for (const c of kept) releaseBytes(c);
      const churn = Array.from({ length: 8 }, () => relayBuffers.acquire());
      for (const b of churn) b.fill(0);
      const total = kept.reduce((n, c) => n + c.length, 0);
      const joined = new Uint8Array(total);
      let at = 0;
      for (const c of kept) (joined.set(c, at), at += c.length);
      assert.ok(sameBytes(joined, payload));
      for (const b of churn) releaseBytes(b);
      sender.close();
    } finally {
      listener.close();
    }
  });
});
