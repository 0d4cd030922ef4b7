/**
 * Addresses, one module for the whole repository: IP literals parsed to bytes and formatted back
 * (RFC 5952), and `host:port` parsed and formatted with IPv6 brackets. Policy decisions (ranges,
 * `inet_aton` spellings) live with the policy in daemon/; this is only the syntax.
 *
 * @example
 * ```ts
 * import { formatHostPort, parseHostPort, parseIp } from "./address.ts";
 * console.assert(parseHostPort("[::1]:7000").hostname === "::1");
 * console.assert(formatHostPort("::1", 7000) === "[::1]:7000");
 * console.assert(parseIp("10.0.0.1")?.family === 4);
 * ```
 *
 * @module
 */

/** An IP address as bytes: 4 for IPv4, 16 for IPv6. */
export interface IpAddress {
  /** 4 or 6. */
  readonly family: 4 | 6;
  /** Network-order bytes, 4 or 16 of them. */
  readonly bytes: Uint8Array;
}

const DECIMAL_OCTET = /^(?:0|[1-9]\d{0,2})$/;
const HEX_GROUP = /^[0-9a-fA-F]{1,4}$/;

/**
 * Parses a canonical dotted-quad IPv4 address (`a.b.c.d`, decimal, no leading zeros). Leading
 * zeros are refused rather than guessed: `010.0.0.1` is octal to `inet_aton` and decimal to others.
 */
export function parseIPv4(text: string): IpAddress | undefined {
  const parts = text.split(".");
  if (parts.length !== 4 || !parts.every((p) => DECIMAL_OCTET.test(p))) return undefined;
  const bytes = parts.map(Number);
  if (bytes.some((b) => b > 255)) return undefined;
  return { family: 4, bytes: new Uint8Array(bytes) };
}

/**
 * Parses an IPv6 literal: full, `::`-compressed, or with a dotted-quad tail (`::ffff:1.2.3.4`).
 * Zone ids (`fe80::1%eth0`) are refused: a zone picks an interface, which a client must not choose.
 */
export function parseIPv6(text: string): IpAddress | undefined {
  if (text.length > 45 || text.includes("%")) return undefined;
  let s = text;
  const lastColon = s.lastIndexOf(":");
  if (lastColon < 0) return undefined;
  if (s.includes(".", lastColon)) {
    const v4 = parseIPv4(s.slice(lastColon + 1));
    if (!v4) return undefined;
    const [a, b, c, d] = v4.bytes;
    s = `${s.slice(0, lastColon + 1)}${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
  }
  const gap = s.indexOf("::");
  if (gap !== s.lastIndexOf("::")) return undefined; // two gaps, or ":::"
  const split = (part: string) => (part === "" ? [] : part.split(":"));
  const head = gap < 0 ? s.split(":") : split(s.slice(0, gap));
  const tail = gap < 0 ? [] : split(s.slice(gap + 2));
  if (gap < 0 ? head.length !== 8 : head.length + tail.length > 7) return undefined;
  if (![...head, ...tail].every((g) => HEX_GROUP.test(g))) return undefined;
  const groups = [...head, ...Array(8 - head.length - tail.length).fill("0"), ...tail];
  const bytes = new Uint8Array(16);
  groups.forEach((g, i) => {
    const n = parseInt(g, 16);
    bytes[2 * i] = n >> 8;
    bytes[2 * i + 1] = n & 0xff;
  });
  return { family: 6, bytes };
}

/** Parses a canonical IPv4 or IPv6 literal (no brackets, no zone, no `inet_aton` shorthand). */
export function parseIp(text: string): IpAddress | undefined {
  return text.includes(":") ? parseIPv6(text) : parseIPv4(text);
}

/** The IPv4 address inside an IPv4-mapped IPv6 address (`::ffff:a.b.c.d`), else `ip` itself. */
export function unmapIPv4(ip: IpAddress): IpAddress {
  const b = ip.bytes;
  if (
    ip.family === 6 && b.subarray(0, 10).every((x) => x === 0) && b[10] === 255 && b[11] === 255
  ) {
    return { family: 4, bytes: b.slice(12) };
  }
  return ip;
}

/**
 * Formats an address canonically: RFC 5952 for IPv6, with mapped IPv4 as `::ffff:a.b.c.d` unless
 * `hexOnly` asks for hex groups throughout (grammars such as PROXY protocol v1 allow no dotted
 * tail).
 */
export function formatIp(ip: IpAddress, options?: { hexOnly?: boolean }): string {
  const b = ip.bytes;
  if (ip.family === 4) return b.join(".");
  if (!options?.hexOnly && unmapIPv4(ip) !== ip) return `::ffff:${b.subarray(12).join(".")}`;
  const groups = Array.from({ length: 8 }, (_, i) => ((b[2 * i] << 8) | b[2 * i + 1]).toString(16));
  let best = -1, bestLen = 1; // RFC 5952: only runs of two or more zero groups are compressed
  for (let i = 0; i < 8; i++) {
    let j = i;
    while (j < 8 && groups[j] === "0") j++;
    if (j - i > bestLen) [best, bestLen] = [i, j - i];
  }
  if (best < 0) return groups.join(":");
  return `${groups.slice(0, best).join(":")}::${groups.slice(best + bestLen).join(":")}`;
}

/** True when both are the same address (an IPv4-mapped IPv6 address equals its IPv4 form). */
export function ipEquals(a: IpAddress, b: IpAddress): boolean {
  const x = unmapIPv4(a), y = unmapIPv4(b);
  return x.family === y.family && x.bytes.every((v, i) => v === y.bytes[i]);
}

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
 * import { parseHostPort } from "./address.ts";
 * console.assert(parseHostPort("[::1]:7000").hostname === "::1");
 * ```
 */
export function parseHostPort(text: string): HostPort {
  const match = /^(?:\[([0-9a-fA-F:.]+)\]|([^:\[\]]+)):(\d{1,5})$/.exec(text);
  const port = match ? Number(match[3]) : NaN;
  if (!match || port > 65535) throw new Error(`expected HOST:PORT or [IPv6]:PORT, got "${text}"`);
  return { hostname: match[1] ?? match[2], port };
}

/** `HOST:PORT` cut in two by {@linkcode splitHostPort}, neither part judged yet. */
export interface HostPortParts {
  /** The host, without brackets. */
  host: string;
  /** Everything after the colon that ends the host (a port, a range, anything). */
  port: string;
  /** Whether the host was written in brackets (`[::1]:80`). */
  bracketed: boolean;
}

/**
 * Cuts `HOST:PORT` or `[IPv6]:PORT` at the colon that ends the host, judging neither part (the
 * caller parses them as it must: a port, a range of ports, a CIDR): undefined when there is no
 * such colon or a bracket is not closed right before one. Unbracketed, the host is everything
 * before the last colon, so `::1:80` gives host `::1`, which callers that need IPv6 in brackets
 * refuse by `bracketed`.
 *
 * @example
 * ```ts
 * import { splitHostPort } from "./address.ts";
 * console.assert(splitHostPort("[::1]:7000-7010")?.host === "::1");
 * console.assert(splitHostPort("example.com:443")?.port === "443");
 * console.assert(splitHostPort("example.com") === undefined);
 * ```
 */
export function splitHostPort(text: string): HostPortParts | undefined {
  if (text.startsWith("[")) {
    const close = text.indexOf("]");
    if (close < 0 || text[close + 1] !== ":") return undefined;
    return { host: text.slice(1, close), port: text.slice(close + 2), bracketed: true };
  }
  const colon = text.lastIndexOf(":");
  if (colon < 0) return undefined;
  return { host: text.slice(0, colon), port: text.slice(colon + 1), bracketed: false };
}

/** A host as it goes before `:port` or into a URL: IPv6 literals in brackets, others as they are. */
export function bracketHost(host: string): string {
  return host.includes(":") && !host.startsWith("[") ? `[${host}]` : host;
}

/**
 * A host as written inside a URL or before `:port` (`[::1]`) back to the bare literal (`::1`) that
 * sockets, resolvers and {@linkcode parseIp} take; anything not in brackets is returned as it is.
 */
export function unbracketHost(host: string): string {
  return host.startsWith("[") && host.endsWith("]") ? host.slice(1, -1) : host;
}

/**
 * Formats `host:port`, bracketing IPv6 literals (`[::1]:80`) so the port stays unambiguous; the
 * host alone when `port` is undefined, and `unknown` when there is no host (a socket that has
 * already closed), so every runtime reports peers the same way.
 */
export function formatHostPort(host: string | undefined, port?: number): string {
  if (!host) return "unknown";
  const shown = bracketHost(host);
  return port === undefined ? shown : `${shown}:${port}`;
}

/**
 * Whether a listener on `host` is reachable from this machine only: `localhost`, 127.0.0.0/8, or
 * `::1` (IPv4-mapped loopback included). Anything else, `0.0.0.0` and names included, is not.
 */
export function isLoopbackHost(host: string): boolean {
  const bare = unbracketHost(host);
  if (bare.toLowerCase() === "localhost") return true;
  const ip = parseIp(bare);
  if (!ip) return false;
  const b = unmapIPv4(ip).bytes;
  return b.length === 4 ? b[0] === 127 : b.subarray(0, 15).every((x) => x === 0) && b[15] === 1;
}
