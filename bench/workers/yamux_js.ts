/**
 * Benchmark worker: yamux-js 0.2.0 over `node:net`. A lower bound only: it never reports the
 * peer's FIN to the reader (its flag check compares against SYN), so streams are marked
 * {@linkcode Duplex.endless}, and it loses frames split across socket reads, so larger scenarios
 * are expected to fail; the runner records such failures as they are.
 *
 * @module
 */

import * as net from "node:net";
import type { Duplex as NodeDuplex } from "node:stream";
// @ts-types="npm:yamux-js@0.2.0"
import { Client, Server } from "yamux-js";
import type { Duplex } from "../duplex.ts";
import { runWorker } from "./_worker.ts";

/** A yamux-js stream (a node Duplex) as a {@linkcode Duplex}. */
function streamDuplex(stream: NodeDuplex & { close(): void }): Duplex {
  return {
    endless: true,
    start(h) {
      stream.on("data", (chunk: Uint8Array) => h.data(chunk));
      stream.on("drain", () => h.drain());
      stream.on("end", () => h.end());
      stream.on("error", (error: Error) => h.error(error));
    },
    write: (chunk) => stream.write(chunk),
    // end() alone sends no FIN in yamux-js; close() does, once queued writes have gone out.
    end: () => void stream.end(() => stream.close()),
    close: () => {},
  };
}

await runWorker({
  name: "yamux-js",
  version: "0.2.0",
  serve() {
    const server = net.createServer((socket) => {
      socket.setNoDelay(true);
      const mux = new Server((stream) => {
        stream.on("data", (chunk: Uint8Array) => {
          if (!stream.write(chunk)) {
            stream.pause();
            stream.once("drain", () => stream.resume());
          }
        });
      }, { enableKeepAlive: false });
      mux.on("error", () => socket.destroy());
      socket.on("error", () => {});
      socket.pipe(mux).pipe(socket);
    });
    return new Promise((resolve) => {
      server.listen(0, "127.0.0.1", () => resolve((server.address() as net.AddressInfo).port));
    });
  },
  connect(hostname, port) {
    return new Promise((resolve, reject) => {
      const socket = net.connect({ host: hostname, port }, () => {
        socket.setNoDelay(true);
        const client = new Client({ enableKeepAlive: false });
        let failure: Error | undefined;
        client.on("error", (error: Error) => (failure = error));
        socket.pipe(client).pipe(socket);
        resolve({
          open: () => {
            if (failure) return Promise.reject(failure);
            return Promise.resolve(streamDuplex(client.open() as NodeDuplex & { close(): void }));
          },
          close: () => void socket.destroy(),
        });
      });
      socket.once("error", reject);
    });
  },
});
