/**
 * Address policy without DNS: CIDR networks, the special ranges (loopback, link-local, cloud
 * metadata, …), the IPv4 forms hidden inside IPv6 addresses, the `inet_aton` spellings, and host
 * names as a client writes them. The forward policy decides on bytes, never on strings, so every
 * spelling of an address (compressed IPv6, IPv4-mapped IPv6, `2130706433`, `0x7f.1`, `0177.0.0.1`,
 * `127.1`) lands on the same classification. Parsing and formatting literals is
 * util/net/address.ts; networks (CIDR) are util/net/cidr.ts, re-exported here.
 *
 * @module
 */

import { type IpAddress, parseIPv6, unbracketHost } from "../../util/net/address.ts";
import { cidrContains, parseCidr } from "../../util/net/cidr.ts";

export {
  type Cidr,
  cidrContains,
  cidrLast,
  type CidrResult,
  parseCidr,
} from "../../util/net/cidr.ts";

/**
 * Parses IPv4 the way `inet_aton` (and so `getaddrinfo`, `ping`, many HTTP clients) does: one to
 * four parts, each decimal, octal (leading `0`) or hex (`0x`), the last filling the remaining
 * bytes. This is how a "hostname" like `0x7f.1` is recognised as 127.0.0.1 instead of resolved.
 */
export function parseInetAton(text: string): IpAddress | undefined {
  const parts = text.split(".");
  if (parts.length > 4) return undefined;
  const values: number[] = [];
  for (const part of parts) {
    let value: number;
    if (/^0[xX][0-9a-fA-F]*$/.test(part)) {
      value = part.length === 2 ? 0 : parseInt(part.slice(2), 16);
    } else if (/^0[0-7]*$/.test(part)) value = parseInt(part, 8);
    else if (/^[1-9]\d*$/.test(part)) value = Number(part);
    else return undefined;
    if (!(value <= 0xffffffff)) return undefined;
    values.push(value);
  }
  const last = values.pop()!;
  if (values.some((v) => v > 255) || last >= 2 ** (8 * (4 - values.length))) return undefined;
  let n = last;
  values.forEach((v, i) => (n += v * 2 ** (8 * (3 - i))));
  return {
    family: 4,
    bytes: new Uint8Array([n >>> 24, (n >>> 16) & 255, (n >>> 8) & 255, n & 255]),
  };
}

/**
 * What an address is, for the forward policy. `metadata` wins over `link_local` and `private`
 * (169.254.169.254 is both), so it can be denied even where link-local is allowed.
 */
export type IpClass =
  | "unspecified"
  | "loopback"
  | "metadata"
  | "link_local"
  | "multicast"
  | "reserved"
  | "private"
  | "public";

type Range = [string, IpClass];
const V4_RANGES: Range[] = [
  ["169.254.169.254/32", "metadata"], // AWS, GCP, Azure, OCI instance metadata
  ["100.100.100.200/32", "metadata"], // Alibaba Cloud instance metadata
  ["0.0.0.0/8", "unspecified"], // "this network": Linux connects 0.0.0.0 to the local host
  ["127.0.0.0/8", "loopback"],
  ["169.254.0.0/16", "link_local"],
  ["224.0.0.0/4", "multicast"],
  ["240.0.0.0/4", "reserved"], // incl. 255.255.255.255 broadcast
  ["10.0.0.0/8", "private"],
  ["172.16.0.0/12", "private"],
  ["192.168.0.0/16", "private"],
  ["100.64.0.0/10", "private"], // carrier-grade NAT, also used inside clouds
];
const V6_RANGES: Range[] = [
  ["fd00:ec2::254/128", "metadata"], // AWS instance metadata over IPv6
  ["::/128", "unspecified"],
  ["::1/128", "loopback"],
  ["fe80::/10", "link_local"],
  ["ff00::/8", "multicast"],
  ["fc00::/7", "private"], // unique local
  ["fec0::/10", "private"], // deprecated site-local
];
const compile = (ranges: Range[]) =>
  ranges.map(([text, cls]) => {
    const parsed = parseCidr(text);
    if (!parsed.ok) throw new Error(`bad built-in range ${text}`);
    return [parsed.cidr, cls] as const;
  });
const V4_TABLE = compile(V4_RANGES);
const V6_TABLE = compile(V6_RANGES);

/**
 * The IPv4 address carried inside an IPv6 one, for the forms a host or a gateway turns back into
 * IPv4: mapped `::ffff:0:0/96`, SIIT `::ffff:0:0:0/96`, deprecated compatible `::/96`, NAT64
 * `64:ff9b::/96` and `64:ff9b:1::/48` (RFC 6052), and 6to4 `2002::/16`.
 */
export function embeddedIPv4(ip: IpAddress): IpAddress | undefined {
  if (ip.family !== 6) return undefined;
  const b = ip.bytes;
  const zero = (from: number, to: number) => b.subarray(from, to).every((x) => x === 0);
  const v4 = (...idx: number[]): IpAddress => ({
    family: 4,
    bytes: new Uint8Array(idx.map((i) => b[i])),
  });
  if (zero(0, 10) && b[10] === 255 && b[11] === 255) return v4(12, 13, 14, 15);
  if (zero(0, 8) && b[8] === 255 && b[9] === 255 && zero(10, 12)) return v4(12, 13, 14, 15);
  if (zero(0, 12) && !(zero(12, 15) && b[15] <= 1)) return v4(12, 13, 14, 15); // not :: or ::1
  if (b[0] === 0 && b[1] === 0x64 && b[2] === 0xff && b[3] === 0x9b) {
    if (zero(4, 12)) return v4(12, 13, 14, 15);
    if (b[4] === 0 && b[5] === 1) return v4(6, 7, 9, 10);
  }
  if (b[0] === 0x20 && b[1] === 0x02) return v4(2, 3, 4, 5);
  return undefined;
}

/**
 * Classifies an address. IPv6 forms that carry an IPv4 address (see {@link embeddedIPv4}) take
 * the class of that IPv4 address, so `::ffff:127.0.0.1` is loopback and `64:ff9b::a9fe:a9fe` is
 * metadata.
 */
export function classify(ip: IpAddress): IpClass {
  if (ip.family === 6) {
    for (const [cidr, cls] of V6_TABLE) if (cidrContains(cidr, ip)) return cls;
    const inner = embeddedIPv4(ip);
    if (inner) return classify(inner);
    return "public";
  }
  for (const [cidr, cls] of V4_TABLE) if (cidrContains(cidr, ip)) return cls;
  return "public";
}

/** A target host after normalisation: an address, a DNS name, or something to refuse. */
export type HostKind =
  | { kind: "ip"; ip: IpAddress }
  | { kind: "name"; name: string }
  | { kind: "invalid"; reason: string };

const LABEL = /^[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?$/;
const NUMERIC_LABEL = /^(?:\d+|0x[0-9a-f]*)$/;

/**
 * Normalises a host a client asked for: lower case, one trailing dot dropped, `[v6]` unbracketed.
 * IP literals in any spelling (incl. `inet_aton` forms) become `ip`. A name whose last label is a
 * number but that is not a valid address is `invalid`, never resolved (as the WHATWG URL parser
 * does): a resolver might still read it as an address. Names must be plain ASCII DNS names.
 */
export function parseHost(host: string): HostKind {
  let h = host.toLowerCase();
  const unbracketed = unbracketHost(h);
  if (unbracketed !== h || h.includes(":")) {
    const ip = parseIPv6(unbracketed);
    return ip ? { kind: "ip", ip } : { kind: "invalid", reason: "not an IPv6 address" };
  }
  if (h.endsWith(".")) h = h.slice(0, -1);
  if (h === "" || h.length > 253) return { kind: "invalid", reason: "not a valid host name" };
  const labels = h.split(".");
  if (NUMERIC_LABEL.test(labels[labels.length - 1])) {
    const ip = parseInetAton(h);
    return ip ? { kind: "ip", ip } : { kind: "invalid", reason: "not a valid IPv4 address" };
  }
  if (!labels.every((l) => LABEL.test(l))) {
    return { kind: "invalid", reason: "not a valid host name" };
  }
  return { kind: "name", name: h };
}
