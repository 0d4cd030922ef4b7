/**
 * Binding a reverse tunnel's port: the one asked for, or, for port 0, a free one among the
 * client's allowed ports, tried from a random place in the list so clients do not pile up on the
 * lowest ports.
 *
 * @module
 */

import { randomBytes } from "node:crypto";
import type { Session } from "../protocol/session.ts";
import type { ClientConfig } from "./config.ts";
import type { Logger } from "../util/log.ts";
import { allowedPorts } from "./policy.ts";
import { ReverseTunnel } from "./reverse_tunnel.ts";

/** Ports tried for a port-0 request before giving up. */
const MAX_ATTEMPTS = 64;

/** The result of {@linkcode openTunnel}. */
export type OpenTunnelResult =
  | { ok: true; tunnel: ReverseTunnel }
  | { ok: false; code: "port_in_use" | "not_allowed"; message: string };

/** Binds a tunnel for `client` (whose permission for `bindHost:port` is already checked). */
export async function openTunnel(
  client: ClientConfig,
  bindHost: string,
  port: number,
  options: { client: string; session: Session; label?: string; log: Logger },
): Promise<OpenTunnelResult> {
  const id = `t-${randomBytes(6).toString("hex")}`;
  const candidates = port !== 0 ? [port] : pick(client);
  let lastError: Error | undefined;
  for (const candidate of candidates) {
    try {
      const tunnel = await ReverseTunnel.listen({ ...options, id, bindHost, port: candidate });
      return { ok: true, tunnel };
    } catch (error) {
      lastError = error as Error;
      if (!inUse(lastError)) break;
    }
  }
  if (lastError && !inUse(lastError)) {
    return {
      ok: false,
      code: "not_allowed",
      message: `cannot listen on ${bindHost}: ${lastError.message}`,
    };
  }
  const what = port !== 0 ? `port ${port}` : `every port tried (${MAX_ATTEMPTS})`;
  return { ok: false, code: "port_in_use", message: `${what} on ${bindHost} is in use` };
}

function pick(client: ClientConfig): number[] {
  const start = randomBytes(4).readUInt32BE(0);
  const ports: number[] = [];
  for (const port of allowedPorts(client.expose, start)) {
    ports.push(port);
    if (ports.length === MAX_ATTEMPTS) break;
  }
  return ports;
}

/** Deno names the error class; Node and Bun set an errno code. */
function inUse(error: Error & { code?: string }): boolean {
  return error.name === "AddrInUse" || error.code === "EADDRINUSE";
}
