/**
 * A local listener whose every connection is piped through a stream to the daemon (a forward to
 * a target, or the use of a named service). Which session the stream is opened on is the
 * caller's: a {@linkcode Client} uses its own, an HA client any of its ready sessions.
 *
 * @module
 */

import type { Stream } from "../../protocol/stream.ts";
import { listenTcp } from "../../transport/tcp.ts";
import { splice, streamEnd, transportEnd } from "../../tunnel/splice.ts";
import { formatHostPort, parseHostPort } from "../../util/net/address.ts";
import { ClientError, describeStreamError } from "../errors.ts";

/** A local listener forwarding through the daemon. */
export interface Forward {
  /** The local address it listens on (the real port when 0 was asked for). */
  readonly address: string;
  /** Live counters: `aToB` bytes toward the target, `bToA` back. */
  readonly stats: { connections: number; active: number; aToB: number; bToA: number };
  /** Stops listening; open connections continue. */
  close(): void;
}

/** Opens streams through the daemon: a client, or the session an HA client picks. */
export interface StreamSource {
  /**
   * A stream to `target` (`host:port`), through the daemon; with `confirm` its first byte, 0,
   * says the target is connected.
   */
  open(target: string, options?: { confirm?: boolean }): Stream;
  /** A stream to the named service. */
  openService(name: string): Stream;
}

/**
 * Listens on `options.listen` (`host:port`, port 0 = any). Each connection gets a stream to
 * `options.target` or to the named `options.service` (exactly one), from the source `via`
 * returns then (which throws when no session can take it: the connection is then closed at once),
 * and is spliced to it; trouble goes to `onError`.
 */
export async function listenForward(
  options: { listen: string; target?: string; service?: string },
  via: () => StreamSource,
  onError: (error: ClientError) => void,
): Promise<Forward> {
  const { target, service } = options;
  if ((target === undefined) === (service === undefined)) {
    throw new TypeError("forward() needs exactly one of target and service");
  }
  const what = target ?? `service ${service}`;
  const stats = { connections: 0, active: 0, aToB: 0, bToA: 0 };
  const listener = await listenTcp(parseHostPort(options.listen), (local) => {
    let stream: Stream;
    try {
      stream = target !== undefined ? via().open(target) : via().openService(service!);
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
    address: formatHostPort(listener.hostname, listener.port),
    stats,
    close: () => listener.close(),
  };
}
