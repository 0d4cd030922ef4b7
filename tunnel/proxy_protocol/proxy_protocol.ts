/**
 * The PROXY protocol (HAProxy, versions 1 and 2): a header a reverse tunnel's client writes to its
 * local service before any data, so the service sees the real visitor's address instead of the
 * tunnel client's loopback one. Only TCP over IPv4/IPv6 is produced. (The decoder is
 * `proxy_protocol_decoder.ts`, beside it.)
 *
 * Addresses are `host:port` or `[v6]:port`, as the transports report them (`formatHostPort` in
 * util/net/address.ts). Anything else (`unknown`, host names, IPv6 zones are kept out of the
 * header) is handled as the spec says for addresses the sender cannot express: `PROXY UNKNOWN` in
 * v1, the LOCAL command in v2 (which receivers must accept and treat as "use the real connection's
 * endpoints", where PROXY + AF_UNSPEC may be rejected).
 *
 * Spec: https://www.haproxy.org/download/2.9/doc/proxy-protocol.txt
 *
 * @module
 */

import {
  formatIp,
  parseIPv4,
  parseIPv6,
  splitHostPort,
  unmapIPv4,
} from "../../util/net/address.ts";

/** The 12 bytes every v2 header starts with (spec §2.2). */
export const PROXY_V2_SIGNATURE: Uint8Array = new Uint8Array([
  0x0d,
  0x0a,
  0x0d,
  0x0a,
  0x00,
  0x0d,
  0x0a,
  0x51,
  0x55,
  0x49,
  0x54,
  0x0a,
]);

/** v2 fixed part: signature, version/command, family/protocol, address length (spec §2.2). */
export const PROXY_V2_FIXED = 16;
/** The v2 version nibble. */
export const PROXY_V2_VERSION = 0x20;
/** The v2 LOCAL command: use the real connection's endpoints. */
export const PROXY_V2_LOCAL = 0x00;
/** The v2 PROXY command: the addresses follow. */
export const PROXY_V2_PROXY = 0x01;
/** The v2 family/protocol byte for TCP over IPv4. */
export const PROXY_V2_TCP4 = 0x11;
/** The v2 family/protocol byte for TCP over IPv6. */
export const PROXY_V2_TCP6 = 0x21;
/** Address block sizes for TCP: 2 addresses plus 2 two-byte ports. */
const V2_TCP4_LENGTH = 2 * 4 + 2 * 2;
const V2_TCP6_LENGTH = 2 * 16 + 2 * 2;

/** A parsed `host:port` with the address as network-order bytes (4 or 16). */
interface Endpoint {
  bytes: Uint8Array;
  port: number;
}

/** Parses a decimal without sign or leading zeros (the spec forbids them: octal confusion). */
export function parseDecimal(text: string, max: number): number | undefined {
  if (!/^(0|[1-9][0-9]*)$/.test(text) || text.length > String(max).length) return undefined;
  const value = Number(text);
  return value <= max ? value : undefined;
}

/**
 * Splits and parses `host:port` / `[v6]:port`. An IPv6 zone (`%eth0`) is dropped: the header has
 * no room for it, and it names an interface of our host that means nothing to the service.
 */
function parseEndpoint(address: string): Endpoint | undefined {
  const parts = splitHostPort(address);
  if (!parts) return undefined;
  let host = parts.host;
  if (parts.bracketed) {
    const zone = host.indexOf("%");
    if (zone >= 0) host = host.slice(0, zone);
  } else if (host.includes(":")) {
    // An unbracketed host with a colon is ambiguous; our transports never produce one.
    return undefined;
  }
  const port = parseDecimal(parts.port, 65535);
  if (port === undefined) return undefined;
  const ip = address.startsWith("[") ? parseIPv6(host) : parseIPv4(host);
  return ip ? { bytes: ip.bytes, port } : undefined;
}

/** `e` as an IPv4 endpoint, unmapping ::ffff:a.b.c.d; undefined for real IPv6. */
function asV4(e: Endpoint): Endpoint | undefined {
  if (e.bytes.length === 4) return e;
  const v4 = unmapIPv4({ family: 6, bytes: e.bytes });
  return v4.family === 4 ? { bytes: v4.bytes, port: e.port } : undefined;
}

/**
 * The pair to put in a header, or undefined when it cannot be expressed. Both IPv4 (IPv4-mapped
 * counting as IPv4, so a dual-stack listener's IPv4 visitor shows up as the IPv4 address it is)
 * gives 4-byte addresses; both IPv6 as written gives 16-byte ones; a plain IPv4 with a real IPv6
 * is a mixed family, which the header cannot carry.
 */
function endpoints(source: string, destination: string): [Endpoint, Endpoint] | undefined {
  const src = parseEndpoint(source);
  const dst = parseEndpoint(destination);
  if (!src || !dst) return undefined;
  const src4 = asV4(src);
  const dst4 = asV4(dst);
  if (src4 && dst4) return [src4, dst4];
  if (src.bytes.length === 16 && dst.bytes.length === 16) return [src, dst];
  return undefined;
}

/** An address as the v1 grammar writes it: dotted IPv4, or RFC 5952 IPv6 in hex groups only. */
export function formatProxyIp(bytes: Uint8Array): string {
  return formatIp({ family: bytes.length === 4 ? 4 : 6, bytes }, { hexOnly: true });
}

/**
 * A v1 (text) header: `PROXY TCP4 <src> <dst> <sport> <dport>\r\n` (TCP6 for IPv6), or
 * `PROXY UNKNOWN\r\n` when either address is not an IP endpoint or the families differ.
 *
 * @example
 * ```ts ignore
 * encodeProxyV1("192.168.0.1:56324", "192.168.0.11:443");
 * // "PROXY TCP4 192.168.0.1 192.168.0.11 56324 443\r\n"
 * ```
 */
export function encodeProxyV1(source: string, destination: string): Uint8Array {
  const pair = endpoints(source, destination);
  if (!pair) return new TextEncoder().encode("PROXY UNKNOWN\r\n");
  const [src, dst] = pair;
  const family = src.bytes.length === 4 ? "TCP4" : "TCP6";
  return new TextEncoder().encode(
    `PROXY ${family} ${formatProxyIp(src.bytes)} ${
      formatProxyIp(dst.bytes)
    } ${src.port} ${dst.port}\r\n`,
  );
}

/**
 * A v2 (binary) header: signature, 0x21 (v2, PROXY), 0x11 (TCP/IPv4) or 0x21 (TCP/IPv6), the
 * big-endian address length, then source address, destination address, source port, destination
 * port, all in network order. When the addresses cannot be expressed, a LOCAL header (0x20, family
 * 0x00, length 0) tells the receiver to use the real connection's endpoints.
 */
export function encodeProxyV2(source: string, destination: string): Uint8Array {
  const pair = endpoints(source, destination);
  const addressLength = !pair ? 0 : pair[0].bytes.length === 4 ? V2_TCP4_LENGTH : V2_TCP6_LENGTH;
  const out = new Uint8Array(PROXY_V2_FIXED + addressLength);
  const view = new DataView(out.buffer);
  out.set(PROXY_V2_SIGNATURE, 0);
  if (!pair) {
    out[12] = PROXY_V2_VERSION | PROXY_V2_LOCAL;
    out[13] = 0x00;
    return out;
  }
  const [src, dst] = pair;
  const size = src.bytes.length;
  out[12] = PROXY_V2_VERSION | PROXY_V2_PROXY;
  out[13] = size === 4 ? PROXY_V2_TCP4 : PROXY_V2_TCP6;
  view.setUint16(14, addressLength);
  out.set(src.bytes, PROXY_V2_FIXED);
  out.set(dst.bytes, PROXY_V2_FIXED + size);
  view.setUint16(PROXY_V2_FIXED + 2 * size, src.port);
  view.setUint16(PROXY_V2_FIXED + 2 * size + 2, dst.port);
  return out;
}
