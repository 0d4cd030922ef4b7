/**
 * Benchmark worker, the ceiling through `node:net` (the runtime's Node compatibility layer), no
 * mux: what libp2p-yamux and yamux-js run on.
 *
 * @module
 */

import * as net from "node:net";
import type { Duplex } from "../duplex.ts";
import { runWorker } from "./_worker.ts";

/** A connected socket (made with `allowHalfOpen`) as a {@linkcode Duplex}. */
function socketDuplex(socket: net.Socket): Duplex {
  return {
    start(h) {
      socket.on("data", (chunk: Uint8Array) => h.data(chunk));
      socket.on("drain", () => h.drain());
      socket.on("end", () => h.end());
      socket.on("error", (error) => h.error(error));
    },
    write: (chunk) => socket.write(chunk),
    end: () => void socket.end(),
    close: () => void socket.destroy(),
  };
}

await runWorker({
  name: "raw-node",
  version: "node:net",
  raw: true,
  serve() {
    const server = net.createServer({ allowHalfOpen: true }, (socket) => {
      socket.setNoDelay(true);
      socket.on("error", () => {});
      socket.on("data", (chunk) => {
        if (!socket.write(chunk)) socket.pause();
      });
      socket.on("drain", () => socket.resume());
      socket.on("end", () => socket.end());
    });
    return new Promise((resolve) => {
      server.listen(0, "127.0.0.1", () => resolve((server.address() as net.AddressInfo).port));
    });
  },
  connect(hostname, port) {
    const dial = () =>
      new Promise<Duplex>((resolve, reject) => {
        const socket = net.connect({ host: hostname, port, allowHalfOpen: true }, () => {
          socket.off("error", reject);
          socket.setNoDelay(true);
          resolve(socketDuplex(socket));
        });
        socket.once("error", reject);
      });
    return Promise.resolve({ open: dial, close: () => {} });
  },
});
