/**
 * A PROXY protocol (v1 and v2) decoder, the receiving side of what `proxy_protocol.ts` sends:
 * the daemon reads the header a trusted front (`trustedProxies`) writes before a visitor's bytes,
 * and the tests and fake services read what the client sends. It accepts what the spec lets other
 * senders emit and rejects the rest.
 *
 * @module
 */

import { formatHostPort, parseIPv4, parseIPv6 } from "../../util/net/address.ts";
import {
  formatProxyIp,
  parseDecimal,
  PROXY_V2_FIXED,
  PROXY_V2_LOCAL,
  PROXY_V2_PROXY,
  PROXY_V2_SIGNATURE,
  PROXY_V2_TCP4,
  PROXY_V2_TCP6,
  PROXY_V2_VERSION,
} from "./proxy_protocol.ts";

/** "PROXY" in US-ASCII: how every v1 header starts (spec §2.1). */
const PROXY_V1_PREFIX = new TextEncoder().encode("PROXY");

/** Longest v1 line a receiver must accept, CRLF included (spec §2.1: 107 characters). */
export const PROXY_V1_MAX_LENGTH = 107;

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

/** True when `bytes` is a (possibly partial) beginning of `prefix`, or starts with all of it. */
function matchesPrefix(bytes: Uint8Array, prefix: Uint8Array): boolean {
  const n = Math.min(bytes.length, prefix.length);
  for (let i = 0; i < n; i++) if (bytes[i] !== prefix[i]) return false;
  return true;
}

function endpointText(bytes: Uint8Array, port: number): string {
  return formatHostPort(formatProxyIp(bytes), port);
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
  const parse = (text: string) =>
    fields[1] === "TCP4"
      ? parseIPv4(text)?.bytes
      // The v1 grammar has no room for a zone, and an IPv4 literal is not an IPv6 one.
      : text.includes("%") || !text.includes(":")
      ? undefined
      : parseIPv6(text)?.bytes;
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
  if (bytes.length < PROXY_V2_FIXED) return null;
  const versionCommand = bytes[12];
  if ((versionCommand & 0xf0) !== PROXY_V2_VERSION) {
    throw new ProxyProtocolError(`PROXY v2: version ${versionCommand >> 4}`);
  }
  const command = versionCommand & 0x0f;
  if (command !== PROXY_V2_LOCAL && command !== PROXY_V2_PROXY) {
    throw new ProxyProtocolError(`PROXY v2: unassigned command ${command}`);
  }
  const family = bytes[13];
  if (family >> 4 > 3 || (family & 0x0f) > 2) {
    throw new ProxyProtocolError(`PROXY v2: unassigned family/protocol 0x${family.toString(16)}`);
  }
  const addressLength = (bytes[14] << 8) | bytes[15];
  const length = PROXY_V2_FIXED + addressLength;
  if (bytes.length < length) return null;
  const unknown = { version: 2 as const, source: undefined, destination: undefined, length };
  // LOCAL: the address block (whatever its length) is skipped, not read.
  if (command === PROXY_V2_LOCAL) return unknown;
  const size = family === PROXY_V2_TCP4 ? 4 : family === PROXY_V2_TCP6 ? 16 : 0;
  // UNSPEC, UDP and UNIX fall back to the real endpoints, as the spec allows receivers to.
  if (size === 0) return unknown;
  if (addressLength < 2 * size + 4) {
    throw new ProxyProtocolError(`PROXY v2: address block of ${addressLength} bytes is too short`);
  }
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const at = PROXY_V2_FIXED;
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
  if (matchesPrefix(bytes, PROXY_V1_PREFIX)) {
    return bytes.length < PROXY_V1_PREFIX.length ? null : decodeV1(bytes);
  }
  throw new ProxyProtocolError("not a PROXY protocol header");
}
