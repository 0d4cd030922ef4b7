/**
 * Test support for routes: a yamux session pair whose far end plays a client that reads each
 * stream's header, then echoes the stream's bytes back and ends it; and a collector of what a
 * visitor transport receives.
 *
 * @module
 */

import { Session } from "../../protocol/session.ts";
import type { Transport } from "../../protocol/transport.ts";
import { memoryPair } from "../../transport/memory.ts";
import { readStreamHeader } from "../../tunnel/stream/read_stream_header.ts";
import type { StreamHeader } from "../../tunnel/stream/stream_header.ts";

/** Sessions without keepalive pings, which a short test never needs. */
export const QUIET = { enableKeepAlive: false };

/**
 * The near end (`near`: the daemon's session to the client, or a relay session to another node)
 * and the echoing far end (`far`), with the headers the far end has read.
 */
export function echoClient(): { near: Session; far: Session; headers: StreamHeader[] } {
  const [a, b] = memoryPair();
  const headers: StreamHeader[] = [];
  const far = new Session(b, {
    client: false,
    config: QUIET,
    onStream: async (stream) => {
      const { header, rest } = await readStreamHeader(stream, 5_000);
      headers.push(header);
      if (rest.length > 0) stream.write(rest.slice());
      stream.onData = (chunk) => stream.write(chunk.slice());
      stream.onEnd = () => stream.end();
      stream.resume();
    },
  });
  const near = new Session(a, { client: true, config: QUIET });
  return { near, far, headers };
}

/** Resolves with what `transport` received, as text, once it ends or closes. */
export function received(transport: Transport): Promise<string> {
  const chunks: Uint8Array[] = [];
  return new Promise((resolve) => {
    const done = () => resolve(Buffer.concat(chunks).toString());
    transport.start({ data: (c) => chunks.push(c.slice()), drain() {}, end: done, close: done });
  });
}
