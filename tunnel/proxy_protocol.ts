/**
 * The PROXY protocol (HAProxy, versions 1 and 2): a header a reverse tunnel's client writes to its
 * local service before any data, so the service sees the real visitor's address instead of the
 * tunnel client's loopback one. Only TCP over IPv4/IPv6 is produced; decoding (for tests and fake
 * services) also accepts what the spec lets other senders emit, and rejects the rest.
 *
 * Addresses are `host:port` or `[v6]:port`, as the transports report them (`transport/_address.ts`).
 * Anything else (`unknown`, host names, IPv6 zones are kept out of the header) is handled as the
 * spec says for addresses the sender cannot express: `PROXY UNKNOWN` in v1, the LOCAL command in
 * v2 (which receivers must accept and treat as "use the real connection's endpoints", where
 * PROXY + AF_UNSPEC may be rejected).
 *
 * Spec: https://www.haproxy.org/download/2.9/doc/proxy-protocol.txt
 *
 * @module
 */

import { formatAddress } from "../transport/_address.ts";

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

/** "PROXY" in US-ASCII: how every v1 header starts (spec §2.1). */
const V1_PREFIX = new TextEncoder().encode("PROXY");

/** Longest v1 line a receiver must accept, CRLF included (spec §2.1: 107 characters). */
export const PROXY_V1_MAX_LENGTH = 107;

/** v2 fixed part: signature, version/command, family/protocol, address length (spec §2.2). */
const V2_FIXED = 16;
const V2_VERSION = 0x20;
const V2_LOCAL = 0x00;
const V2_PROXY = 0x01;
const V2_TCP4 = 0x11;
const V2_TCP6 = 0x21;
/** Address block sizes for TCP: 2 addresses plus 2 two-byte ports. */
const V2_TCP4_LENGTH = 2 * 4 + 2 * 2;
const V2_TCP6_LENGTH = 2 * 16 + 2 * 2;

/** A PROXY header that is malformed: the spec says to drop such connections. */
export class ProxyProtocolError extends Error {
  /** Creates the error. */
  constructor(message: string) {
    super(message);
    this.name = "ProxyProtocolError";
  }
}

/** What {@linkcode decodeProxyHeader} found. */
export interface ProxyHeader {
  /** 1 (text) or 2 (binary). */
  version: 1 | 2;
  /**
   * The visitor's `host:port`, or undefined for `PROXY UNKNOWN`, the v2 LOCAL command, and v2
   * families this decoder does not map (UNSPEC, UDP, UNIX), all of which mean "use the real
   * connection's endpoints".
   */
  source: string | undefined;
  /** The address the visitor connected to, undefined in the same cases as `source`. */
  destination: string | undefined;
  /** Header bytes, TLVs included; the service's own data starts there. */
  length: number;
}

/** A parsed `host:port` with the address as network-order bytes (4 or 16). */
interface Endpoint {
  bytes: Uint8Array;
  port: number;
}

/** Parses a decimal without sign or leading zeros (the spec forbids them: octal confusion). */
function parseDecimal(text: string, max: number): number | undefined {
  if (!/^(0|[1-9][0-9]*)$/.test(text) || text.length > String(max).length) return undefined;
  const value = Number(text);
  return value <= max ? value : undefined;
}

/** Dotted-quad IPv4 in canonical form only: exactly four parts, no leading zeros. */
function parseIPv4(text: string): Uint8Array | undefined {
  const parts = text.split(".");
  if (parts.length !== 4) return undefined;
  const bytes = new Uint8Array(4);
  for (let i = 0; i < 4; i++) {
    const value = parseDecimal(parts[i], 255);
    if (value === undefined) return undefined;
    bytes[i] = value;
  }
  return bytes;
}

/** IPv6 text (with `::`, an optional dotted IPv4 tail) to 16 bytes. */
function parseIPv6(text: string): Uint8Array | undefined {
  const halves = text.split("::");
  if (halves.length > 2) return undefined;
  const groups = (half: string): number[] | undefined => {
    if (half === "") return [];
    const out: number[] = [];
    const parts = half.split(":");
    for (let i = 0; i < parts.length; i++) {
      const part = parts[i];
      if (i === parts.length - 1 && part.includes(".")) {
        // A dotted IPv4 tail (::ffff:192.0.2.1) fills the last two groups.
        const v4 = parseIPv4(part);
        if (!v4) return undefined;
        out.push((v4[0] << 8) | v4[1], (v4[2] << 8) | v4[3]);
      } else {
        if (!/^[0-9a-fA-F]{1,4}$/.test(part)) return undefined;
        out.push(parseInt(part, 16));
      }
    }
    return out;
  };
  const head = groups(halves[0]);
  const tail = halves.length === 2 ? groups(halves[1]) : [];
  if (!head || !tail) return undefined;
  const missing = 8 - head.length - tail.length;
  // Without "::" all 8 groups are spelled out; with it, it stands for at least one zero group.
  if (halves.length === 1 ? missing !== 0 : missing < 1) return undefined;
  const all = [...head, ...new Array<number>(missing).fill(0), ...tail];
  const bytes = new Uint8Array(16);
  all.forEach((group, i) => {
    bytes[2 * i] = group >> 8;
    bytes[2 * i + 1] = group & 0xff;
  });
  return bytes;
}

/**
 * Splits and parses `host:port` / `[v6]:port`. An IPv6 zone (`%eth0`) is dropped: the header has
 * no room for it, and it names an interface of our host that means nothing to the service.
 */
function parseEndpoint(address: string): Endpoint | undefined {
  let host: string;
  let portText: string;
  if (address.startsWith("[")) {
    const close = address.indexOf("]:");
    if (close < 0) return undefined;
    host = address.slice(1, close);
    portText = address.slice(close + 2);
    const zone = host.indexOf("%");
    if (zone >= 0) host = host.slice(0, zone);
  } else {
    const colon = address.lastIndexOf(":");
    if (colon < 0) return undefined;
    host = address.slice(0, colon);
    portText = address.slice(colon + 1);
    // An unbracketed host with a colon is ambiguous; our transports never produce one.
    if (host.includes(":")) return undefined;
  }
  const port = parseDecimal(portText, 65535);
  if (port === undefined) return undefined;
  const bytes = address.startsWith("[") ? parseIPv6(host) : parseIPv4(host);
  return bytes ? { bytes, port } : undefined;
}

/** True for ::ffff:a.b.c.d, how dual-stack sockets report IPv4 peers. */
function isV4Mapped(bytes: Uint8Array): boolean {
  if (bytes.length !== 16) return false;
  for (let i = 0; i < 10; i++) if (bytes[i] !== 0) return false;
  return bytes[10] === 0xff && bytes[11] === 0xff;
}

/** `e` as an IPv4 endpoint, unmapping ::ffff:a.b.c.d; undefined for real IPv6. */
function asV4(e: Endpoint): Endpoint | undefined {
  if (e.bytes.length === 4) return e;
  return isV4Mapped(e.bytes) ? { bytes: e.bytes.subarray(12), port: e.port } : undefined;
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

/** RFC 5952 text, but all-hex (no dotted tail): the v1 grammar allows only hex groups. */
function formatIPv6(bytes: Uint8Array): string {
  const groups: number[] = [];
  for (let i = 0; i < 16; i += 2) groups.push((bytes[i] << 8) | bytes[i + 1]);
  // The longest run of two or more zero groups becomes "::" (the first one on a tie).
  let bestStart = -1;
  let bestLength = 1;
  for (let i = 0; i < 8;) {
    if (groups[i] !== 0) {
      i++;
      continue;
    }
    let j = i;
    while (j < 8 && groups[j] === 0) j++;
    if (j - i > bestLength) {
      bestStart = i;
      bestLength = j - i;
    }
    i = j;
  }
  const hex = (list: number[]) => list.map((g) => g.toString(16)).join(":");
  if (bestStart < 0) return hex(groups);
  return `${hex(groups.slice(0, bestStart))}::${hex(groups.slice(bestStart + bestLength))}`;
}

function formatIP(bytes: Uint8Array): string {
  return bytes.length === 4 ? bytes.join(".") : formatIPv6(bytes);
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
    `PROXY ${family} ${formatIP(src.bytes)} ${formatIP(dst.bytes)} ${src.port} ${dst.port}\r\n`,
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
  const out = new Uint8Array(V2_FIXED + addressLength);
  const view = new DataView(out.buffer);
  out.set(PROXY_V2_SIGNATURE, 0);
  if (!pair) {
    out[12] = V2_VERSION | V2_LOCAL;
    out[13] = 0x00;
    return out;
  }
  const [src, dst] = pair;
  const size = src.bytes.length;
  out[12] = V2_VERSION | V2_PROXY;
  out[13] = size === 4 ? V2_TCP4 : V2_TCP6;
  view.setUint16(14, addressLength);
  out.set(src.bytes, V2_FIXED);
  out.set(dst.bytes, V2_FIXED + size);
  view.setUint16(V2_FIXED + 2 * size, src.port);
  view.setUint16(V2_FIXED + 2 * size + 2, dst.port);
  return out;
}

/** True when `bytes` is a (possibly partial) beginning of `prefix`, or starts with all of it. */
function matchesPrefix(bytes: Uint8Array, prefix: Uint8Array): boolean {
  const n = Math.min(bytes.length, prefix.length);
  for (let i = 0; i < n; i++) if (bytes[i] !== prefix[i]) return false;
  return true;
}

function endpointText(bytes: Uint8Array, port: number): string {
  return formatAddress(formatIP(bytes), port);
}

function decodeV1(bytes: Uint8Array): ProxyHeader | null {
  // The line must end in CRLF within 107 bytes; a lone CR or LF is invalid (spec §2.1).
  const limit = Math.min(bytes.length, PROXY_V1_MAX_LENGTH);
  let end = -1;
  for (let i = 0; i < limit; i++) {
    if (bytes[i] === 0x0a) throw new ProxyProtocolError("PROXY v1: LF without CR");
    if (bytes[i] === 0x0d) {
      if (i + 1 >= bytes.length) return null;
      if (bytes[i + 1] !== 0x0a) throw new ProxyProtocolError("PROXY v1: CR without LF");
      end = i;
      break;
    }
  }
  if (end < 0) {
    if (bytes.length < PROXY_V1_MAX_LENGTH) return null;
    throw new ProxyProtocolError(`PROXY v1: no CRLF in the first ${PROXY_V1_MAX_LENGTH} bytes`);
  }
  const length = end + 2;
  let line = "";
  for (let i = 0; i < end; i++) {
    if (bytes[i] < 0x20 || bytes[i] > 0x7e) throw new ProxyProtocolError("PROXY v1: not ASCII");
    line += String.fromCharCode(bytes[i]);
  }
  const fields = line.split(" ");
  if (fields[0] !== "PROXY") throw new ProxyProtocolError("PROXY v1: bad signature");
  // For UNKNOWN the rest of the line is to be ignored.
  if (fields[1] === "UNKNOWN") {
    return { version: 1, source: undefined, destination: undefined, length };
  }
  if (fields.length !== 6 || (fields[1] !== "TCP4" && fields[1] !== "TCP6")) {
    throw new ProxyProtocolError(`PROXY v1: malformed line ${JSON.stringify(line)}`);
  }
  const parse = fields[1] === "TCP4" ? parseIPv4 : (text: string) =>
    // The v1 grammar has no room for a zone, and an IPv4 literal is not an IPv6 one.
    text.includes("%") || !text.includes(":") ? undefined : parseIPv6(text);
  const src = parse(fields[2]);
  const dst = parse(fields[3]);
  const sport = parseDecimal(fields[4], 65535);
  const dport = parseDecimal(fields[5], 65535);
  if (!src || !dst || sport === undefined || dport === undefined) {
    throw new ProxyProtocolError(`PROXY v1: bad address in ${JSON.stringify(line)}`);
  }
  return {
    version: 1,
    source: endpointText(src, sport),
    destination: endpointText(dst, dport),
    length,
  };
}

function decodeV2(bytes: Uint8Array): ProxyHeader | null {
  if (bytes.length < V2_FIXED) return null;
  const versionCommand = bytes[12];
  if ((versionCommand & 0xf0) !== V2_VERSION) {
    throw new ProxyProtocolError(`PROXY v2: version ${versionCommand >> 4}`);
  }
  const command = versionCommand & 0x0f;
  if (command !== V2_LOCAL && command !== V2_PROXY) {
    throw new ProxyProtocolError(`PROXY v2: unassigned command ${command}`);
  }
  const family = bytes[13];
  if (family >> 4 > 3 || (family & 0x0f) > 2) {
    throw new ProxyProtocolError(`PROXY v2: unassigned family/protocol 0x${family.toString(16)}`);
  }
  const addressLength = (bytes[14] << 8) | bytes[15];
  const length = V2_FIXED + addressLength;
  if (bytes.length < length) return null;
  const unknown = { version: 2 as const, source: undefined, destination: undefined, length };
  // LOCAL: the address block (whatever its length) is skipped, not read.
  if (command === V2_LOCAL) return unknown;
  const size = family === V2_TCP4 ? 4 : family === V2_TCP6 ? 16 : 0;
  // UNSPEC, UDP and UNIX fall back to the real endpoints, as the spec allows receivers to.
  if (size === 0) return unknown;
  if (addressLength < 2 * size + 4) {
    throw new ProxyProtocolError(`PROXY v2: address block of ${addressLength} bytes is too short`);
  }
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const at = V2_FIXED;
  // Bytes past the addresses are TLVs; they are skipped with the header.
  return {
    version: 2,
    source: endpointText(bytes.slice(at, at + size), view.getUint16(at + 2 * size)),
    destination: endpointText(
      bytes.slice(at + size, at + 2 * size),
      view.getUint16(at + 2 * size + 2),
    ),
    length,
  };
}

/**
 * Decodes a v1 or v2 header at the start of `bytes`. Returns null while `bytes` is still a valid
 * beginning of a header (read more and call again with everything so far), and throws a
 * {@linkcode ProxyProtocolError} as soon as it cannot be one. The data after `length` bytes belongs
 * to the connection.
 */
export function decodeProxyHeader(bytes: Uint8Array): ProxyHeader | null {
  if (matchesPrefix(bytes, PROXY_V2_SIGNATURE)) {
    return bytes.length < PROXY_V2_SIGNATURE.length ? null : decodeV2(bytes);
  }
  if (matchesPrefix(bytes, V1_PREFIX)) {
    return bytes.length < V1_PREFIX.length ? null : decodeV1(bytes);
  }
  throw new ProxyProtocolError("not a PROXY protocol header");
}
