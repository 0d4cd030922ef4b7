/**
 * Benchmark worker: tunnelmux (our `Session`) over the runtime's native TCP adapter, serving with
 * the same `echoStream` as `tools/echo.ts`. Default session config on both sides.
 *
 * @module
 */

import { Session, type Stream } from "../../protocol/mod.ts";
import { connectTcp, listenTcp } from "../../transport/mod.ts";
import { echoStream } from "../../tunnel/echo.ts";
import type { Duplex } from "../duplex.ts";
import { runWorker } from "./_worker.ts";

/** A tunnelmux stream as a {@linkcode Duplex}: the callbacks map one to one. */
function streamDuplex(stream: Stream): Duplex {
  return {
    start(h) {
      stream.onData = h.data;
      stream.onDrain = h.drain;
      stream.onEnd = h.end;
      stream.onClose = (error) => {
        if (error) h.error(error);
      };
    },
    write: (chunk) => stream.write(chunk),
    end: () => stream.end(),
    // The stream closes itself once both sides have half-closed.
    close: () => {},
  };
}

await runWorker({
  name: "tunnelmux",
  version: "0.1.0",
  async serve() {
    const listener = await listenTcp({ hostname: "127.0.0.1", port: 0 }, (transport) => {
      new Session(transport, { client: false, onStream: echoStream });
    });
    return listener.port;
  },
  async connect(hostname, port) {
    const session = new Session(await connectTcp({ hostname, port }), { client: true });
    return {
      open: () => Promise.resolve(streamDuplex(session.open())),
      close: () => session.close(),
    };
  },
});
