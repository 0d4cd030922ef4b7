/**
 * Reaching the daemon: picks the transport from the URL scheme and bounds the attempt in time.
 *
 * A host name that resolves to several addresses of one family (one DNS name for the nodes of a
 * cluster) is dialed at one of them, chosen by the caller's `turn`, so that successive attempts,
 * and the sessions of a client that keeps several, go to different nodes. The name still names
 * the server: TLS checks the certificate against it and WebSocket sends it as `Host`. A name with
 * one address (or one per family, like `localhost`) is dialed as before, by name.
 *
 * @module
 */

import type { Transport } from "../../protocol/transport.ts";
import { connectTcp, connectTls, loadTcp } from "../../transport/tcp.ts";
import { parseIp, unbracketHost } from "../../util/net/address.ts";

/** What {@linkcode dialServer} reached. */
export interface Dialed {
  /** The connection. */
  transport: Transport;
  /** How many addresses the URL's host name offered (1 for an address or a single name). */
  addresses: number;
  /** The address dialed, when the name had several. */
  address?: string;
}

/** Resolves a host name to its addresses, in the order to prefer them. */
export type HostResolver = (host: string) => Promise<string[]>;

/** The system resolver (`getaddrinfo`, so `/etc/hosts` counts), every address. */
export const systemResolver: HostResolver = async (host) => {
  // Loaded when a name is resolved, not at start (node:dns costs Deno's start time).
  const { lookup } = await import("node:dns/promises");
  return (await lookup(host, { all: true })).map((a) => a.address);
};

/** 4 or 6 for an IP literal, 0 for anything else (as node:net's `isIP`). */
function ipFamily(text: string): number {
  return parseIp(text)?.family ?? 0;
}

/**
 * The addresses to rotate over for `host`: those of the family the resolver puts first, when
 * there are several; otherwise none (dial the name itself).
 *
 * @example
 * ```ts
 * import { serverAddresses } from "./dial_server.ts";
 * const resolve = () => Promise.resolve(["127.0.0.1", "::1"]); // localhost: one per family
 * console.assert((await serverAddresses("localhost", resolve)).length === 0);
 * ```
 */
export async function serverAddresses(
  host: string,
  resolve: HostResolver = systemResolver,
): Promise<string[]> {
  if (ipFamily(host) !== 0) return [];
  const all = await resolve(host);
  const family = ipFamily(all[0] ?? "");
  const same = [...new Set(all.filter((a) => ipFamily(a) === family))];
  return same.length > 1 ? same : [];
}

/** Connects to `url`: `tcp://host:port`, `tls://host:port`, `ws://…` or `wss://…`. */
export async function dialServer(
  url: string,
  options: { timeoutMs: number; caCerts?: string[]; turn?: number; resolve?: HostResolver },
): Promise<Dialed> {
  const parsed = new URL(url);
  const host = unbracketHost(parsed.hostname);
  let timer: ReturnType<typeof setTimeout> | undefined;
  let timeout: Promise<never> | undefined;
  const arm = () =>
    timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(
        () => reject(new Error(`no connection within ${options.timeoutMs} ms`)),
        options.timeoutMs,
      );
    });
  // An IP literal needs no lookup: its connect starts first and the deadline is armed while the
  // kernel does the handshake (on Deno a process's first timer loads part of the runtime's Node
  // layer, some milliseconds of every client's start).
  const literal = ipFamily(host) !== 0;
  let addresses: string[] = [];
  if (!literal) {
    try {
      // A resolver failure is left to the dial below, which reports it as today.
      addresses = await Promise.race([
        serverAddresses(host, options.resolve).catch(() => []),
        arm(),
      ]);
    } catch (error) {
      clearTimeout(timer);
      throw error;
    }
  }
  const address = addresses.length > 0
    ? addresses[(options.turn ?? 0) % addresses.length]
    : undefined;
  // The adapter first, so the connect below starts before the deadline is armed.
  if (literal) await loadTcp();
  let connecting: Promise<Transport>;
  switch (parsed.protocol) {
    case "tcp:":
      connecting = connectTcp({ hostname: address ?? host, port: Number(parsed.port) });
      break;
    case "tls:":
      connecting = connectTls({
        hostname: address ?? host,
        port: Number(parsed.port),
        caCerts: options.caCerts,
        serverName: host,
      });
      break;
    case "ws:":
    case "wss:":
      // The WebSocket code loads only for a ws:// or wss:// server.
      connecting = import("../../transport/ws/mod.ts").then(({ connectWebSocket }) =>
        connectWebSocket(url, { caCerts: options.caCerts, address })
      );
      break;
    default:
      clearTimeout(timer);
      throw new Error(
        `unsupported URL scheme ${parsed.protocol} (use tcp://, tls://, ws:// or wss://)`,
      );
  }
  try {
    const transport = await Promise.race([connecting, timeout ?? arm()]);
    return { transport, addresses: Math.max(1, addresses.length), address };
  } catch (error) {
    // A connection that completes after the deadline must not leak.
    connecting.then((late) => late.close(), () => {});
    throw error;
  } finally {
    clearTimeout(timer);
  }
}
