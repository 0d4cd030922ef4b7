/**
 * CIDR networks: parsed from `a.b.c.d/n` or `v6/n`, and tested against addresses. Here, below
 * every layer, because both the daemon's forward policy and a tunnel's visitor policy match
 * addresses against them.
 *
 * @example
 * ```ts
 * import { cidrContains, parseCidr } from "./cidr.ts";
 * import { parseIp } from "./address.ts";
 * const net = parseCidr("10.0.0.0/8");
 * console.assert(net.ok && cidrContains(net.cidr, parseIp("10.1.2.3")!));
 * ```
 *
 * @module
 */

import { formatIp, type IpAddress, parseIp, unmapIPv4 } from "./address.ts";

/** A network: the address with its host bits zero, and the prefix length. */
export interface Cidr {
  /** The network address (host bits zero). */
  readonly ip: IpAddress;
  /** Prefix length, 0 to 32 (IPv4) or 0 to 128 (IPv6). */
  readonly prefix: number;
}

/** Result of {@link parseCidr}: the network, or why the text is not one. */
export type CidrResult = { ok: true; cidr: Cidr } | { ok: false; error: string };

/**
 * Parses `a.b.c.d/n` or `v6/n` (canonical literals only). Host bits must be zero, because
 * `10.0.0.1/8` usually means the writer expected something narrower than what it allows.
 */
export function parseCidr(text: string): CidrResult {
  const slash = text.indexOf("/");
  if (slash < 0) return { ok: false, error: "expected ADDRESS/PREFIX" };
  const ip = parseIp(text.slice(0, slash));
  if (!ip) return { ok: false, error: "not an IP address" };
  const bits = ip.family === 4 ? 32 : 128;
  const prefixText = text.slice(slash + 1);
  const prefix = Number(prefixText);
  if (!/^\d{1,3}$/.test(prefixText) || prefix > bits) {
    return { ok: false, error: `prefix must be 0 to ${bits}` };
  }
  const network = maskBytes(ip.bytes, prefix);
  if (!network.every((v, i) => v === ip.bytes[i])) {
    const fixed = formatIp({ family: ip.family, bytes: network });
    return { ok: false, error: `host bits set; did you mean ${fixed}/${prefix}?` };
  }
  return { ok: true, cidr: { ip, prefix } };
}

/** The canonical text of a network (`10.0.0.0/8`, `2001:db8::/32`). */
export function formatCidr(cidr: Cidr): string {
  return `${formatIp(cidr.ip)}/${cidr.prefix}`;
}

function maskBytes(bytes: Uint8Array, prefix: number): Uint8Array {
  return bytes.map((v, i) => v & (0xff << Math.max(0, 8 - Math.max(0, prefix - 8 * i))) & 0xff);
}

/** The mapped form `::ffff:a.b.c.d` of an IPv4 address, so it can be compared to IPv6 networks. */
function mapIPv4(ip: IpAddress): IpAddress {
  if (ip.family === 6) return ip;
  const bytes = new Uint8Array(16);
  bytes[10] = bytes[11] = 255;
  bytes.set(ip.bytes, 12);
  return { family: 6, bytes };
}

/**
 * True when `cidr` contains `ip`. An IPv4-mapped IPv6 address matches IPv4 networks (and an IPv4
 * address matches `::ffff:0:0/96`-style networks), since the kernel dials both the same way.
 */
export function cidrContains(cidr: Cidr, ip: IpAddress): boolean {
  const target = cidr.ip.family === 4 ? unmapIPv4(ip) : mapIPv4(ip);
  if (target.family !== cidr.ip.family) return false;
  const masked = maskBytes(target.bytes, cidr.prefix);
  return masked.every((v, i) => v === cidr.ip.bytes[i]);
}

/** The last address of a network (all host bits set). */
export function cidrLast(cidr: Cidr): IpAddress {
  const bytes = cidr.ip.bytes.map((v, i) =>
    v | (~(0xff << Math.max(0, 8 - Math.max(0, cidr.prefix - 8 * i))) & 0xff)
  );
  return { family: cidr.ip.family, bytes };
}

/**
 * The networks both lists contain, as few as they are. Two networks are either nested or apart,
 * so each pair meets in the smaller one or not at all.
 */
export function intersectCidrs(a: readonly Cidr[], b: readonly Cidr[]): Cidr[] {
  const out: Cidr[] = [];
  const seen = new Set<string>();
  const add = (c: Cidr) => {
    const key = formatCidr(c);
    if (!seen.has(key)) (seen.add(key), out.push(c));
  };
  for (const x of a) {
    for (const y of b) {
      if (x.ip.family !== y.ip.family) continue;
      if (x.prefix <= y.prefix && cidrContains(x, y.ip)) add(y);
      else if (y.prefix < x.prefix && cidrContains(y, x.ip)) add(x);
    }
  }
  return out;
}
