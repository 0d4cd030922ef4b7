/**
 * The daemon configuration: types, embedded defaults, JSONC loading, layering and validation.
 *
 * Layers, later winning: embedded defaults < config file (JSON or JSONC) < `TUNNELMUX_*`
 * environment < command-line flags. Validation reports every problem with its JSON path at once,
 * and unknown keys are errors, because a typo such as `"fowrard"` must never silently fall back
 * to a default. With no config at all the daemon is usable and closed: loopback listeners and one
 * `default` client that may expose ports 1024-65535 on 127.0.0.1 and forward nothing.
 *
 * @module
 */

import { readFile as fsReadFile } from "node:fs/promises";
import { type HostPort, parseHostPort } from "../util/host_port.ts";
import { classify, type IpAddress, parseHost, parseIp } from "./address.ts";
import {
  type ClientPolicy,
  type ForwardRule,
  isServicePattern,
  mergeRanges,
  parseForwardRule,
  parsePortRange,
  type PortRange,
} from "./policy.ts";
import { generateToken, hashToken, isTokenHash, MIN_TOKEN_LENGTH } from "./tokens.ts";

/** Where the daemon listens; `null` turns a listener off. */
export interface ListenConfig {
  /** yamux over TCP (TLS when `tls` is set). */
  tcp: HostPort | null;
  /** yamux over WebSocket (wss when `tls` is set). */
  websocket: HostPort | null;
  /** HTTP path the WebSocket upgrade is accepted on. */
  websocketPath: string;
  /** The admin API (token-protected, see `adminTokenHash`). */
  admin: HostPort | null;
}

/** PEM files for TLS on the TCP and WebSocket listeners. */
export interface TlsConfig {
  /** Certificate chain file. */
  cert: string;
  /** Private key file. */
  key: string;
}

/** Daemon-wide limits. Durations in milliseconds, sizes in bytes; 0 idle timeout = none. */
export interface Limits {
  /** Concurrent client sessions. */
  sessions: number;
  /** Open streams per session; a client's `limits.streams` may only lower it. */
  streamsPerSession: number;
  /** Reverse tunnels per client; a client's `limits.tunnels` may only lower it. */
  tunnelsPerClient: number;
  /** Give up dialling a forward target after this long (also bounds its DNS lookup). */
  dialTimeoutMs: number;
  /** A new connection must authenticate within this long. */
  handshakeTimeoutMs: number;
  /** Close sessions idle this long; 0 disables. */
  idleTimeoutMs: number;
  /** Largest WebSocket message accepted. */
  maxWebSocketMessage: number;
}

/** Logging. `auto` = pretty on a TTY, JSON lines otherwise. */
export interface LogConfig {
  /** Least severe level written. */
  level: "debug" | "info" | "warn" | "error";
  /** Output format. */
  format: "auto" | "pretty" | "json";
}

/** A client's own limits, already capped by the daemon-wide ones. */
export interface ClientLimits {
  /** Reverse tunnels at once. */
  tunnels: number;
  /** Streams per session. */
  streams: number;
}

/** One client: its credential, its permissions and its limits. */
export interface ClientConfig extends ClientPolicy {
  /** `sha256:<hex>` of the token; plain tokens are hashed at load and never kept. */
  tokenHash: string;
  /** Effective limits. */
  limits: ClientLimits;
}

/** A validated configuration: every field present, every rule parsed. */
export interface Config {
  /** Listeners. */
  listen: ListenConfig;
  /** TLS, or null for plain TCP / ws. */
  tls: TlsConfig | null;
  /** Where state is kept. */
  dataDir: string;
  /** On SIGTERM, let sessions drain this long before closing them. */
  shutdownGraceMs: number;
  /** Daemon-wide limits. */
  limits: Limits;
  /** Logging. */
  log: LogConfig;
  /** Hash of the admin API token, or null when the admin listener is off. */
  adminTokenHash: string | null;
  /** The clients, in config order. */
  clients: ClientConfig[];
}

/** A problem found in the configuration. */
export interface Issue {
  /** JSON path, e.g. `clients[2].forward[0]`; empty for the document itself. */
  path: string;
  /** What is wrong, quoting the offending value. Never contains a token. */
  message: string;
  /** Where the value came from when not the config file, e.g. `TUNNELMUX_LISTEN_TCP`. */
  source?: string;
}

/** Outcome of {@link validateConfig}: a config only when there are no errors. */
export interface ValidationResult {
  /** The validated configuration, when `errors` is empty. */
  config?: Config;
  /** Everything that makes the configuration unusable. */
  errors: Issue[];
  /** Things that work but are probably unintended (e.g. clear-text listeners off loopback). */
  warnings: Issue[];
}

/**
 * The embedded defaults, as a raw document (a fresh copy each call). The `default` client has
 * no token here: `loadConfig` takes it from `TUNNELMUX_TOKEN` or generates one.
 */
export function embeddedDefaults(): Record<string, unknown> {
  return {
    listen: {
      tcp: "127.0.0.1:7000",
      websocket: "127.0.0.1:7080",
      websocketPath: "/tunnel",
      admin: "127.0.0.1:7081",
    },
    tls: null,
    dataDir: "./data",
    shutdownGraceMs: 30000,
    limits: {
      sessions: 1000,
      streamsPerSession: 1024,
      tunnelsPerClient: 16,
      dialTimeoutMs: 10000,
      handshakeTimeoutMs: 10000,
      idleTimeoutMs: 0,
      maxWebSocketMessage: 1048576,
    },
    log: { level: "info", format: "auto" },
    adminToken: null,
    clients: [{
      name: "default",
      expose: { ports: ["1024-65535", 0], bindHosts: ["127.0.0.1"] },
      forward: [],
    }],
  };
}

/** Result of {@link parseJsonc}. */
export type JsoncResult = { ok: true; value: unknown } | { ok: false; error: string };

function lineCol(text: string, index: number): string {
  const before = text.slice(0, index);
  const line = before.split("\n").length;
  return `line ${line} column ${index - before.lastIndexOf("\n")}`;
}

/**
 * Removes `//` and `/* *\/` comments and trailing commas from JSONC, leaving strings untouched
 * (a `"//"` or `","` inside a string stays). Comments become spaces and newlines are kept, so
 * JSON parse positions still point at the right line. Throws on an unterminated block comment.
 */
export function stripJsonc(text: string): string {
  let out = "";
  let i = 0;
  let lastSignificant = ""; // the last non-space character kept outside comments
  let pendingComma = -1; // index in `out` of a comma that a `}` or `]` may turn into a space
  while (i < text.length) {
    const c = text[i];
    if (c === '"') {
      let j = i + 1;
      while (j < text.length && text[j] !== '"' && text[j] !== "\n") j += text[j] === "\\" ? 2 : 1;
      out += text.slice(i, j + 1);
      i = j + 1;
      lastSignificant = '"';
      pendingComma = -1;
    } else if (c === "/" && text[i + 1] === "/") {
      const end = text.indexOf("\n", i);
      const stop = end < 0 ? text.length : end;
      out += " ".repeat(stop - i);
      i = stop;
    } else if (c === "/" && text[i + 1] === "*") {
      const end = text.indexOf("*/", i + 2);
      if (end < 0) throw new SyntaxError(`unterminated /* comment at ${lineCol(text, i)}`);
      out += text.slice(i, end + 2).replace(/[^\n]/g, " ");
      i = end + 2;
    } else {
      if ((c === "}" || c === "]") && pendingComma >= 0) {
        out = out.slice(0, pendingComma) + " " + out.slice(pendingComma + 1);
      }
      if (!/\s/.test(c)) {
        // A comma right after `[`, `{` or another comma is not trailing: leave it for JSON.parse.
        pendingComma = c === "," && !"[{,".includes(lastSignificant) ? out.length : -1;
        lastSignificant = c;
      }
      out += c;
      i++;
    }
  }
  return out;
}

/** Parses JSON with comments and trailing commas; errors name the line and column when known. */
export function parseJsonc(text: string): JsoncResult {
  const source = text.startsWith("\uFEFF") ? text.slice(1) : text;
  try {
    return { ok: true, value: JSON.parse(stripJsonc(source)) };
  } catch (error) {
    let message = error instanceof Error ? error.message : String(error);
    const position = /position (\d+)/.exec(message);
    if (position && !/line \d+/.test(message)) {
      message += ` (${lineCol(source, Number(position[1]))})`;
    }
    return { ok: false, error: message };
  }
}

const isObject = (v: unknown): v is Record<string, unknown> =>
  typeof v === "object" && v !== null && !Array.isArray(v);

/** Sets an own property, even for `__proto__`, so a hostile key is reported, never applied. */
function setOwn(target: Record<string, unknown>, key: string, value: unknown): void {
  Object.defineProperty(target, key, {
    value,
    enumerable: true,
    writable: true,
    configurable: true,
  });
}

/** Deep-merges `over` onto `base`: objects merge key by key; arrays and scalars replace. */
export function mergeLayers(base: unknown, over: unknown): unknown {
  if (!isObject(base) || !isObject(over)) return over;
  const out: Record<string, unknown> = {};
  for (const key of Object.keys(base)) setOwn(out, key, base[key]);
  for (const key of Object.keys(over)) setOwn(out, key, mergeLayers(out[key], over[key]));
  return out;
}

function distance(a: string, b: string): number {
  const row = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    let prev = row[0]++;
    for (let j = 1; j <= b.length; j++) {
      const next = Math.min(row[j] + 1, row[j - 1] + 1, prev + (a[i - 1] === b[j - 1] ? 0 : 1));
      prev = row[j];
      row[j] = next;
    }
  }
  return row[b.length];
}

function suggest(word: string, known: readonly string[]): string {
  const best = known.map((k) => [k, distance(word.toLowerCase(), k.toLowerCase())] as const)
    .sort((x, y) => x[1] - y[1])[0];
  return best && best[1] <= 3 ? ` (did you mean "${best[0]}"?)` : "";
}

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
];
const LISTEN_KEYS = ["tcp", "websocket", "websocketPath", "admin"];
const LIMIT_BOUNDS: Record<keyof Limits, [number, number]> = {
  sessions: [1, 1_000_000],
  streamsPerSession: [1, 1_000_000],
  tunnelsPerClient: [0, 65535],
  dialTimeoutMs: [1, 600_000],
  handshakeTimeoutMs: [1, 600_000],
  idleTimeoutMs: [0, 2 ** 31 - 1],
  maxWebSocketMessage: [1024, 256 * 1024 * 1024],
};
const CLIENT_KEYS = ["name", "token", "expose", "forward", "services", "limits"];
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
  const named = [["tcp", tcp], ["websocket", websocket], ["admin", admin]] as const;
  named.forEach(([name, hp], i) => {
    if (!hp) return;
    for (const [other, hp2] of named.slice(0, i)) {
      if (hp2 && hp.port !== 0 && hp.port === hp2.port && hp.hostname === hp2.hostname) {
        w.error(`listen.${name}`, `same address as listen.${other}`);
      }
    }
    if (!isLoopbackHost(hp.hostname) && (name === "admin" || !hasTls)) {
      w.warn(
        `listen.${name}`,
        `listens beyond loopback without TLS: tokens would cross the network in clear text`,
      );
    }
  });
  if (tcp === undefined || websocket === undefined || admin === undefined || path === undefined) {
    return undefined;
  }
  return { tcp, websocket, admin, websocketPath: path };
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
  if (value === undefined) return { ports: [], anyPort: false, bindHosts: [] };
  const raw = w.object(value, path, ["ports", "bindHosts"]);
  if (!raw) return undefined;
  let ok = true;
  const ranges: PortRange[] = [];
  let anyPort = false;
  (w.array(raw.ports ?? [], `${path}.ports`) ?? (ok = false, [])).forEach((spec, i) => {
    if (spec === 0 || spec === "0") return void (anyPort = true);
    const parsed = parsePortRange(spec);
    if (parsed.ok) ranges.push(parsed.value);
    else ok = !!w.error(at(`${path}.ports`, i), `${show(spec)} ${parsed.error}`);
  });
  if (anyPort && ranges.length === 0) {
    ok = !!w.error(`${path}.ports`, "0 (any port) needs at least one port or range to pick from");
  }
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
  return ok ? { ports: mergeRanges(ranges), anyPort, bindHosts } : undefined;
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

function checkClient(w: Walker, value: unknown, path: string, limits: Limits | undefined) {
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
  const rawLimits = w.object(raw.limits ?? {}, `${path}.limits`, ["tunnels", "streams"]);
  const cap = (key: "tunnels" | "streams", global: keyof Limits) => {
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
  if (
    !name || !hash || !expose || !forward || !services || tunnels === undefined ||
    streams === undefined
  ) {
    return undefined;
  }
  const client: ClientConfig = {
    name,
    tokenHash: hash,
    expose,
    forward,
    services,
    limits: { tunnels, streams },
  };
  return client;
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
  const clients: ClientConfig[] = [];
  const list = w.array(doc.clients, "clients");
  if (list?.length === 0) w.error("clients", "no clients: nobody could connect");
  const names = new Map<string, number>();
  const hashes = new Map<string, string>(adminTokenHash ? [[adminTokenHash, "adminToken"]] : []);
  list?.forEach((entry, i) => {
    const client = checkClient(w, entry, `clients[${i}]`, limits);
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
  const ok = w.errors.length === 0 && listen && tls !== undefined && dataDir &&
    shutdownGraceMs !== undefined &&
    limits && log && adminTokenHash !== undefined;
  const config = ok
    ? { listen, tls, dataDir, shutdownGraceMs, limits, log, adminTokenHash, clients }
    : undefined;
  return { config, errors: w.errors, warnings: w.warnings };
}

/** Command-line settings, already parsed by the CLI. Tokens are deliberately absent: argv is visible to every user in `ps`. */
export interface ConfigFlags {
  /** Config file path (wins over `TUNNELMUX_CONFIG`). */
  config?: string;
  /** `HOST:PORT`, or `off`. */
  listenTcp?: string;
  /** `HOST:PORT`, or `off`. */
  listenWebsocket?: string;
  /** `HOST:PORT`, or `off`. */
  listenAdmin?: string;
  /** State directory. */
  dataDir?: string;
  /** `debug`, `info`, `warn` or `error`. */
  logLevel?: string;
  /** `auto`, `pretty` or `json`. */
  logFormat?: string;
  /** TLS certificate file. */
  tlsCert?: string;
  /** TLS key file. */
  tlsKey?: string;
}

/** Inputs of {@link loadConfig}; everything is passed in, nothing is read from globals. */
export interface LoadOptions {
  /** Environment variables (the caller passes `process.env` or `Deno.env.toObject()`). */
  env?: Record<string, string | undefined>;
  /** Command-line settings. */
  flags?: ConfigFlags;
  /** Reads the config file; `node:fs/promises` by default. */
  readFile?: (path: string) => Promise<string>;
}

/** Outcome of {@link loadConfig}. */
export interface LoadResult extends ValidationResult {
  /** The config file read, if any. */
  file?: string;
  /** Tokens generated because none was configured: print them once, they are stored only hashed. */
  generated: { token?: string; adminToken?: string };
}

// Layered settings: [environment variable, flag, path in the document].
const OVERRIDES: [string, keyof ConfigFlags, string[]][] = [
  ["TUNNELMUX_LISTEN_TCP", "listenTcp", ["listen", "tcp"]],
  ["TUNNELMUX_LISTEN_WS", "listenWebsocket", ["listen", "websocket"]],
  ["TUNNELMUX_LISTEN_ADMIN", "listenAdmin", ["listen", "admin"]],
  ["TUNNELMUX_DATA_DIR", "dataDir", ["dataDir"]],
  ["TUNNELMUX_LOG_LEVEL", "logLevel", ["log", "level"]],
  ["TUNNELMUX_LOG_FORMAT", "logFormat", ["log", "format"]],
  ["TUNNELMUX_TLS_CERT", "tlsCert", ["tls", "cert"]],
  ["TUNNELMUX_TLS_KEY", "tlsKey", ["tls", "key"]],
];
const KNOWN_ENV = [
  ...OVERRIDES.map(([e]) => e),
  "TUNNELMUX_TOKEN",
  "TUNNELMUX_ADMIN_TOKEN",
  "TUNNELMUX_CONFIG",
];

function setPath(doc: Record<string, unknown>, path: string[], value: unknown): void {
  let node = doc;
  for (const key of path.slice(0, -1)) {
    if (!isObject(node[key])) setOwn(node, key, {});
    node = node[key] as Record<string, unknown>;
  }
  setOwn(node, path[path.length - 1], value);
}

/**
 * Loads the configuration: embedded defaults, then the file (`flags.config` or
 * `TUNNELMUX_CONFIG`), then the environment, then the flags, then validation. The `default`
 * client's token comes from `TUNNELMUX_TOKEN`, else (when the file defines no clients) is
 * generated; the admin token from `TUNNELMUX_ADMIN_TOKEN` or the file, else is generated.
 */
export async function loadConfig(options: LoadOptions = {}): Promise<LoadResult> {
  const env = options.env ?? {};
  const flags = options.flags ?? {};
  const envValue = (name: string) => (env[name] === "" ? undefined : env[name]);
  const file = flags.config ?? envValue("TUNNELMUX_CONFIG");
  const generated: LoadResult["generated"] = {};
  const fail = (message: string): LoadResult => ({
    file,
    generated,
    errors: [{ path: "", message }],
    warnings: [],
  });
  let fromFile: Record<string, unknown> = {};
  if (file !== undefined) {
    let text: string;
    try {
      text = await (options.readFile ?? ((p) => fsReadFile(p, "utf8")))(file);
    } catch (error) {
      const code = (error as { code?: unknown })?.code;
      return fail(`cannot read config file ${file}${typeof code === "string" ? ` (${code})` : ""}`);
    }
    let parsed: JsoncResult;
    try {
      parsed = parseJsonc(text);
    } catch (error) {
      parsed = { ok: false, error: (error as Error).message };
    }
    if (!parsed.ok) return fail(`${file}: ${parsed.error}`);
    if (!isObject(parsed.value)) return fail(`${file}: the top level must be an object`);
    fromFile = parsed.value;
  }
  const doc = mergeLayers(embeddedDefaults(), fromFile) as Record<string, unknown>;
  const sources = new Map<string, string>();
  const warnings: Issue[] = [];
  for (const [name, value] of Object.entries(env)) {
    if (!name.startsWith("TUNNELMUX_") || KNOWN_ENV.includes(name) || value === undefined) continue;
    const hint = suggest(name, KNOWN_ENV);
    if (hint) warnings.push({ path: "", message: `unknown environment variable ${name}${hint}` });
  }
  for (const layer of ["env", "flag"] as const) {
    for (const [envName, flag, path] of OVERRIDES) {
      const value = layer === "env" ? envValue(envName) : flags[flag];
      if (value === undefined) continue;
      const off = path[0] === "listen" && value === "off";
      setPath(doc, path, off ? null : value);
      sources.set(
        path.join("."),
        layer === "env" ? envName : `--${flag.replace(/[A-Z]/g, (c) => "-" + c.toLowerCase())}`,
      );
    }
  }
  const token = envValue("TUNNELMUX_TOKEN");
  const clients = Array.isArray(doc.clients) ? doc.clients : [];
  const index = clients.findIndex((c) => isObject(c) && c.name === "default");
  const defaultClient = index >= 0 ? clients[index] as Record<string, unknown> : undefined;
  if (token !== undefined && defaultClient) {
    setOwn(defaultClient, "token", token);
    sources.set(`clients[${index}].token`, "TUNNELMUX_TOKEN");
  } else if (token !== undefined) {
    warnings.push({
      path: "clients",
      message: 'TUNNELMUX_TOKEN is ignored: no client is named "default"',
    });
  } else if (!("clients" in fromFile) && defaultClient && defaultClient.token === undefined) {
    setOwn(defaultClient, "token", generated.token = generateToken());
  }
  const adminToken = envValue("TUNNELMUX_ADMIN_TOKEN");
  if (adminToken !== undefined) {
    doc.adminToken = adminToken;
    sources.set("adminToken", "TUNNELMUX_ADMIN_TOKEN");
  } else if (
    (doc.adminToken ?? null) === null && isObject(doc.listen) && doc.listen.admin !== null
  ) {
    doc.adminToken = generated.adminToken = generateToken();
  }
  const result = validateConfig(doc);
  const annotate = (issue: Issue): Issue => {
    const source = [...sources].find(([p]) => issue.path === p || issue.path.startsWith(p + "."))
      ?.[1];
    return source ? { ...issue, source } : issue;
  };
  return {
    ...result,
    file,
    generated: result.config ? generated : {},
    errors: result.errors.map(annotate),
    warnings: [...warnings, ...result.warnings.map(annotate)],
  };
}

/** A readable multi-line report of a load or validation, for `daemon check --config F`. */
export function formatConfigReport(result: ValidationResult & { file?: string }): string {
  const lines: string[] = [];
  const where = result.file ? ` (${result.file})` : " (embedded defaults)";
  const line = (issue: Issue) =>
    `  ${issue.path || "(config)"}${
      issue.source ? ` [from ${issue.source}]` : ""
    }: ${issue.message}`;
  const count = (n: number, word: string) => `${n} ${word}${n === 1 ? "" : "s"}`;
  if (result.errors.length > 0) {
    lines.push(`config invalid${where}: ${count(result.errors.length, "error")}`);
    lines.push(...result.errors.map(line));
  } else if (result.config) {
    const c = result.config;
    const addr = (hp: HostPort | null) =>
      hp ? `${hp.hostname.includes(":") ? `[${hp.hostname}]` : hp.hostname}:${hp.port}` : "off";
    lines.push(`config OK${where}: ${count(c.clients.length, "client")}`);
    lines.push(
      `  tcp ${addr(c.listen.tcp)}${c.tls ? " (tls)" : ""}, websocket ${addr(c.listen.websocket)}${
        c.listen.websocket ? c.listen.websocketPath : ""
      }${c.tls ? " (wss)" : ""}, admin ${addr(c.listen.admin)}`,
    );
    for (const client of c.clients) {
      lines.push(
        `  client ${client.name}: ${count(client.forward.length, "forward rule")}, expose ${
          client.expose.ports.map((r) => r.from === r.to ? `${r.from}` : `${r.from}-${r.to}`).join(
            ",",
          ) || "none"
        }`,
      );
    }
  }
  if (result.warnings.length > 0) {
    lines.push(`${count(result.warnings.length, "warning")}:`);
    lines.push(...result.warnings.map(line));
  }
  return lines.join("\n");
}
