/**
 * UDP services for tests: a tiny DNS responder (for `dig` and DNS-shaped exchanges through a
 * tunnel), an echo, and a service that answers with its name (to see which backend served).
 *
 * @module
 */

import { openUdp, type UdpSocket } from "../transport/udp.ts";

/** A tiny DNS responder on 127.0.0.1: every A question gets 192.0.2.7. */
export async function startDnsResponder(): Promise<UdpSocket> {
  const server: UdpSocket = await openUdp({
    onMessage: (query, remote) => {
      if (query.length < 12) return;
      let end = 12;
      while (end < query.length && query[end] !== 0) end += query[end] + 1;
      end += 5; // the root label's 0, then QTYPE and QCLASS
      if (end > query.length) return;
      const answer = [0xc0, 12, 0, 1, 0, 1, 0, 0, 0, 60, 0, 4, 192, 0, 2, 7];
      const reply = new Uint8Array(end + answer.length);
      reply.set(query.subarray(0, end));
      reply.set([0x81, 0x80, 0, 1, 0, 1, 0, 0, 0, 0], 2);
      reply.set(answer, end);
      server.send(reply, remote.hostname, remote.port);
    },
  });
  return server;
}

/** A UDP echo service on `hostname`: each datagram goes back as it came. */
export async function startUdpEcho(hostname = "127.0.0.1"): Promise<UdpSocket> {
  const server: UdpSocket = await openUdp({
    hostname,
    onMessage: (bytes, remote) => void server.send(bytes, remote.hostname, remote.port),
  });
  return server;
}

/** A UDP service on 127.0.0.1 that answers each datagram with its `name`. */
export async function startUdpNamed(name: string): Promise<UdpSocket> {
  const answer = new TextEncoder().encode(name);
  const server: UdpSocket = await openUdp({
    onMessage: (_bytes, remote) => void server.send(answer, remote.hostname, remote.port),
  });
  return server;
}
