/**
 * One plain TCP relay on Bun's native sockets, half of the Bun floor row (`jsrelay-bun`): two of
 * them chained (visitor -> relay -> relay -> backend) are what two JavaScript processes on Bun
 * cost with no multiplexing, no auth and no policy.
 *
 * Usage: `bun bench/tunnel/floor/relay_bun.ts LISTEN TARGET` (`HOST:PORT` each; port 0 picks
 * one). Prints `relay on HOST:PORT -> TARGET` once listening; exits when stdin closes or on
 * SIGTERM.
 *
 * @module
 */

import process from "node:process";
import type { BunApi, BunSocket, BunSocketHandler } from "../../../transport/bun/types.ts";

/** One socket of a relayed pair: what waits to be written to it, and how far its FINs are. */
class Side {
  socket?: BunSocket<Side>;
  peer: Side = this;
  /** Bytes Bun did not take yet, in order (Bun's `data` chunks are fresh, so kept as they are). */
  queue: Uint8Array[] = [];
  /** The peer sent FIN: send ours once the queue is out. */
  ending = false;
  /** Our FIN went out; theirs came in. Both: the socket is done. */
  sentEnd = false;
  gotEnd = false;
  /** Closed (cleanly or not): an upstream that connects after this is dropped. */
  closed = false;
}

const bun = (globalThis as unknown as { Bun: BunApi }).Bun;
const [listen, target] = process.argv.slice(2);
const hostPort = (a: string) => ({
  hostname: a.slice(0, a.lastIndexOf(":")),
  port: Number(a.slice(a.lastIndexOf(":") + 1)),
});

/** Writes what waits, keeping what Bun did not take; then the FIN, then closes when both are done. */
function flush(side: Side): void {
  const socket = side.socket;
  if (!socket) return; // still connecting: written once open
  while (side.queue.length) {
    const chunk = side.queue[0];
    const n = socket.write(chunk);
    if (n < chunk.length) return void (side.queue[0] = chunk.subarray(Math.max(n, 0)));
    side.queue.shift();
  }
  if (side.ending && !side.sentEnd) {
    side.sentEnd = true;
    socket.shutdown();
  }
  if (side.sentEnd && side.gotEnd) socket.end();
}

function send(side: Side, chunk: Uint8Array): void {
  side.queue.push(chunk);
  if (side.queue.length === 1) flush(side);
}

const handler: BunSocketHandler<Side> = {
  binaryType: "uint8array",
  data: (socket, chunk) => send(socket.data!.peer, chunk),
  drain: (socket) => flush(socket.data!),
  end(socket) {
    const side = socket.data!;
    side.gotEnd = side.peer.ending = true;
    flush(side.peer);
    flush(side);
  },
  close(socket) {
    const side = socket.data!;
    side.closed = true;
    // Closed before both FINs (a reset, an error): the peer goes too.
    if (!(side.sentEnd && side.gotEnd)) side.peer.socket?.end();
  },
  error: (socket) => socket.data!.peer.socket?.end(),
};

const listener = bun.listen<Side>({
  ...hostPort(listen),
  allowHalfOpen: true,
  socket: {
    ...handler,
    open(socket) {
      socket.setNoDelay(true);
      const visitor = socket.data = new Side();
      const upstream = visitor.peer = new Side();
      visitor.socket = socket;
      upstream.peer = visitor;
      bun.connect<Side>({
        ...hostPort(target),
        allowHalfOpen: true,
        socket: {
          ...handler,
          open(up) {
            up.data = upstream;
            upstream.socket = up;
            if (visitor.closed) return up.end();
            up.setNoDelay(true);
            flush(upstream); // what the visitor sent meanwhile
          },
        },
      }).catch(() => socket.end());
    },
  },
});
console.log(`relay on ${listener.hostname}:${listener.port} -> ${target}`);
process.on("SIGTERM", () => process.exit(0));
process.stdin.on("end", () => process.exit(0)).resume();
