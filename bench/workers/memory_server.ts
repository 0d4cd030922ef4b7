/**
 * M1 server worker: a tunnelmux session over native TCP on 127.0.0.1 whose streams either echo
 * (`E`, with `tools/echo.ts`'s echo service) or flood (`F<bytes>\n`: writes that many pattern
 * bytes with backpressure, so a stalled reader holds it to the window). Answers `mem` with its
 * memory after a forced GC, the streams open, and how far the latest flood got.
 *
 * Run by `bench/memory.ts`: `memory_server.ts`; prints `{"ready":true,"address":"HOST:PORT"}`.
 *
 * @module
 */

import { Session, type Stream } from "../../protocol/mod.ts";
import { listenTcp } from "../../transport/mod.ts";
import { echoStream } from "../../tunnel/echo.ts";
import { CHUNK } from "../drive.ts";
import { segment } from "../pattern.ts";
import { snapshot } from "./memory_probe.ts";
import { serveCommands } from "./memory_rpc.ts";
import { FLOOD_BASE, M1_SESSION_CONFIG, MODE_ECHO, parseFloodRequest } from "./memory_wire.ts";

/** The flood most recently started, for the runner's report of what the sender did. */
let flood: { stream: Stream; offered: number; written: number } | undefined;
const sessions = new Set<Session>();
const DECODER = new TextDecoder();

/** Writes `offered` pattern bytes, waiting for `onDrain` whenever `write` says so, then ends. */
function startFlood(stream: Stream, offered: number): void {
  const state = { stream, offered, written: 0 };
  flood = state;
  stream.onData = () => {}; // the client sends nothing more that matters
  const pump = () => {
    while (state.written < offered) {
      const chunk = segment(FLOOD_BASE, state.written, Math.min(CHUNK, offered - state.written));
      state.written += chunk.length;
      if (!stream.write(chunk)) return;
    }
    stream.end();
  };
  stream.onDrain = pump;
  stream.onEnd = () => stream.end();
  pump();
}

/** Reads the stream's first byte (and, for a flood, its request line) and hands it over. */
function route(stream: Stream): void {
  let line = "";
  stream.onData = (chunk) => {
    if (line === "" && chunk[0] === MODE_ECHO) {
      echoStream(stream);
      if (chunk.length > 1) stream.onData!(chunk.subarray(1));
      return;
    }
    line += DECODER.decode(chunk);
    const end = line.indexOf("\n");
    if (end < 0) {
      if (line.length > 32) stream.reset();
      return;
    }
    const offered = parseFloodRequest(line.slice(0, end));
    if (offered === undefined) stream.reset();
    else startFlood(stream, offered);
  };
}

const listener = await listenTcp({ hostname: "127.0.0.1", port: 0 }, (transport) => {
  const session = new Session(transport, {
    client: false,
    config: M1_SESSION_CONFIG,
    onStream: route,
  });
  sessions.add(session);
  session.closed.then(() => sessions.delete(session));
});

serveCommands({ address: `127.0.0.1:${listener.port}` }, {
  async mem() {
    const memory = await snapshot();
    let streams = 0;
    for (const session of sessions) streams += session.streamCount;
    return {
      ...memory,
      streams,
      ...(flood
        ? {
          flood: {
            offered: flood.offered,
            written: flood.written,
            sent: flood.stream.bytesOut,
            queued: flood.stream.queuedBytes,
          },
        }
        : {}),
    };
  },
});
