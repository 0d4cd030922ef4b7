/**
 * A local UDP port whose visitors' flows go through the daemon to a target (`--forward-udp`):
 * each visitor address is a flow with a `udpForward` stream of its own (docs/design/udp.md).
 *
 * @module
 */

import type { Stream } from "../../protocol/stream.ts";
import { type UdpCounters, UdpFlowTable } from "../../tunnel/udp/udp_flow.ts";
import { formatHostPort, parseHostPort } from "../../util/net/address.ts";
import type { ClientError } from "../errors.ts";

/** A local UDP port forwarding through the daemon. */
export interface UdpForward {
  /** The local address it is bound to (the real port when 0 was asked for). */
  readonly address: string;
  /** Live counters: flows, datagrams and bytes each way, drops by reason. */
  readonly stats: UdpCounters;
  /** Closes the port and its flows. */
  close(): void;
}

/**
 * Binds `options.listen` (`host:port`, port 0 = any); each visitor's flow gets a stream to
 * `options.target` from the opener `via` returns then. A flow that cannot be opened (no session)
 * drops its datagram, counted as `send_failed`, and goes to `onError`.
 */
export async function listenUdpForward(
  options: { listen: string; target: string; idleMs?: number },
  via: () => { openUdp(target: string): Stream },
  onError: (error: ClientError) => void,
): Promise<UdpForward> {
  const { hostname, port } = parseHostPort(options.listen);
  const table = await UdpFlowTable.open({
    hostname,
    port,
    idleMs: options.idleMs,
    openStream: () => {
      try {
        return via().openUdp(options.target);
      } catch (error) {
        onError(error as ClientError);
        throw error;
      }
    },
  });
  return {
    address: formatHostPort(table.local.hostname, table.local.port),
    stats: table.counters,
    close: () => table.close(),
  };
}
