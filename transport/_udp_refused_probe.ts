/**
 * Test support for `udp_test.ts`, run as its own process: sends datagrams to a port nobody holds
 * (the kernel answers ICMP port unreachable), then one to itself, and prints what it received.
 * Its stderr must stay empty: a visitor that went away is no error worth printing.
 *
 * @module
 */

import { openUdp } from "./udp.ts";

const gone = await openUdp({ onMessage: () => {} });
const closedPort = gone.local.port;
gone.close();
const got: number[] = [];
const socket = await openUdp({ onMessage: (bytes) => void got.push(bytes.length) });
for (let i = 0; i < 5; i++) {
  socket.send(new Uint8Array(10), "127.0.0.1", closedPort);
  await new Promise((resolve) => setTimeout(resolve, 20));
}
socket.send(new Uint8Array(3), "127.0.0.1", socket.local.port);
for (let i = 0; i < 200 && got.length === 0; i++) {
  await new Promise((resolve) => setTimeout(resolve, 10));
}
socket.close();
console.log(JSON.stringify(got));
