/**
 * Address formatting shared by the socket adapters, so every runtime reports peers the same way.
 *
 * @module
 */

/** Formats `host:port`, bracketing IPv6 literals (`[::1]:80`) so the port stays unambiguous. */
export function formatAddress(host: string | undefined, port: number | undefined): string {
  if (!host) return "unknown";
  const shown = host.includes(":") && !host.startsWith("[") ? `[${host}]` : host;
  return port === undefined ? shown : `${shown}:${port}`;
}
