/**
 * The admin API's listener (our HTTP/1.1 server, on either runtime): event streams stay open while
 * quiet, and one whose body fails is closed even when its peer does not read. Real sockets on
 * 127.0.0.1.
 */

import { after, describe, it } from "node:test";
import assert from "node:assert/strict";
import { connect as netConnect, type Socket } from "node:net";
import { type FetchHandler, type ServedHttp, serveHttp } from "./serve.ts";
import { sleep, waitFor, withTimeout } from "../../testing/wait.ts";

const servers: ServedHttp[] = [];
after(async () => {
  for (const server of servers) await server.close();
});

async function serve(handler: FetchHandler): Promise<ServedHttp> {
  const server = await serveHttp({ hostname: "127.0.0.1", port: 0 }, handler);
  servers.push(server);
  return server;
}

const EVENT_STREAM = { "content-type": "text/event-stream" };

/**
 * A peer that sends a request and never reads. `closed` writes to find out whether the server
 * closed the connection (a socket its owner closed answers data with a reset), so call it only
 * once the server should have: data arriving could make a server look at a stalled response again.
 */
function stalledPeer(port: number, path: string): { socket: Socket; closed: () => boolean } {
  const socket = netConnect({ host: "127.0.0.1", port });
  let closed = false;
  socket.on("close", () => closed = true);
  socket.on("error", () => closed = true);
  socket.pause();
  socket.write(`GET ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n`);
  return {
    socket,
    closed: () => {
      // Empty lines before a request are allowed: nothing to a server that still listens.
      if (!closed) socket.write("\r\n");
      return closed;
    },
  };
}

describe("serveHttp", () => {
  it("keeps a quiet event stream open longer than Bun's default idle timeout (10 s)", async () => {
    const second = new TextEncoder().encode(": still here\n\n");
    const server = await serve(() =>
      new Response(
        new ReadableStream<Uint8Array>({
          start(controller) {
            controller.enqueue(new TextEncoder().encode(": first\n\n"));
          },
          async pull(controller) {
            // An idle feed between its heartbeats: nothing written for a while.
            await sleep(15_000);
            controller.enqueue(second);
            controller.close();
          },
        }, { highWaterMark: 0 }),
        { headers: EVENT_STREAM },
      )
    );
    const response = await fetch(`http://127.0.0.1:${server.port}/`);
    const text = await withTimeout(response.text(), 30_000, "the whole stream");
    assert.equal(text, ": first\n\n: still here\n\n");
  });

  it("closes an event stream's connection when its body fails while the peer does not read", async () => {
    let pulls = 0;
    let fail!: (error: Error) => void;
    const chunk = new Uint8Array(1024).fill(0x61);
    const server = await serve(() =>
      new Response(
        new ReadableStream<Uint8Array>({
          start(controller) {
            fail = (error) => controller.error(error);
          },
          pull(controller) {
            pulls++;
            controller.enqueue(chunk.slice());
          },
        }, { highWaterMark: 1 }),
        { headers: EVENT_STREAM },
      )
    );
    const peer = stalledPeer(server.port, "/events");
    // The server stops pulling once the peer's socket is full.
    let last = -1;
    let same = 0;
    await waitFor(() => {
      same = pulls === last ? same + 1 : 0;
      last = pulls;
      return same >= 8;
    }, { intervalMs: 50, message: "the server to stop pulling" });
    assert.ok(pulls > 0);
    assert.equal(server.pendingRequests, 1);
    // What the event feed does to a reader that fell too far behind.
    fail(new Error("reader fell behind"));
    await waitFor(() => server.pendingRequests === 0, "the response ended, unread");
    await waitFor(peer.closed, { intervalMs: 100, message: "the connection closed" });
    peer.socket.destroy();
  });
});
