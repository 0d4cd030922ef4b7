/**
 * Reaching the daemon: picks the transport from the URL scheme and bounds the attempt in time.
 *
 * @module
 */

import type { Transport } from "../protocol/transport.ts";
import { connectTcp, connectTls } from "../transport/mod.ts";
import { connectWebSocket } from "../transport/ws.ts";
import { unbracketHost } from "../util/address.ts";

/** Connects to `url`: `tcp://host:port`, `tls://host:port`, `ws://…` or `wss://…`. */
export async function dialServer(
  url: string,
  options: { timeoutMs: number; caCerts?: string[] },
): Promise<Transport> {
  const parsed = new URL(url);
  let connecting: Promise<Transport>;
  switch (parsed.protocol) {
    case "tcp:":
      connecting = connectTcp({
        hostname: unbracketHost(parsed.hostname),
        port: Number(parsed.port),
      });
      break;
    case "tls:":
      connecting = connectTls({
        hostname: unbracketHost(parsed.hostname),
        port: Number(parsed.port),
        caCerts: options.caCerts,
      });
      break;
    case "ws:":
    case "wss:":
      connecting = connectWebSocket(url, { caCerts: options.caCerts });
      break;
    default:
      throw new Error(
        `unsupported URL scheme ${parsed.protocol} (use tcp://, tls://, ws:// or wss://)`,
      );
  }
  let timer: ReturnType<typeof setTimeout> | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () => reject(new Error(`no connection within ${options.timeoutMs} ms`)),
      options.timeoutMs,
    );
  });
  try {
    return await Promise.race([connecting, timeout]);
  } catch (error) {
    // A connection that completes after the deadline must not leak.
    connecting.then((late) => late.close(), () => {});
    throw error;
  } finally {
    clearTimeout(timer);
  }
}
