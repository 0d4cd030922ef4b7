/**
 * One visitor through a tunnel to an echo service: connect, send `size` bytes, expect them back.
 * Shared by the benches that count visitors (`bench:failover`, `bench:startup`).
 *
 * @module
 */

import { Buffer } from "node:buffer";
import { connect } from "node:net";

/**
 * Resolves true when all `size` bytes came back from `host:port` within `timeoutMs`, false on a
 * refusal, a reset, an early close or the deadline; never rejects.
 */
export function echoProbe(
  host: string,
  port: number,
  size: number,
  timeoutMs: number,
): Promise<boolean> {
  return new Promise((resolve) => {
    const payload = Buffer.alloc(size, 7);
    let got = 0;
    const socket = connect({ host, port });
    const done = (ok: boolean) => {
      clearTimeout(timer);
      socket.destroy();
      resolve(ok);
    };
    const timer = setTimeout(() => done(false), timeoutMs);
    socket.on("connect", () => socket.write(payload));
    socket.on("data", (chunk: Buffer) => {
      got += chunk.length;
      if (got >= payload.length) done(true);
    });
    socket.on("error", () => done(false));
    socket.on("close", () => done(got >= payload.length));
  });
}
