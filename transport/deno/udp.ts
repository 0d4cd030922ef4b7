/**
 * {@linkcode UdpSocket} over Deno's `Deno.listenDatagram`, which Deno 2.9 offers only with the
 * `--unstable-net` flag.
 *
 * @module
 */

import type { OpenUdpOptions, UdpSocket } from "../udp.ts";

interface DenoDatagramConn {
  readonly addr: { hostname: string; port: number };
  receive(buffer?: Uint8Array): Promise<[Uint8Array, { hostname: string; port: number }]>;
  send(
    bytes: Uint8Array,
    to: { transport: "udp"; hostname: string; port: number },
  ): Promise<number>;
  close(): void;
}

/**
 * Room for any UDP datagram (IPv6 may carry more than IPv4's 65 507 bytes): Deno's own receive
 * buffer is 65 507 bytes and cuts a larger datagram short without saying so; with this one a
 * larger datagram arrives whole, so the layer above can see it is too large and drop it.
 */
const RECEIVE_BUFFER = 65_536;

/** Sends waiting for earlier ones; beyond this a send is refused (the datagram is dropped). */
const MAX_PENDING_SENDS = 256;

/** Binds a UDP socket with Deno; throws when Deno runs without `--unstable-net`. */
export function openDenoUdp(options: OpenUdpOptions): UdpSocket {
  const deno = (globalThis as unknown as {
    Deno: {
      listenDatagram?: (
        o: { transport: "udp"; hostname: string; port: number },
      ) => DenoDatagramConn;
    };
  }).Deno;
  if (typeof deno.listenDatagram !== "function") {
    throw new Error("UDP on Deno needs the --unstable-net flag");
  }
  const conn = deno.listenDatagram({
    transport: "udp",
    hostname: options.hostname ?? "127.0.0.1",
    port: options.port ?? 0,
  });
  let closed = false;
  let pending = 0;
  let tail: Promise<unknown> = Promise.resolve();
  void (async () => {
    const buffer = new Uint8Array(RECEIVE_BUFFER);
    while (!closed) {
      let received: [Uint8Array, { hostname: string; port: number }];
      try {
        received = await conn.receive(buffer);
      } catch {
        // Closed, or broken: either way nothing more will arrive. Stop instead of spinning.
        return;
      }
      const [bytes, remote] = received;
      // A copy the handler may keep: the buffer takes the next datagram.
      options.onMessage(bytes.slice(), { hostname: remote.hostname, port: remote.port });
    }
  })();
  return {
    local: { hostname: conn.addr.hostname, port: conn.addr.port },
    send(bytes, hostname, port) {
      if (closed || pending >= MAX_PENDING_SENDS) return false;
      // Deno's sends are promises that may finish out of order; chained, a flow's datagrams
      // leave in the order they were given.
      pending++;
      tail = tail.then(() => conn.send(bytes, { transport: "udp", hostname, port }))
        .catch(() => 0)
        .finally(() => pending--);
      return true;
    },
    close() {
      if (closed) return;
      closed = true;
      conn.close();
    },
  };
}
