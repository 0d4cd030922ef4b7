/**
 * A local listener whose every connection is piped through a stream to the daemon (a forward to
 * a target, or the use of a named service). Which session the stream is opened on is the
 * caller's: a {@linkcode Client} uses its own, an HA client any of its ready sessions.
 *
 * @module
 */

import type { Stream } from "../protocol/stream.ts";
import { listenTcp } from "../transport/mod.ts";
import { splice, streamEnd, transportEnd } from "../tunnel/splice.ts";
import { parseHostPort } from "../util/address.ts";
import { ClientError, describeStreamError } from "./errors.ts";

/** A local listener forwarding through the daemon. */
export interface Forward {
  /** The local address it listens on (the real port when 0 was asked for). */
  readonly address: string;
  /** Live counters: `aToB` bytes toward the target, `bToA` back. */
  readonly stats: { connections: number; active: number; aToB: number; bToA: number };
  /** Stops listening; open connections continue. */
  close(): void;
}

/**
 * Listens on `listen` (`host:port`, port 0 = any). Each connection gets a stream from `open`
 * (which throws when no session can take it: the connection is then closed at once) and is
 * spliced to it; trouble goes to `onError`. `what` names the far end in error messages.
 */
export async function listenForward(
  listen: string,
  what: string,
  open: () => Stream,
  onError: (error: ClientError) => void,
): Promise<Forward> {
  const stats = { connections: 0, active: 0, aToB: 0, bToA: 0 };
  const listener = await listenTcp(parseHostPort(listen), (local) => {
    let stream: Stream;
    try {
      stream = open();
    } catch (error) {
      onError(error as ClientError);
      return local.close();
    }
    stats.connections++;
    stats.active++;
    splice(transportEnd(local), streamEnd(stream), { counters: stats }).then((result) => {
      stats.active--;
      if (result.error) {
        onError(
          new ClientError("forward_failed", `${what}: ${describeStreamError(result.error)}`),
        );
      }
    });
  });
  return {
    address: `${listener.hostname}:${listener.port}`,
    stats,
    close: () => listener.close(),
  };
}
