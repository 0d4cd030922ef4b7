/**
 * Authorization decisions, as pure functions over a client's validated policy: which ports it may
 * expose, which targets it may forward to, which services it may offer or use. The daemon asks on
 * every request; nothing here does I/O, so every rule is unit-tested in isolation.
 *
 * @module
 */

import {
  type Cidr,
  cidrContains,
  cidrLast,
  classify,
  type HostKind,
  type IpClass,
  parseCidr,
  parseHost,
} from "./ip_ranges.ts";
import {
  formatIp,
  type IpAddress,
  ipEquals,
  parseIp,
  splitHostPort,
  unbracketHost,
} from "../../util/net/address.ts";

/** An inclusive port range; a single port has `from === to`. */
export interface PortRange {
  /** First port, 1 to 65535. */
  readonly from: number;
  /** Last port, `from` to 65535. */
  readonly to: number;
}

/** One `forward` allowlist entry, parsed. `text` is the entry as written, for logs and errors. */
export type ForwardRule =
  & { readonly text: string; readonly ports: PortRange }
  & (
    | { readonly kind: "name"; readonly name: string }
    | { readonly kind: "wildcard"; readonly suffix: string } // ".svc.local" for "*.svc.local"
    | { readonly kind: "ip"; readonly cidr: Cidr } // an IP literal is a full-length prefix
  );

/** What a client may expose (reverse tunnels: the daemon listens for it). */
export interface ExposePolicy {
  /** Allowed ports, sorted and merged. */
  readonly ports: readonly PortRange[];
  /**
   * May ask for port 0, meaning "the daemon picks a free one from `ports`": true unless the
   * config says `anyPort: false` (and false without ports).
   */
  readonly anyPort: boolean;
  /** Addresses the daemon may bind for this client. */
  readonly bindHosts: readonly IpAddress[];
  /**
   * Host names it may hold for HTTP tunnels: `*` (one label under the base domain), `*.NAME`
   * (one label under NAME) or exact names (see `host_names.ts`).
   */
  readonly hosts: readonly string[];
}

/** Named services a client may offer to, or use from, other clients (`*` suffix patterns). */
export interface ServicePolicy {
  /** Patterns of service names it may offer. */
  readonly offer: readonly string[];
  /** Patterns of service names it may use. */
  readonly use: readonly string[];
}

/** The part of a client's configuration that authorization reads. */
export interface ClientPolicy {
  /** The client's name, for messages. */
  readonly name: string;
  /** Reverse-tunnel permissions. */
  readonly expose: ExposePolicy;
  /** Forward allowlist, in config order. */
  readonly forward: readonly ForwardRule[];
  /** Service permissions. */
  readonly services: ServicePolicy;
}

/** Stable machine-readable reasons for a denial; clients and logs may match on them. */
export type DenyCode =
  | "not_allowed"
  | "invalid_target"
  | "port_not_allowed"
  | "bind_host_not_allowed"
  | "unspecified_denied"
  | "loopback_denied"
  | "metadata_denied"
  | "link_local_denied"
  | "multicast_denied"
  | "reserved_denied"
  | "invalid_service"
  | "resolve_failed";

/** A refusal: a stable code and a message for humans. */
export interface Denial {
  /** Always false. */
  readonly ok: false;
  /** Machine-readable reason. */
  readonly code: DenyCode;
  /** Human-readable explanation (never contains a token). */
  readonly message: string;
}

/** An authorization outcome. */
export type Decision = { readonly ok: true } | Denial;

const ALLOW: Decision = { ok: true };
const deny = (code: DenyCode, message: string): Denial => ({ ok: false, code, message });

/** Result of a parse: the value, or an error message for config validation. */
export type Parsed<T> = { ok: true; value: T } | { ok: false; error: string };

/**
 * Parses a port spec: a number, `"8000"`, `"8000-8100"`, or (when `wildcard`) `"*"` for all of
 * 1 to 65535. Port 0 is never a range member: for expose it is the separate "any port" flag.
 */
export function parsePortRange(spec: unknown, wildcard = false): Parsed<PortRange> {
  if (wildcard && spec === "*") return { ok: true, value: { from: 1, to: 65535 } };
  const text = typeof spec === "number" ? String(spec) : spec;
  const match = typeof text === "string" ? /^(\d{1,5})(?:-(\d{1,5}))?$/.exec(text) : null;
  if (!match) return { ok: false, error: `expected PORT, FROM-TO${wildcard ? " or *" : ""}` };
  const from = Number(match[1]), to = Number(match[2] ?? match[1]);
  if (from < 1 || to < 1 || from > 65535 || to > 65535) {
    return { ok: false, error: "port out of range (1 to 65535)" };
  }
  if (from > to) return { ok: false, error: "range start is after its end" };
  return { ok: true, value: { from, to } };
}

/** Sorts ranges and merges overlapping or adjacent ones, so port picking visits each port once. */
export function mergeRanges(ranges: readonly PortRange[]): PortRange[] {
  const sorted = [...ranges].sort((a, b) => a.from - b.from);
  const out: { from: number; to: number }[] = [];
  for (const r of sorted) {
    const last = out[out.length - 1];
    if (last && r.from <= last.to + 1) last.to = Math.max(last.to, r.to);
    else out.push({ ...r });
  }
  return out;
}

/**
 * Parses a `forward` entry: `HOST:PORTS`, `[IPv6]:PORTS`, `CIDR:PORTS` or `*.DOMAIN:PORTS`, where
 * PORTS is a port, a range or `*`. Refused: a bare `*` host (an open proxy), wildcards other than
 * one leading `*.` label, non-canonical IPv4 such as `127.1` (ambiguous to readers), and
 * `localhost` names (hostname rules never reach loopback; write `127.0.0.1:PORT`).
 */
export function parseForwardRule(text: string): Parsed<ForwardRule> {
  const fail = (error: string): Parsed<ForwardRule> => ({ ok: false, error });
  const parts = splitHostPort(text);
  if (!parts) return fail(text.startsWith("[") ? "expected [IPv6]:PORTS" : "expected HOST:PORTS");
  const { host, port: portText, bracketed } = parts;
  if (bracketed && !host.includes(":")) return fail("brackets are only for IPv6 addresses");
  if (!bracketed && host.includes(":")) {
    return fail("IPv6 addresses must be bracketed, as in [fd00::/8]:443");
  }
  const ports = parsePortRange(portText, true);
  if (!ports.ok) return fail(ports.error);
  const base = { text, ports: ports.value };
  if (host.includes("/")) {
    const cidr = parseCidr(host);
    return cidr.ok
      ? { ok: true, value: { ...base, kind: "ip", cidr: cidr.cidr } }
      : fail(cidr.error);
  }
  const literal = parseIp(host);
  if (literal) {
    const cidr = { ip: literal, prefix: literal.family === 4 ? 32 : 128 };
    return { ok: true, value: { ...base, kind: "ip", cidr } };
  }
  if (host === "*") {
    return fail("a bare * host would make an open proxy; list hosts, *.domain or CIDRs");
  }
  const wildcard = host.startsWith("*.");
  const rest = wildcard ? host.slice(2) : host;
  if (rest.includes("*")) return fail("only one leading *. wildcard label is allowed");
  const parsed = parseHost(rest);
  if (parsed.kind === "ip") return fail(`write the address canonically: ${formatIp(parsed.ip)}`);
  if (parsed.kind === "invalid" || rest.endsWith(".")) return fail("not a valid host name");
  if (parsed.name === "localhost" || parsed.name.endsWith(".localhost")) {
    return fail("host names never reach loopback; write 127.0.0.1:PORTS or [::1]:PORTS instead");
  }
  if (wildcard) {
    return { ok: true, value: { ...base, kind: "wildcard", suffix: "." + parsed.name } };
  }
  return { ok: true, value: { ...base, kind: "name", name: parsed.name } };
}

const inRange = (port: number, r: PortRange) => port >= r.from && port <= r.to;

/** `8000-8100, 9000` */
function describeRanges(ranges: readonly PortRange[]): string {
  return ranges.map((r) => r.from === r.to ? `${r.from}` : `${r.from}-${r.to}`).join(", ");
}

/**
 * May `client` have the daemon listen on `bindHost:port` for it? Port 0 asks the daemon to pick:
 * allowed when the client's config lists 0, and the caller then picks from {@link allowedPorts}.
 */
export function canExpose(client: ClientPolicy, bindHost: string, port: number): Decision {
  const { expose } = client;
  if (expose.ports.length === 0) {
    return deny("not_allowed", `client ${client.name} may not expose ports`);
  }
  const ip = parseIp(unbracketHost(bindHost));
  if (!ip || !expose.bindHosts.some((allowed) => ipEquals(allowed, ip))) {
    const allowed = expose.bindHosts.map((ip) => formatIp(ip)).join(", ") || "none";
    return deny(
      "bind_host_not_allowed",
      `bind address ${bindHost} not allowed (allowed: ${allowed})`,
    );
  }
  if (!Number.isInteger(port) || port < 0 || port > 65535) {
    return deny("port_not_allowed", `port ${port} is not a port number`);
  }
  if (port === 0) {
    return expose.anyPort ? ALLOW : deny(
      "port_not_allowed",
      `asking for any port (0) is not allowed for client ${client.name}: ask for a port in ` +
        `${describeRanges(expose.ports)}, or set its expose.anyPort to true`,
    );
  }
  if (expose.ports.some((r) => inRange(port, r))) return ALLOW;
  return deny(
    "port_not_allowed",
    `port ${port} is not in the client's allowed ports (${describeRanges(expose.ports)})`,
  );
}

/**
 * Every port `expose` allows, each once, starting at the `start`-th (wrapping around): the caller
 * of a port-0 request passes a random start and tries ports until one binds.
 */
export function* allowedPorts(expose: ExposePolicy, start = 0): Generator<number> {
  const ranges = mergeRanges(expose.ports);
  const total = ranges.reduce((n, r) => n + r.to - r.from + 1, 0);
  if (total === 0) return;
  const first = ((Math.trunc(start) % total) + total) % total;
  for (let k = 0; k < total; k++) {
    let index = (first + k) % total;
    for (const r of ranges) {
      const size = r.to - r.from + 1;
      if (index < size) {
        yield r.from + index;
        break;
      }
      index -= size;
    }
  }
}

/** A forward request that matched: the normalised target and every rule that covers it. */
export interface ForwardMatch {
  /** Always true. */
  readonly ok: true;
  /** The target host, normalised: an address (any spelling decoded) or a DNS name. */
  readonly target: Exclude<HostKind, { kind: "invalid" }>;
  /** The first matching rule. */
  readonly rule: ForwardRule;
  /** All matching rules in config order (an IP may be unlocked by a later, narrower rule). */
  readonly rules: readonly ForwardRule[];
}

function ruleCoversHost(rule: ForwardRule, target: ForwardMatch["target"]): boolean {
  if (target.kind === "ip") return rule.kind === "ip" && cidrContains(rule.cidr, target.ip);
  // Names only match name rules: a CIDR rule never makes the daemon resolve arbitrary names.
  if (rule.kind === "name") return rule.name === target.name;
  if (rule.kind === "wildcard") return target.name.endsWith(rule.suffix);
  return false;
}

/**
 * Which forward rules allow `host:port`? IP literals (in any spelling, see `parseHost`) match
 * IP/CIDR rules; names match exact and `*.` rules (`*.svc.local` covers `a.svc.local` and
 * `a.b.svc.local`, never `svc.local` itself). The resolved address must still pass
 * {@link checkResolvedTarget}.
 */
export function matchForward(
  client: ClientPolicy,
  host: string,
  port: number,
): ForwardMatch | Denial {
  if (!Number.isInteger(port) || port < 1 || port > 65535) {
    return deny("invalid_target", `port ${port} is not a port number (1 to 65535)`);
  }
  const target = parseHost(host);
  if (target.kind === "invalid") {
    return deny("invalid_target", `host ${JSON.stringify(host)}: ${target.reason}`);
  }
  const rules = client.forward.filter((rule) =>
    inRange(port, rule.ports) && ruleCoversHost(rule, target)
  );
  if (rules.length === 0) {
    return deny(
      "not_allowed",
      `forward to ${JSON.stringify(host)} port ${port} is not in the allowlist`,
    );
  }
  return { ok: true, target, rule: rules[0], rules };
}

const DENIED: Partial<Record<IpClass, [DenyCode, string]>> = {
  unspecified: ["unspecified_denied", "unspecified addresses"],
  loopback: ["loopback_denied", "loopback addresses"],
  metadata: ["metadata_denied", "cloud metadata addresses"],
  link_local: ["link_local_denied", "link-local addresses"],
  multicast: ["multicast_denied", "multicast addresses"],
  reserved: ["reserved_denied", "reserved and broadcast addresses"],
};

/**
 * May a connection under `rule` go to the resolved address `ip`? Private and public addresses may;
 * the special classes only under an IP/CIDR rule that contains `ip` and lies wholly inside that
 * class (`127.0.0.1:5000` or `127.0.0.0/8:*` unlock loopback, `0.0.0.0/0:*` does not; metadata
 * addresses only by naming them exactly). Hostname rules never unlock them, whatever DNS says.
 */
export function checkResolvedTarget(rule: ForwardRule, ip: IpAddress): Decision {
  if (rule.kind === "ip" && !cidrContains(rule.cidr, ip)) {
    return deny("not_allowed", `${formatIp(ip)} is outside rule ${rule.text}`);
  }
  const cls = classify(ip);
  const denied = DENIED[cls];
  if (!denied) return ALLOW;
  if (
    rule.kind === "ip" && classify(rule.cidr.ip) === cls && classify(cidrLast(rule.cidr)) === cls
  ) {
    return ALLOW;
  }
  const [code, what] = denied;
  return deny(
    code,
    `${formatIp(ip)}: ${what} need an explicit IP or CIDR rule (rule ${rule.text} is not one)`,
  );
}

const SERVICE_PATTERN = /^(?:\*|[a-z0-9][a-z0-9._-]{0,62}\*?)$/;
const SERVICE_NAME = /^[a-z0-9][a-z0-9._-]{0,62}$/;

/** True for a valid service name: lower-case letters, digits, `.`, `_`, `-`, up to 63 chars. */
export function isServiceName(name: string): boolean {
  return SERVICE_NAME.test(name);
}

/** True for a valid service pattern: a name, a name prefix followed by `*`, or `*`. */
export function isServicePattern(pattern: string): boolean {
  return SERVICE_PATTERN.test(pattern);
}

/** Does `pattern` (`ssh-box`, `ssh-*` or `*`) match the service `name`? */
export function matchService(pattern: string, name: string): boolean {
  return pattern.endsWith("*") ? name.startsWith(pattern.slice(0, -1)) : pattern === name;
}

function serviceDecision(client: ClientPolicy, name: string, verb: "offer" | "use"): Decision {
  if (typeof name !== "string" || !isServiceName(name)) {
    return deny("invalid_service", `${JSON.stringify(name)} is not a valid service name`);
  }
  if (client.services[verb].some((p) => matchService(p, name))) return ALLOW;
  return deny("not_allowed", `client ${client.name} may not ${verb} service ${name}`);
}

/** May `client` use (connect to) the service `name` offered by another client? */
export function canUseService(client: ClientPolicy, name: string): Decision {
  return serviceDecision(client, name, "use");
}

/** May `client` offer the service `name` to other clients? */
export function canOfferService(client: ClientPolicy, name: string): Decision {
  return serviceDecision(client, name, "offer");
}
