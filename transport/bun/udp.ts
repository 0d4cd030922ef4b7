/**
 * {@linkcode UdpSocket} over Bun's `Bun.udpSocket`.
 *
 * @module
 */

import type { OpenUdpOptions, UdpSocket } from "../udp.ts";
import { bunApi } from "./types.ts";

/** Binds a UDP socket with Bun. */
export async function openBunUdp(options: OpenUdpOptions): Promise<UdpSocket> {
  let closed = false;
  const hostname = options.hostname ?? "127.0.0.1";
  const socket = await bunApi("UDP").udpSocket({
    hostname,
    port: options.port ?? 0,
    socket: {
      // Bun reuses nothing here, but copy anyway so a handler may keep the bytes.
      data: (_socket, data, port, address) => {
        if (!closed) options.onMessage(new Uint8Array(data), { hostname: address, port });
      },
      // The kernel's answer to an earlier send, mostly "port unreachable" from a visitor that went
      // away: nothing to do (the send was counted), and without a handler Bun reports it as an
      // uncaught error, which a stream of departed visitors turns into a flood.
      error: () => {},
    },
  });
  return {
    local: { hostname: socket.address.address, port: socket.port },
    send(bytes, to, port) {
      if (closed) return false;
      try {
        return socket.send(bytes, port, to);
      } catch {
        return false;
      }
    },
    close() {
      if (closed) return;
      closed = true;
      socket.close();
    },
  };
}
