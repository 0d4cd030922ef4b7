/**
 * Validation of a raw configuration document: every problem is reported with its JSON path at
 * once, and unknown keys are errors, because a typo such as `"fowrard"` must never silently fall
 * back to a default.
 *
 * @module
 */

import {
  formatHostPort,
  type HostPort,
  type IpAddress,
  parseHostPort,
  parseIp,
} from "../../util/net/address.ts";
import { classify, parseHost } from "../policy/ip_ranges.ts";
import { hostName } from "../../util/host/host.ts";
import type {
  AcmeConfig,
  ClientConfig,
  ClusterConfig,
  GroupConfig,
  HttpConfig,
  Issue,
  Limits,
  ListenConfig,
  LogConfig,
  TlsConfig,
  ValidationResult,
} from "./types.ts";
import { embeddedDefaults } from "./defaults.ts";
import { mergeLayers, setOwn, suggest } from "./merge.ts";
import { isObject } from "../../util/parse/is_object.ts";
import {
  type ClientPolicy,
  type ForwardRule,
  isServicePattern,
  mergeRanges,
  parseForwardRule,
  parsePortRange,
  type PortRange,
} from "../policy/policy.ts";
import { hashToken, isTokenHash, MIN_TOKEN_LENGTH } from "./token_hash.ts";
import { isHostName } from "../policy/host_names.ts";
import {
  MAX_BANDWIDTH,
  parseVisitorPolicy,
  type VisitorPolicy,
} from "../../tunnel/policy/visitor_policy.ts";
import { formatCidr, parseCidr } from "../../util/net/cidr.ts";
import { parseIdentityProvider } from "../policy/identity_providers.ts";

const TOP_KEYS = [
  "$schema",
  "listen",
  "tls",
  "dataDir",
  "shutdownGraceMs",
  "limits",
  "log",
  "adminToken",
  "clients",
  "groups",
  "cluster",
  "http",
  "visitors",
  "trustedProxies",
  "identityProviders",
];
const LISTEN_KEYS = ["tcp", "websocket", "websocketPath", "admin", "http", "https"];
const LIMIT_BOUNDS: Record<keyof Limits, [number, number]> = {
  sessions: [1, 1_000_000],
  streamsPerSession: [1, 1_000_000],
  tunnelsPerClient: [0, 65535],
  visitorsPerTunnel: [1, 1_000_000],
  visitorsPerClient: [1, 1_000_000],
  dialTimeoutMs: [1, 600_000],
  handshakeTimeoutMs: [1, 600_000],
  pendingHandshakes: [1, 1_000_000],
  pendingHandshakesPerSource: [1, 1_000_000],
  httpConnections: [1, 1_000_000],
  httpResponseTimeoutMs: [1, 3_600_000],
  idleTimeoutMs: [0, 2 ** 31 - 1],
  maxWebSocketMessage: [1024, 256 * 1024 * 1024],
  keepAliveIntervalMs: [100, 3_600_000],
  keepAliveTimeoutMs: [100, 600_000],
  streamWindow: [256 * 1024, 64 * 1024 * 1024],
  udpFlowIdleMs: [100, 3_600_000],
  udpFlowsPerTunnel: [1, 65_536],
};
const CLIENT_KEYS = [
  "name",
  "token",
  "expose",
  "forward",
  "services",
  "limits",
  "groups",
  "visitors",
];
const CLIENT_NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;

/** Collects issues while walking the raw document; each check returns undefined on failure. */
class Walker {
  readonly errors: Issue[] = [];
  readonly warnings: Issue[] = [];

  error(path: string, message: string): undefined {
    this.errors.push({ path, message });
    return undefined;
  }

  warn(path: string, message: string): void {
    this.warnings.push({ path, message });
  }

  /** A plain object whose keys are all in `keys`; each unknown key is its own error. */
  object(
    value: unknown,
    path: string,
    keys: readonly string[],
  ): Record<string, unknown> | undefined {
    if (!isObject(value)) return this.error(path, `${show(value)} must be an object`);
    for (const key of Object.keys(value)) {
      if (!keys.includes(key)) this.error(at(path, key), `unknown key${suggest(key, keys)}`);
    }
    return value;
  }

  array(value: unknown, path: string): unknown[] | undefined {
    return Array.isArray(value) ? value : this.error(path, `${show(value)} must be an array`);
  }

  string(value: unknown, path: string): string | undefined {
    if (typeof value === "string" && value !== "") return value;
    return this.error(path, `${show(value)} must be a non-empty string`);
  }

  integer(value: unknown, path: string, [min, max]: [number, number]): number | undefined {
    if (typeof value === "number" && Number.isInteger(value) && value >= min && value <= max) {
      return value;
    }
    return this.error(path, `${show(value)} must be an integer from ${min} to ${max}`);
  }

  oneOf<T extends string>(value: unknown, path: string, options: readonly T[]): T | undefined {
    if (options.includes(value as T)) return value as T;
    return this.error(
      path,
      `${show(value)} must be one of ${options.map((o) => `"${o}"`).join(", ")}`,
    );
  }
}

const show = (value: unknown): string => {
  const text = JSON.stringify(value) ?? String(value);
  return text.length > 80 ? text.slice(0, 77) + "..." : text;
};
const at = (path: string, key: string | number): string =>
  typeof key === "number" ? `${path}[${key}]` : path ? `${path}.${key}` : key;

function isLoopbackHost(host: string): boolean {
  const parsed = parseHost(host);
  if (parsed.kind === "name") return parsed.name === "localhost";
  return parsed.kind === "ip" && classify(parsed.ip) === "loopback";
}

function listenAddress(w: Walker, value: unknown, path: string): HostPort | null | undefined {
  if (value === null) return null;
  if (typeof value !== "string") return w.error(path, `${show(value)} must be "HOST:PORT" or null`);
  let hp: HostPort;
  try {
    hp = parseHostPort(value);
  } catch {
    return w.error(path, `${show(value)} must be HOST:PORT or [IPv6]:PORT (port 0 to 65535)`);
  }
  if (parseHost(hp.hostname).kind === "invalid") {
    return w.error(path, `${show(value)} has an invalid host`);
  }
  return hp;
}

/** Whether `host` is an address of every interface (0.0.0.0, ::), which no other host can dial. */
function isWildcard(host: string): boolean {
  const ip = parseIp(host);
  return ip !== undefined && classify(ip) === "unspecified";
}

/** A token field: a `sha256:` hash, or a plain token (long enough, no stray whitespace) hashed here. */
function tokenHash(w: Walker, value: unknown, path: string): string | undefined {
  if (typeof value !== "string" || value === "") {
    return w.error(path, "required (a token or sha256:<hex> hash)");
  }
  if (value.toLowerCase().startsWith("sha256:")) {
    const hash = "sha256:" + value.slice(7).toLowerCase();
    return isTokenHash(hash)
      ? hash
      : w.error(path, "malformed hash: expected sha256: and 64 hex digits");
  }
  // Messages about plain tokens never quote them.
  if (value.trim() !== value) return w.error(path, "token has leading or trailing whitespace");
  if (value.length < MIN_TOKEN_LENGTH) {
    return w.error(
      path,
      `token too short (at least ${MIN_TOKEN_LENGTH} characters; use a generated one)`,
    );
  }
  return hashToken(value);
}

function checkListen(w: Walker, value: unknown, hasTls: boolean): ListenConfig | undefined {
  const raw = w.object(value, "listen", LISTEN_KEYS);
  if (!raw) return undefined;
  const tcp = listenAddress(w, raw.tcp, "listen.tcp");
  const websocket = listenAddress(w, raw.websocket, "listen.websocket");
  const admin = listenAddress(w, raw.admin, "listen.admin");
  const http = listenAddress(w, raw.http ?? null, "listen.http");
  const https = listenAddress(w, raw.https ?? null, "listen.https");
  const path = w.string(raw.websocketPath, "listen.websocketPath");
  if (path !== undefined && !/^\/[A-Za-z0-9._~!$&'()*+,;=:@%/-]*$/.test(path)) {
    w.error(
      "listen.websocketPath",
      `${show(path)} must be an absolute URL path without query or fragment`,
    );
  }
  if (tcp === null && websocket === null) {
    w.error("listen", "tcp and websocket are both off; enable one");
  }
  const named = [
    ["tcp", tcp],
    ["websocket", websocket],
    ["admin", admin],
    ["http", http],
    ["https", https],
  ] as const;
  named.forEach(([name, hp], i) => {
    if (!hp) return;
    for (const [other, hp2] of named.slice(0, i)) {
      if (hp2 && hp.port !== 0 && hp.port === hp2.port && hp.hostname === hp2.hostname) {
        w.error(`listen.${name}`, `same address as listen.${other}`);
      }
    }
    // Visitors' HTTP is theirs to protect; tokens and the admin API are ours.
    if (
      name !== "http" && name !== "https" && !isLoopbackHost(hp.hostname) &&
      (name === "admin" || !hasTls)
    ) {
      w.warn(
        `listen.${name}`,
        `listens beyond loopback without TLS: tokens would cross the network in clear text`,
      );
    }
  });
  if (
    tcp === undefined || websocket === undefined || admin === undefined || http === undefined ||
    https === undefined || path === undefined
  ) {
    return undefined;
  }
  return { tcp, websocket, admin, http, https, websocketPath: path };
}

function checkTls(w: Walker, value: unknown): TlsConfig | null | undefined {
  if (value === null) return null;
  const raw = w.object(value, "tls", ["cert", "key"]);
  if (!raw) return undefined;
  const cert = w.string(raw.cert, "tls.cert");
  const key = w.string(raw.key, "tls.key");
  return cert && key ? { cert, key } : undefined;
}

function checkLimits(w: Walker, value: unknown): Limits | undefined {
  const keys = Object.keys(LIMIT_BOUNDS) as (keyof Limits)[];
  const raw = w.object(value, "limits", keys);
  if (!raw) return undefined;
  const out: Partial<Limits> = {};
  for (const key of keys) out[key] = w.integer(raw[key], `limits.${key}`, LIMIT_BOUNDS[key]);
  return keys.every((k) => out[k] !== undefined) ? out as Limits : undefined;
}

function checkLog(w: Walker, value: unknown): LogConfig | undefined {
  const raw = w.object(value, "log", ["level", "format"]);
  if (!raw) return undefined;
  const level = w.oneOf(raw.level, "log.level", ["debug", "info", "warn", "error"] as const);
  const format = w.oneOf(raw.format, "log.format", ["auto", "pretty", "json"] as const);
  return level && format ? { level, format } : undefined;
}

function checkExpose(w: Walker, value: unknown, path: string): ClientPolicy["expose"] | undefined {
  if (value === undefined) return { ports: [], anyPort: false, bindHosts: [], hosts: [] };
  const raw = w.object(value, path, ["ports", "bindHosts", "anyPort", "hosts"]);
  if (!raw) return undefined;
  let ok = true;
  const ranges: PortRange[] = [];
  // Port 0 asks the daemon to pick one of the allowed ports: allowed unless the operator says
  // `anyPort: false` (listing 0 among the ports, as older configs do, says the same as true).
  let anyPort = raw.anyPort === undefined ? true : raw.anyPort;
  if (typeof anyPort !== "boolean") {
    ok = !!w.error(`${path}.anyPort`, `${show(anyPort)} must be true or false`);
    anyPort = false;
  }
  let listedZero = false;
  (w.array(raw.ports ?? [], `${path}.ports`) ?? (ok = false, [])).forEach((spec, i) => {
    if (spec === 0 || spec === "0") return void (listedZero = true);
    const parsed = parsePortRange(spec);
    if (parsed.ok) ranges.push(parsed.value);
    else ok = !!w.error(at(`${path}.ports`, i), `${show(spec)} ${parsed.error}`);
  });
  if (listedZero && ranges.length === 0) {
    ok = !!w.error(`${path}.ports`, "0 (any port) needs at least one port or range to pick from");
  }
  if (ranges.length === 0) anyPort = false;
  const bindHosts: IpAddress[] = [];
  // Binding defaults to loopback only: exposing on other interfaces must be written down.
  (w.array(raw.bindHosts ?? ["127.0.0.1"], `${path}.bindHosts`) ?? (ok = false, [])).forEach(
    (h, i) => {
      const ip = typeof h === "string" ? parseIp(h) : undefined;
      if (!ip) {
        return void (ok = !!w.error(
          at(`${path}.bindHosts`, i),
          `${show(h)} must be an IP address`,
        ));
      }
      if (classify(ip) === "unspecified") {
        w.warn(at(`${path}.bindHosts`, i), `${show(h)} exposes tunnels on every interface`);
      }
      bindHosts.push(ip);
    },
  );
  const hosts: string[] = [];
  // Any single label under the base domain unless the operator lists the names.
  (w.array(raw.hosts ?? ["*"], `${path}.hosts`) ?? (ok = false, [])).forEach((h, i) => {
    const pattern = typeof h === "string" ? h.toLowerCase() : "";
    const name = pattern.startsWith("*.") ? pattern.slice(2) : pattern;
    if (pattern !== "*" && !isHostName(name)) {
      return void (ok = !!w.error(
        at(`${path}.hosts`, i),
        `${show(h)} must be "*", "*.NAME" or a host name`,
      ));
    }
    hosts.push(pattern);
  });
  return ok
    ? { ports: mergeRanges(ranges), anyPort: anyPort as boolean, bindHosts, hosts }
    : undefined;
}

function checkHttp(w: Walker, value: unknown): HttpConfig | undefined {
  const raw = w.object(value ?? {}, "http", ["domain", "trustForwarded", "certificates", "acme"]);
  if (!raw) return undefined;
  let domain: string | null = null;
  if (raw.domain !== undefined && raw.domain !== null) {
    const text = typeof raw.domain === "string" ? raw.domain.toLowerCase() : "";
    if (!isHostName(text) || !text.includes(".")) {
      return void w.error(
        "http.domain",
        `${show(raw.domain)} must be a host name like tunnels.example.com`,
      );
    }
    domain = text;
  }
  const trust = raw.trustForwarded ?? false;
  if (typeof trust !== "boolean") {
    return void w.error("http.trustForwarded", `${show(trust)} must be true or false`);
  }
  const list = w.array(raw.certificates ?? [], "http.certificates");
  if (!list) return undefined;
  const certificates: TlsConfig[] = [];
  list.forEach((item, i) => {
    const where = `http.certificates[${i}]`;
    const pair = w.object(item, where, ["cert", "key"]);
    const cert = pair && w.string(pair.cert, `${where}.cert`);
    const key = pair && w.string(pair.key, `${where}.key`);
    if (cert && key) certificates.push({ cert, key });
  });
  if (certificates.length !== list.length) return undefined;
  const acme = checkAcme(w, raw.acme ?? null);
  if (acme === undefined) return undefined;
  return { domain, trustForwarded: trust, certificates, acme };
}

function checkAcme(w: Walker, value: unknown): AcmeConfig | null | undefined {
  if (value === null) return null;
  const raw = w.object(value, "http.acme", ["directory", "email", "caCerts", "challenge"]);
  if (!raw) return undefined;
  const directory = w.string(raw.directory, "http.acme.directory");
  if (directory !== undefined && !/^https:\/\/[^\s/]+(\/\S*)?$/.test(directory)) {
    return void w.error("http.acme.directory", `${show(directory)} must be an https:// URL`);
  }
  const email = raw.email ?? null;
  if (email !== null && (typeof email !== "string" || !/^[^\s@]+@[^\s@]+$/.test(email))) {
    return void w.error("http.acme.email", `${show(email)} must be an email address or null`);
  }
  const caCerts = raw.caCerts ?? null;
  if (caCerts !== null && (typeof caCerts !== "string" || caCerts === "")) {
    return void w.error("http.acme.caCerts", `${show(caCerts)} must be a PEM file path or null`);
  }
  const challenge = raw.challenge ?? "http-01";
  if (challenge !== "http-01" && challenge !== "tls-alpn-01") {
    return void w.error(
      "http.acme.challenge",
      `${show(challenge)} must be "http-01" or "tls-alpn-01"`,
    );
  }
  if (directory === undefined) return undefined;
  return { directory, email, caCerts, challenge };
}

function checkForward(w: Walker, value: unknown, path: string): ForwardRule[] | undefined {
  const list = w.array(value ?? [], path);
  if (!list) return undefined;
  const rules: ForwardRule[] = [];
  list.forEach((entry, i) => {
    if (typeof entry !== "string") {
      return void w.error(at(path, i), `${show(entry)} must be a string`);
    }
    const parsed = parseForwardRule(entry);
    if (parsed.ok) rules.push(parsed.value);
    else w.error(at(path, i), `${show(entry)} ${parsed.error}`);
  });
  return rules.length === list.length ? rules : undefined;
}

function checkServices(
  w: Walker,
  value: unknown,
  path: string,
): ClientPolicy["services"] | undefined {
  const raw = w.object(value ?? {}, path, ["offer", "use"]);
  if (!raw) return undefined;
  const patterns = (key: "offer" | "use") => {
    const list = w.array(raw[key] ?? [], `${path}.${key}`);
    if (!list) return undefined;
    const bad = list.map((p, i) => {
      if (typeof p === "string" && isServicePattern(p)) return false;
      return !w.error(
        at(`${path}.${key}`, i),
        `${show(p)} must be a service name, a prefix ending in *, or *`,
      );
    });
    return bad.includes(true) ? undefined : list as string[];
  };
  const offer = patterns("offer"), use = patterns("use");
  return offer && use ? { offer, use } : undefined;
}

/** A visitor policy (`visitors`, a client's `visitors`), its first problem reported at its path. */
function checkVisitors(w: Walker, value: unknown, path: string): VisitorPolicy | undefined {
  const result = parseVisitorPolicy(value, path);
  if (result.ok) return result.policy;
  const colon = result.error.indexOf(": ");
  return w.error(result.error.slice(0, colon), result.error.slice(colon + 2));
}

/** A client's `limits.bandwidth` (`in`, `out`: bytes per second); null when it is bad. */
function clientBandwidth(
  w: Walker,
  value: unknown,
  path: string,
): { in?: number; out?: number } | undefined | null {
  if (value === undefined) return undefined;
  const raw = w.object(value, path, ["in", "out"]);
  if (!raw) return null;
  const out: { in?: number; out?: number } = {};
  for (const key of ["in", "out"] as const) {
    if (raw[key] === undefined) continue;
    const n = w.integer(raw[key], `${path}.${key}`, [1, MAX_BANDWIDTH]);
    if (n === undefined) return null;
    out[key] = n;
  }
  return out;
}

/** `trustedProxies`: the networks of fronts whose word on the visitor's address is believed. */
function checkTrustedProxies(w: Walker, value: unknown): string[] | undefined {
  const list = w.array(value, "trustedProxies");
  if (!list) return undefined;
  const out = list.map((item, i) => {
    const parsed = typeof item === "string" ? parseCidr(item) : undefined;
    if (parsed?.ok) return formatCidr(parsed.cidr);
    const why = parsed ? parsed.error : "must be a string";
    return w.error(at("trustedProxies", i), `${show(item)} is not a network: ${why}`);
  });
  return out.includes(undefined) ? undefined : out as string[];
}

/** `identityProviders`: the URL prefixes a client's `policy.http` may have the daemon fetch. */
function checkIdentityProviders(w: Walker, value: unknown): string[] | undefined {
  const list = w.array(value, "identityProviders");
  if (!list) return undefined;
  const out = list.map((item, i) => {
    const parsed = parseIdentityProvider(item);
    if (parsed.ok) return parsed.url;
    return w.error(at("identityProviders", i), `${show(item)} ${parsed.error}`);
  });
  return out.includes(undefined) ? undefined : out as string[];
}

function checkClient(
  w: Walker,
  value: unknown,
  path: string,
  limits: Limits | undefined,
  visitorDefault: VisitorPolicy | undefined,
) {
  const raw = w.object(value, path, CLIENT_KEYS);
  if (!raw) return undefined;
  let name = w.string(raw.name, `${path}.name`);
  if (name !== undefined && !CLIENT_NAME.test(name)) {
    name = w.error(
      `${path}.name`,
      `${show(name)} must be letters, digits, ".", "_" or "-" (up to 64)`,
    );
  }
  const hash = tokenHash(w, raw.token, `${path}.token`);
  const expose = checkExpose(w, raw.expose, `${path}.expose`);
  const forward = checkForward(w, raw.forward, `${path}.forward`);
  const services = checkServices(w, raw.services, `${path}.services`);
  const rawLimits = w.object(raw.limits ?? {}, `${path}.limits`, [
    "tunnels",
    "streams",
    "visitors",
    "bandwidth",
  ]);
  const cap = (key: "tunnels" | "streams" | "visitors", global: keyof Limits) => {
    const max = limits?.[global] ?? LIMIT_BOUNDS[global][1];
    const v = rawLimits?.[key];
    if (v === undefined) return max;
    const n = w.integer(v, `${path}.limits.${key}`, [
      LIMIT_BOUNDS[global][0],
      LIMIT_BOUNDS[global][1],
    ]);
    if (n !== undefined && n > max) {
      return w.error(`${path}.limits.${key}`, `${n} exceeds limits.${global} (${max})`);
    }
    return n;
  };
  const tunnels = cap("tunnels", "tunnelsPerClient"), streams = cap("streams", "streamsPerSession");
  const visitors = cap("visitors", "visitorsPerClient");
  const bandwidth = clientBandwidth(w, rawLimits?.bandwidth, `${path}.limits.bandwidth`);
  const policy = raw.visitors === undefined
    ? visitorDefault ?? {}
    : checkVisitors(w, raw.visitors, `${path}.visitors`);
  const groups = w.array(raw.groups ?? [], `${path}.groups`)?.map((g, i) =>
    typeof g === "string" && CLIENT_NAME.test(g)
      ? g
      : w.error(at(`${path}.groups`, i), `${show(g)} must be a group name`)
  );
  if (
    !name || !hash || !expose || !forward || !services || tunnels === undefined ||
    streams === undefined || visitors === undefined || !groups || groups.includes(undefined) ||
    !policy || bandwidth === null
  ) {
    return undefined;
  }
  const client: ClientConfig = {
    name,
    tokenHash: hash,
    expose,
    forward,
    services,
    limits: { tunnels, streams, visitors, ...(bandwidth ? { bandwidth } : {}) },
    groups: groups as string[],
    visitors: policy,
  };
  return client;
}

function checkGroups(w: Walker, value: unknown): Record<string, GroupConfig> | undefined {
  const raw = w.object(value ?? {}, "groups", Object.keys(isObject(value) ? value : {}));
  if (!raw) return undefined;
  const groups: Record<string, GroupConfig> = {};
  let ok = true;
  for (const [name, entry] of Object.entries(raw)) {
    const path = `groups.${name}`;
    if (!CLIENT_NAME.test(name)) {
      ok = w.error(path, 'a group name is letters, digits, ".", "_" or "-" (up to 64)') ?? false;
      continue;
    }
    const group = w.object(entry, path, ["key", "balance"]);
    const keyHash = group && tokenHash(w, group.key, `${path}.key`);
    const balance = group &&
      w.oneOf(
        group.balance ?? "round_robin",
        `${path}.balance`,
        [
          "round_robin",
          "least_connections",
        ] as const,
      );
    if (!keyHash || !balance) ok = false;
    else setOwn(groups, name, { keyHash, balance });
  }
  return ok ? groups : undefined;
}

const CLUSTER_KEYS = [
  "servers",
  "token",
  "user",
  "password",
  "credsFile",
  "nkeySeedFile",
  "node",
  "listen",
  "advertise",
  "key",
  "previousKeys",
  "presenceTtlMs",
  "rereadSpreadMs",
  "bucketPrefix",
  "replicas",
  "tunnelHost",
  "visitors",
  "tls",
];
/** A node name and a bucket prefix are used in NATS subjects and KV keys. */
const CLUSTER_NAME = /^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$/;
/** The cluster key is a secret like a token: as long as one. */
const MIN_CLUSTER_KEY = MIN_TOKEN_LENGTH;
/** At most this many previous cluster keys (each record, query and handshake is signed with all). */
const MAX_PREVIOUS_KEYS = 4;

/**
 * `cluster.previousKeys`: keys accepted and signed with beside `key` during a rotation. Never
 * quoted in an error: they are secrets.
 */
function checkPreviousKeys(w: Walker, value: unknown, key: unknown): string[] | undefined {
  if (value === undefined || value === null) return [];
  const path = "cluster.previousKeys";
  // From the environment they arrive as one comma-separated string.
  const list = typeof value === "string" ? value.split(",").map((k) => k.trim()) : value;
  if (!Array.isArray(list)) return w.error(path, "must be an array of keys");
  if (list.length > MAX_PREVIOUS_KEYS) {
    return w.error(path, `at most ${MAX_PREVIOUS_KEYS} keys (drop those no node signs with)`);
  }
  const keys: string[] = [];
  let ok = true;
  list.forEach((item, i) => {
    if (typeof item !== "string" || item.length < MIN_CLUSTER_KEY) {
      ok = false;
      w.error(at(path, i), `a cluster key must be a string of ${MIN_CLUSTER_KEY}+ characters`);
    } else if (item === key || keys.includes(item)) {
      w.warn(at(path, i), "repeats a key given before (cluster.key or this list); used once");
    } else keys.push(item);
  });
  return ok ? keys : undefined;
}

function checkCluster(w: Walker, value: unknown): ClusterConfig | null | undefined {
  if (value === null || value === undefined) return null;
  const raw = w.object(value, "cluster", CLUSTER_KEYS);
  if (!raw) return undefined;
  // From the environment the servers arrive as one comma-separated string.
  const list = typeof raw.servers === "string" ? raw.servers.split(",") : raw.servers;
  const servers = w.array(list, "cluster.servers")?.map((url, i) => {
    const text = typeof url === "string" ? url.trim() : url;
    if (typeof text === "string" && /^(nats|tls):\/\/[^\s/]+$/.test(text)) return text;
    return w.error(at("cluster.servers", i), `${show(url)} must be nats://HOST:PORT`);
  });
  if (servers?.length === 0) w.error("cluster.servers", "name at least one NATS server");
  const optional = (key: string) =>
    raw[key] === undefined ? undefined : w.string(raw[key], `cluster.${key}`);
  const auth = {
    token: optional("token"),
    user: optional("user"),
    password: optional("password"),
    credsFile: optional("credsFile"),
    nkeySeedFile: optional("nkeySeedFile"),
  };
  const kinds = [auth.token, auth.user ?? auth.password, auth.credsFile, auth.nkeySeedFile]
    .filter((v) => v !== undefined).length;
  if (kinds > 1) w.error("cluster", "give one kind of NATS credentials, not several");
  if ((auth.user === undefined) !== (auth.password === undefined)) {
    w.error("cluster", "user and password go together");
  }
  const name = (key: string, fallback: string) => {
    const text = raw[key] ?? fallback;
    if (typeof text === "string" && CLUSTER_NAME.test(text)) return text;
    return w.error(
      `cluster.${key}`,
      `${show(text)} must be letters, digits, "_" or "-" (up to 64)`,
    );
  };
  const node = name("node", hostName().split(".")[0].replace(/[^A-Za-z0-9_-]/g, "-"));
  const bucketPrefix = name("bucketPrefix", "tunnelmux");
  const listen = listenAddress(w, raw.listen ?? "0.0.0.0:7090", "cluster.listen");
  let advertise = raw.advertise === undefined
    ? undefined
    : w.string(raw.advertise, "cluster.advertise");
  // Port 0, in either, is the port the relay listener gets: the node advertises it once bound.
  if (advertise !== undefined) {
    let host: string | undefined;
    try {
      host = parseHostPort(advertise).hostname;
    } catch {
      advertise = w.error("cluster.advertise", `${show(advertise)} must be HOST:PORT`);
    }
    if (host !== undefined && isWildcard(host)) {
      advertise = w.error(
        "cluster.advertise",
        `${show(advertise)} is a wildcard address: name one other nodes can dial`,
      );
    }
  } else if (listen) {
    if (isWildcard(listen.hostname)) {
      w.error("cluster.advertise", "required when cluster.listen is a wildcard address");
    } else advertise = formatHostPort(listen.hostname, listen.port);
  }
  const key = typeof raw.key === "string" && raw.key.length >= MIN_CLUSTER_KEY ? raw.key : w.error(
    "cluster.key",
    `the cluster key must be a string of ${MIN_CLUSTER_KEY}+ characters (or TUNNELMUX_CLUSTER_KEY)`,
  );
  const previousKeys = checkPreviousKeys(w, raw.previousKeys, raw.key);
  const presenceTtlMs = w.integer(raw.presenceTtlMs ?? 5000, "cluster.presenceTtlMs", [
    1000,
    600_000,
  ]);
  const rereadSpreadMs = w.integer(raw.rereadSpreadMs ?? 3000, "cluster.rereadSpreadMs", [
    0,
    60_000,
  ]);
  const replicas = w.integer(raw.replicas ?? 1, "cluster.replicas", [1, 5]);
  let tunnelHost: string | null | undefined = null;
  if (raw.tunnelHost !== undefined && raw.tunnelHost !== null) {
    tunnelHost = w.string(raw.tunnelHost, "cluster.tunnelHost");
    if (tunnelHost !== undefined && parseHost(tunnelHost).kind === "invalid") {
      tunnelHost = w.error("cluster.tunnelHost", `${show(tunnelHost)} is not an address`);
    }
  }
  const visitors = w.oneOf(raw.visitors ?? "all", "cluster.visitors", ["all", "owner"] as const);
  let tls: ClusterConfig["tls"] | undefined = null;
  if (raw.tls !== undefined && raw.tls !== null) {
    const t = w.object(raw.tls, "cluster.tls", ["cert", "key", "ca"]);
    const cert = t && w.string(t.cert, "cluster.tls.cert");
    const key = t && w.string(t.key, "cluster.tls.key");
    const ca = t && w.string(t.ca, "cluster.tls.ca");
    tls = cert && key && ca ? { cert, key, ca } : undefined;
  }
  if (
    !servers || servers.includes(undefined) || !node || !bucketPrefix || !listen || !advertise ||
    !key || !previousKeys || presenceTtlMs === undefined || rereadSpreadMs === undefined ||
    replicas === undefined ||
    tunnelHost === undefined || !visitors || tls === undefined
  ) {
    return undefined;
  }
  const definedAuth = Object.fromEntries(Object.entries(auth).filter(([, v]) => v !== undefined));
  return {
    servers: servers as string[],
    auth: definedAuth,
    node,
    listen,
    advertise,
    key,
    previousKeys,
    presenceTtlMs,
    rereadSpreadMs,
    bucketPrefix,
    replicas,
    tunnelHost,
    visitors,
    tls,
  };
}

/**
 * Validates a raw configuration document (missing fields take the embedded defaults) and returns
 * every error and warning, each with its JSON path. Plain tokens are hashed here. A client
 * without a token is an error: only {@link loadConfig} fills in the `default` client's token.
 */
export function validateConfig(raw: unknown): ValidationResult {
  const w = new Walker();
  const top = w.object(raw, "", TOP_KEYS);
  if (!top) return { errors: w.errors, warnings: w.warnings };
  const doc = mergeLayers(embeddedDefaults(), top) as Record<string, unknown>;
  const tls = checkTls(w, doc.tls);
  const listen = checkListen(w, doc.listen, !!tls);
  const dataDir = w.string(doc.dataDir, "dataDir");
  const shutdownGraceMs = w.integer(doc.shutdownGraceMs, "shutdownGraceMs", [0, 3_600_000]);
  const limits = checkLimits(w, doc.limits);
  const log = checkLog(w, doc.log);
  const adminTokenHash = doc.adminToken === null
    ? null
    : tokenHash(w, doc.adminToken, "adminToken");
  if (listen?.admin && adminTokenHash === null) {
    w.error("adminToken", "required while listen.admin is on (or set listen.admin to null)");
  }
  const visitors = checkVisitors(w, doc.visitors, "visitors");
  const trustedProxies = checkTrustedProxies(w, doc.trustedProxies);
  const identityProviders = checkIdentityProviders(w, doc.identityProviders);
  const clients: ClientConfig[] = [];
  const list = w.array(doc.clients, "clients");
  if (list?.length === 0) w.error("clients", "no clients: nobody could connect");
  const names = new Map<string, number>();
  const hashes = new Map<string, string>(adminTokenHash ? [[adminTokenHash, "adminToken"]] : []);
  list?.forEach((entry, i) => {
    const client = checkClient(w, entry, `clients[${i}]`, limits, visitors);
    if (client) clients.push(client);
    // Duplicates are checked on the raw values, so they show even when the entry has other errors.
    if (!isObject(entry)) return;
    if (typeof entry.name === "string") {
      const sameName = names.get(entry.name);
      if (sameName !== undefined) {
        w.error(`clients[${i}].name`, `duplicate of clients[${sameName}].name`);
      } else names.set(entry.name, i);
    }
    if (typeof entry.token === "string" && entry.token !== "") {
      const t = entry.token;
      const hash = t.toLowerCase().startsWith("sha256:")
        ? "sha256:" + t.slice(7).toLowerCase()
        : hashToken(t);
      const sameToken = hashes.get(hash);
      if (sameToken) w.error(`clients[${i}].token`, `same token as ${sameToken}`);
      else hashes.set(hash, `clients[${i}].token`);
    }
  });
  const cluster = checkCluster(w, doc.cluster);
  const http = checkHttp(w, doc.http);
  if (http?.acme && listen) {
    // The CA proves a name by reaching the daemon on the challenge's port.
    if (http.acme.challenge === "http-01" && !listen.http) {
      w.error("http.acme.challenge", "http-01 is answered on listen.http, which is off");
    } else if (http.acme.challenge === "tls-alpn-01" && !listen.https) {
      w.error("http.acme.challenge", "tls-alpn-01 is answered on listen.https, which is off");
    }
    if (!listen.https) w.warn("http.acme", "listen.https is off: no certificate would be served");
  }
  if (http && listen?.https && http.certificates.length === 0 && !http.acme) {
    // Not an error: TLS tunnels, passed through to their clients, need no certificate here.
    w.warn(
      "listen.https",
      "no http.certificates and no http.acme: this port terminates TLS for no name, so HTTP " +
        "tunnels are not served on it; only TLS tunnels (passed through) are",
    );
  }
  const groups = checkGroups(w, doc.groups);
  if (groups) {
    for (const [i, client] of clients.entries()) {
      for (const [j, group] of client.groups.entries()) {
        if (!Object.hasOwn(groups, group)) {
          w.error(`clients[${i}].groups[${j}]`, `no group "${group}" in groups`);
        }
      }
    }
  }
  const ok = w.errors.length === 0 && listen && tls !== undefined && dataDir &&
    shutdownGraceMs !== undefined &&
    limits && log && adminTokenHash !== undefined && cluster !== undefined && groups && http &&
    visitors && trustedProxies && identityProviders;
  const config = ok
    ? {
      listen,
      tls,
      dataDir,
      shutdownGraceMs,
      limits,
      log,
      adminTokenHash,
      clients,
      groups,
      cluster,
      http,
      visitors,
      trustedProxies,
      identityProviders,
    }
    : undefined;
  return { config, errors: w.errors, warnings: w.warnings };
}
