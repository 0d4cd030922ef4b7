/**
 * A SOCKS front's settings and their checks, apart from the front itself: the client's settings
 * check them at start, and the front's code (`socks.ts`) loads only when a front is started.
 *
 * @example
 * ```ts
 * import { socksOptionsProblem } from "./socks_options.ts";
 * console.assert(socksOptionsProblem({ listen: "127.0.0.1:1080" }) === undefined);
 * console.assert(socksOptionsProblem({ listen: "0.0.0.0:1080" }) !== undefined);
 * ```
 *
 * @module
 */

import { isLoopbackHost, parseHostPort } from "../../util/net/address.ts";

/** Where the SOCKS front listens unless told otherwise. */
export const DEFAULT_SOCKS_LISTEN = "127.0.0.1:1080";

/** How a SOCKS front is set up. */
export interface SocksOptions {
  /** `host:port` to listen on (port 0 = any). A non-loopback address needs credentials. */
  listen: string;
  /** With `password`: require RFC 1929 username/password authentication. */
  user?: string;
  /** The password of `user`. */
  password?: string;
  /** From accept to a complete request, greeting and credentials included. Default 10 s. */
  handshakeTimeoutMs?: number;
  /** From the request to the daemon's answer (connected, or refused). Default 30 s. */
  connectTimeoutMs?: number;
  /**
   * SOCKS connections at once, handshakes and UDP associations' control connections included;
   * more are closed at accept. Default 256.
   */
  maxConnections?: number;
  /** A UDP association with no datagram either way for this long is closed. Default 60 s. */
  udpIdleMs?: number;
  /** Targets one UDP association may send to at once; datagrams to more are dropped. Default 32. */
  udpMaxTargets?: number;
}

/** Why a listen address and credentials cannot serve, or undefined when they can. */
export function socksOptionsProblem(options: SocksOptions): string | undefined {
  let hostname: string;
  try {
    hostname = parseHostPort(options.listen).hostname;
  } catch (error) {
    return (error as Error).message;
  }
  const user = options.user ?? "", password = options.password ?? "";
  if ((user === "") !== (password === "")) {
    return "a SOCKS username needs a password and a password a username";
  }
  if (
    new TextEncoder().encode(user).length > 255 || new TextEncoder().encode(password).length > 255
  ) {
    return "a SOCKS username and password are at most 255 bytes each (RFC 1929)";
  }
  if (options.udpIdleMs !== undefined && !(options.udpIdleMs > 0)) {
    return `udpIdleMs must be a positive number of milliseconds, not ${options.udpIdleMs}`;
  }
  const targets = options.udpMaxTargets;
  if (targets !== undefined && !(Number.isInteger(targets) && targets >= 1)) {
    return `udpMaxTargets must be a whole number of at least 1, not ${targets}`;
  }
  if (user === "" && !isLoopbackHost(hostname)) {
    return `${options.listen} is not a loopback address: anyone who reaches it could use this ` +
      "client's forwards, so a SOCKS front there needs a username and password (or listen on " +
      "127.0.0.1)";
  }
  return undefined;
}
