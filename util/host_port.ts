/**
 * Parsing of `HOST:PORT` command-line addresses.
 *
 * @module
 */

/** A hostname and port. */
export interface HostPort {
  /** Hostname or IP literal (IPv6 without brackets). */
  hostname: string;
  /** Port number, 0 to 65535. */
  port: number;
}

/**
 * Parses `HOST:PORT` or `[IPv6]:PORT`, throwing a readable error for anything else.
 *
 * @example
 * ```ts
 * import { parseHostPort } from "./host_port.ts";
 * console.assert(parseHostPort("[::1]:7000").hostname === "::1");
 * ```
 */
export function parseHostPort(text: string): HostPort {
  const match = /^(?:\[([0-9a-fA-F:.]+)\]|([^:\[\]]+)):(\d{1,5})$/.exec(text);
  const port = match ? Number(match[3]) : NaN;
  if (!match || port > 65535) throw new Error(`expected HOST:PORT or [IPv6]:PORT, got "${text}"`);
  return { hostname: match[1] ?? match[2], port };
}
