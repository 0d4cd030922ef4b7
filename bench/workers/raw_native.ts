/**
 * Benchmark worker, the ceiling: plain TCP through the runtime's native socket API (`Deno.connect`
 * / `Bun.connect`, via the same transport adapters tunnelmux runs on), no mux. Comparing tunnelmux
 * with this isolates what the mux costs.
 *
 * @module
 */

import { connectTcp, listenTcp, type Transport } from "../../transport/mod.ts";
import type { Duplex } from "../duplex.ts";
import { runtime, runWorker } from "./_worker.ts";

/** A transport as a {@linkcode Duplex}. */
export function transportDuplex(transport: Transport): Duplex {
  return {
    start(h) {
      transport.start({
        data: h.data,
        drain: h.drain,
        end: h.end,
        close: (error) => {
          if (error) h.error(error);
        },
      });
    },
    write: (chunk) => transport.write(chunk),
    end: () => transport.end(),
    close: () => transport.close(),
  };
}

/** Echoes a transport with backpressure and answers its half-close with ours. */
function echo(transport: Transport): void {
  transport.start({
    data(chunk) {
      if (!transport.write(chunk)) transport.pause();
    },
    drain: () => transport.resume(),
    end: () => transport.end(),
    close() {},
  });
}

await runWorker({
  name: "raw-native",
  version: runtime() === "deno" ? "Deno.connect" : "Bun.connect",
  raw: true,
  async serve() {
    return (await listenTcp({ hostname: "127.0.0.1", port: 0 }, echo)).port;
  },
  connect(hostname, port) {
    return Promise.resolve({
      open: async () => transportDuplex(await connectTcp({ hostname, port })),
      close: () => {},
    });
  },
});
