/**
 * Benchmark worker: @chainsafe/libp2p-yamux over `node:net`, through the interop peer in
 * `interop/libp2p_peer.ts` (default muxer options on both sides).
 *
 * @module
 */

import {
  connectLibp2pTcp,
  type Libp2pStream,
  listenLibp2pTcp,
  toBytes,
} from "../../interop/libp2p_peer.ts";
import type { Duplex } from "../duplex.ts";
import { runWorker } from "./_worker.ts";

type Sendable = Parameters<Libp2pStream["send"]>[0];

/** A libp2p-yamux stream as a {@linkcode Duplex}; its `close` event means both sides ended. */
function streamDuplex(stream: Libp2pStream): Duplex {
  return {
    start(h) {
      stream.addEventListener("message", (event) => h.data(toBytes(event.data)));
      stream.addEventListener("drain", () => h.drain());
      stream.addEventListener("close", (event) => {
        if (event.error) h.error(event.error);
        else h.end();
      }, { once: true });
    },
    write: (chunk) => stream.send(chunk as unknown as Sendable),
    end: () => void stream.close().catch(() => {}),
    close: () => {},
  };
}

await runWorker({
  name: "libp2p-yamux",
  version: "8.0.1",
  async serve() {
    return (await listenLibp2pTcp("127.0.0.1", 0)).port;
  },
  async connect(hostname, port) {
    const peer = await connectLibp2pTcp(hostname, port);
    return {
      open: async () => streamDuplex(await peer.open()),
      close: () => peer.close(),
    };
  },
});
