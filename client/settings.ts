/**
 * The client command's settings, from its flags, its environment and an optional JSONC config
 * file (`--config`), checked before anything is dialed. Every problem is reported at once, each
 * named by where it came from: a flag (`--expose`), a variable (`TUNNELMUX_TOKEN_FILE`) or a path
 * in the file (`expose[1]`). Flags and variables override the file's single values; the file's
 * lists of tunnels, forwards, offers and uses come first, the flags' are added to them.
 *
 * @example
 * ```ts
 * import { clientSettings } from "./settings.ts";
 * const { settings, errors } = clientSettings({
 *   flags: { server: ["tcp://127.0.0.1:7000"], expose: ["8080=127.0.0.1:3000"] },
 *   env: { TUNNELMUX_TOKEN: "a-token-of-24-characters-or-more" },
 * });
 * console.assert(errors.length === 0 && settings!.exposes[0].remotePort === 8080);
 * ```
 *
 * @module
 */

import { hostCwd, nodeBuiltin } from "../util/host/host.ts";
import { parseHostPort, parseIp, splitHostPort, unmapIPv4 } from "../util/net/address.ts";
import { parseJsonc } from "../util/parse/jsonc.ts";
import { suggest } from "../util/parse/suggest.ts";
import type { ExposeOptions, OfferOptions } from "./client.ts";

/** `node:path`, loaded when a path is resolved (it costs Deno's start time, like node:fs). */
function nodePath(): typeof import("node:path") {
  return nodeBuiltin("node:path");
}

/** A file's text; node:fs is loaded only when a file is read (it costs Deno's start time). */
function readTextFile(path: string): string {
  return nodeBuiltin("node:fs").readFileSync(path, "utf8");
}
import type { HealthOptions } from "./tunnels/health_check.ts";
import { DEFAULT_SOCKS_LISTEN, socksOptionsProblem } from "./tunnels/socks_options.ts";
import { type HttpPolicy, parseHttpPolicy } from "../tunnel/policy/http_policy.ts";
import { hashPasswordSync, PASSWORD_HASH_PREFIX } from "../tunnel/policy/password_hash.ts";
import { isObject } from "../util/parse/is_object.ts";
import { parseVisitorPolicy, type VisitorPolicy } from "../tunnel/policy/visitor_policy.ts";
import { DEFAULT_SESSION_CONFIG } from "../protocol/config.ts";

/** The smallest and largest `--stream-window`: the spec's initial window, and 64 MiB. */
const STREAM_WINDOW_RANGE = [256 * 1024, 64 * 1024 * 1024] as const;

/** `N`, or `N` with a `k`, `m` or `g` suffix (KiB, MiB, GiB): bytes; undefined if it is neither. */
export function parseBytes(text: string): number | undefined {
  const match = /^(\d+)([kmg]?)(?:i?b)?$/i.exec(text.trim());
  if (!match) return undefined;
  const scale = { "": 1, k: 1024, m: 1024 ** 2, g: 1024 ** 3 }[match[2].toLowerCase()]!;
  return Number(match[1]) * scale;
}

/** The client command's flags, as parsed (each optional). */
export interface ClientFlags {
  config?: string;
  server?: string[];
  "token-file"?: string;
  expose?: string[];
  "expose-udp"?: string[];
  http?: string[];
  tls?: string[];
  forward?: string[];
  socks?: string;
  "socks-user"?: string;
  "socks-password-file"?: string;
  "forward-udp"?: string[];
  offer?: string[];
  use?: string[];
  name?: string;
  ca?: string;
  "proxy-protocol"?: string;
  group?: string;
  ha?: string;
  health?: string;
  "health-interval-ms"?: string;
  shared?: boolean;
  "no-reconnect"?: boolean;
  "ready-timeout-ms"?: string;
  "keepalive-interval-ms"?: string;
  "keepalive-timeout-ms"?: string;
  "stream-window"?: string;
  "log-format"?: string;
  "basic-auth"?: string[];
  "host-rewrite"?: string;
  /** The inspector's address ("" for the default). */
  inspect?: string;
  "inspect-unredacted"?: boolean;
  "allow-ip"?: string[];
  "deny-ip"?: string[];
  rate?: string;
  "tunnel-rate"?: string;
  "max-conn-per-visitor"?: string;
  "bandwidth-in"?: string;
  "bandwidth-out"?: string;
}

/** A reverse tunnel to hold, with the text that asked for it (its identity across reloads). */
export interface ExposeSpec extends ExposeOptions {
  /** `[BIND:]PORT=LOCAL`, as written. */
  readonly key: string;
  readonly remotePort: number;
}

/** A local listener forwarding to a target or a named service. */
export interface ForwardSpec {
  /** `LISTEN=TARGET` or `LISTEN=NAME`, as written (with its kind). */
  readonly key: string;
  readonly listen: string;
  readonly target?: string;
  readonly service?: string;
  /** `"udp"` for a UDP forward (`--forward-udp`); TCP otherwise. */
  readonly protocol?: "udp";
}

/** The SOCKS5 front: where it listens, and the credentials it requires, if any. */
export interface SocksSpec {
  /** `HOST:PORT`. */
  readonly listen: string;
  readonly user?: string;
  readonly password?: string;
}

/** A named service to offer. */
export interface OfferSpec {
  /** `NAME=LOCAL`, as written. */
  readonly key: string;
  readonly name: string;
  readonly local: string;
  readonly options: OfferOptions;
}

/** Everything the client command needs, checked. */
export interface ClientSettings {
  /** The config file, if one was given (absolute). */
  readonly file?: string;
  readonly servers: string[];
  readonly token: string;
  readonly name?: string;
  readonly caCerts?: string[];
  /** Sessions to distinct nodes (1: a plain client). */
  readonly ha: number;
  readonly reconnect: boolean;
  /** How long the first session may take before the command gives up (0: keep trying). */
  readonly readyTimeoutMs: number;
  readonly keepAliveInterval: number;
  readonly keepAliveTimeout: number;
  /** The largest receive window a stream of the session grows to, in bytes. */
  readonly streamWindow: number;
  readonly logFormat: "auto" | "pretty" | "json";
  readonly exposes: ExposeSpec[];
  readonly forwards: ForwardSpec[];
  /** The SOCKS5 front, when asked for. */
  readonly socks?: SocksSpec;
  readonly offers: OfferSpec[];
  /** The request inspector, when asked for. */
  readonly inspect?: InspectSettings;
}

/** Where and how the request inspector runs. */
export interface InspectSettings {
  /** `host:port`. */
  readonly address: string;
  /** Keep `Authorization`, `Cookie` and `Set-Cookie` values. */
  readonly unredacted: boolean;
  /** The API's bearer token (required off loopback). */
  readonly token?: string;
}

/** One problem, named by where it came from. */
export interface SettingsError {
  /** `--flag`, `VARIABLE`, or a path in the config file. */
  readonly where: string;
  readonly message: string;
}

/** What {@linkcode clientSettings} reads. */
export interface SettingsSources {
  flags: ClientFlags;
  env: Record<string, string | undefined>;
}

/** The keys a client config file may hold. */
const FILE_KEYS = new Set([
  "server",
  "tokenFile",
  "name",
  "ca",
  "ha",
  "reconnect",
  "readyTimeoutMs",
  "keepAliveIntervalMs",
  "keepAliveTimeoutMs",
  "streamWindow",
  "group",
  "groupKeyFile",
  "shared",
  "proxyProtocol",
  "health",
  "healthIntervalMs",
  "expose",
  "exposeUdp",
  "http",
  "tls",
  "forward",
  "socks",
  "socksUser",
  "socksPasswordFile",
  "forwardUdp",
  "offer",
  "use",
  "logFormat",
  "basicAuth",
  "httpPolicy",
  "inspect",
  "inspectUnredacted",
  "inspectTokenFile",
  "visitors",
]);

/** A value and where it came from. */
interface Sourced<T> {
  value: T;
  where: string;
}

/**
 * Builds the settings from `sources` (and the config file they name, read now). Resolves with
 * the settings when there is no error, else with every error.
 */
export function clientSettings(
  sources: SettingsSources,
): { settings?: ClientSettings; errors: SettingsError[] } {
  const { flags, env } = sources;
  const errors: SettingsError[] = [];
  const fail = (where: string, message: string) => errors.push({ where, message });

  // ---- the file ----
  const fileName = flags.config ?? env.TUNNELMUX_CLIENT_CONFIG;
  const fileWhere = flags.config !== undefined ? "--config" : "TUNNELMUX_CLIENT_CONFIG";
  let file: Record<string, unknown> = {};
  let fileDir = hostCwd();
  let filePath: string | undefined;
  if (fileName !== undefined && fileName !== "") {
    filePath = nodePath().resolve(fileName);
    fileDir = nodePath().dirname(filePath);
    let text: string | undefined;
    try {
      text = readTextFile(filePath);
    } catch (error) {
      fail(fileWhere, `cannot read ${filePath}: ${(error as Error).message}`);
    }
    if (text !== undefined) {
      const parsed = parseJsonc(text);
      if (!parsed.ok) fail(filePath, parsed.error);
      else if (
        typeof parsed.value !== "object" || parsed.value === null || Array.isArray(parsed.value)
      ) {
        fail("(config)", "the config file must hold a JSON object");
      } else {
        file = parsed.value as Record<string, unknown>;
        for (const key of Object.keys(file)) {
          if (!FILE_KEYS.has(key)) {
            const hint = suggest(key, [...FILE_KEYS]);
            fail(key, `unknown setting${hint || ` (known: ${[...FILE_KEYS].join(", ")})`}`);
          }
        }
      }
    }
  }
  const fileString = (key: string): Sourced<string> | undefined => {
    const value = file[key];
    if (value === undefined) return undefined;
    if (typeof value !== "string" || value === "") {
      fail(key, "expected a non-empty string");
      return undefined;
    }
    return { value, where: key };
  };
  const fileList = (key: string): Sourced<string>[] => {
    const value = file[key];
    if (value === undefined) return [];
    const items = typeof value === "string" ? [value] : value;
    if (!Array.isArray(items)) {
      fail(key, "expected a list of strings");
      return [];
    }
    return items.flatMap((item, i) => {
      if (typeof item === "string" && item !== "") return [{ value: item, where: `${key}[${i}]` }];
      fail(`${key}[${i}]`, "expected a non-empty string");
      return [];
    });
  };
  const fileNumber = (key: string): Sourced<string> | undefined => {
    const value = file[key];
    if (value === undefined) return undefined;
    if (typeof value !== "number") {
      fail(key, "expected a number");
      return undefined;
    }
    return { value: String(value), where: key };
  };
  const fileBoolean = (key: string): Sourced<boolean> | undefined => {
    const value = file[key];
    if (value === undefined) return undefined;
    if (typeof value !== "boolean") {
      fail(key, "expected true or false");
      return undefined;
    }
    return { value, where: key };
  };
  const flag = <T>(name: keyof ClientFlags, value: T | undefined): Sourced<T> | undefined =>
    value === undefined ? undefined : { value, where: `--${name}` };
  const variable = (name: string): Sourced<string> | undefined =>
    env[name] === undefined || env[name] === "" ? undefined : { value: env[name]!, where: name };
  const fromFile = (path: Sourced<string>) =>
    path.where.startsWith("-") || /^[A-Z_]+$/.test(path.where)
      ? nodePath().resolve(path.value)
      : nodePath().resolve(fileDir, path.value);
  const readSecret = (source: Sourced<string>): string | undefined => {
    try {
      const text = readTextFile(fromFile(source)).trim();
      if (text === "") fail(source.where, `${fromFile(source)} is empty`);
      return text || undefined;
    } catch (error) {
      fail(source.where, `cannot read ${fromFile(source)}: ${(error as Error).message}`);
      return undefined;
    }
  };

  // ---- where each setting comes from ----
  const serverFlags = flags.server?.map((value) => ({ value, where: "--server" }));
  const serverSources = serverFlags ??
    (variable("TUNNELMUX_SERVER") ? [variable("TUNNELMUX_SERVER")!] : fileList("server"));
  const servers = serverSources.flatMap((s) => s.value.split(",")).map((u) => u.trim())
    .filter((u) => u !== "");
  if (servers.length === 0) {
    fail("--server", "the daemon's URL is required (--server, TUNNELMUX_SERVER or server)");
  }

  let token = variable("TUNNELMUX_TOKEN")?.value;
  const tokenFile = flag("token-file", flags["token-file"]) ?? variable("TUNNELMUX_TOKEN_FILE") ??
    fileString("tokenFile");
  if (tokenFile && (flags["token-file"] !== undefined || token === undefined)) {
    token = readSecret(tokenFile);
  }
  if (token === undefined && !tokenFile) {
    fail(
      "TUNNELMUX_TOKEN",
      "the client's token is required (TUNNELMUX_TOKEN, --token-file or tokenFile)",
    );
  }

  const name = flag("name", flags.name)?.value ?? fileString("name")?.value;
  const ca = flag("ca", flags.ca) ?? fileString("ca");
  let caCerts: string[] | undefined;
  if (ca) {
    try {
      caCerts = [readTextFile(fromFile(ca))];
    } catch (error) {
      fail(ca.where, `cannot read ${fromFile(ca)}: ${(error as Error).message}`);
    }
  }

  const integer = (
    source: Sourced<string> | undefined,
    fallback: number,
    min: number,
    max: number,
    what: string,
  ): number => {
    if (!source) return fallback;
    const n = Number(source.value);
    if (!/^\d+$/.test(source.value) || n < min || n > max) {
      fail(source.where, `must be ${what} from ${min} to ${max}, got "${source.value}"`);
      return fallback;
    }
    return n;
  };
  const ha = integer(flag("ha", flags.ha) ?? fileNumber("ha"), 1, 1, 8, "a number of sessions");
  const keepAliveInterval = integer(
    flag("keepalive-interval-ms", flags["keepalive-interval-ms"]) ??
      variable("TUNNELMUX_KEEPALIVE_INTERVAL_MS") ?? fileNumber("keepAliveIntervalMs"),
    30_000,
    100,
    3_600_000,
    "milliseconds",
  );
  const keepAliveTimeout = integer(
    flag("keepalive-timeout-ms", flags["keepalive-timeout-ms"]) ??
      variable("TUNNELMUX_KEEPALIVE_TIMEOUT_MS") ?? fileNumber("keepAliveTimeoutMs"),
    30_000,
    100,
    3_600_000,
    "milliseconds",
  );
  // Bytes: N or N with a k, m or g suffix, as a flag or variable; a number in the file.
  const windowSource = flag("stream-window", flags["stream-window"]) ??
    variable("TUNNELMUX_STREAM_WINDOW") ?? fileNumber("streamWindow");
  let streamWindow = DEFAULT_SESSION_CONFIG.maxStreamWindow;
  if (windowSource) {
    const n = parseBytes(windowSource.value);
    const [min, max] = STREAM_WINDOW_RANGE;
    if (n === undefined || n < min || n > max) {
      fail(
        windowSource.where,
        `must be bytes from 256k to 64m (N, or with a k, m or g suffix), got "${windowSource.value}"`,
      );
    } else streamWindow = n;
  }
  const reconnect = flags["no-reconnect"] ? false : fileBoolean("reconnect")?.value ?? true;
  const readyTimeoutMs = integer(
    flag("ready-timeout-ms", flags["ready-timeout-ms"]) ?? fileNumber("readyTimeoutMs"),
    30_000,
    0,
    86_400_000,
    "milliseconds",
  );
  const logFormatSource = flag("log-format", flags["log-format"]) ?? fileString("logFormat");
  const logFormat = (logFormatSource?.value ?? "auto") as ClientSettings["logFormat"];
  if (!["auto", "pretty", "json"].includes(logFormat)) {
    fail(logFormatSource!.where, `must be auto, pretty or json, got "${logFormat}"`);
  }

  const proxySource = flag("proxy-protocol", flags["proxy-protocol"]) ??
    fileString("proxyProtocol");
  const proxyProtocol = proxySource?.value as "v1" | "v2" | undefined;
  if (proxySource && proxyProtocol !== "v1" && proxyProtocol !== "v2") {
    fail(proxySource.where, `must be v1 or v2, got "${proxySource.value}"`);
  }

  const group = flag("group", flags.group)?.value ?? fileString("group")?.value;
  let groupKey = variable("TUNNELMUX_GROUP_KEY")?.value;
  const groupKeyFile = fileString("groupKeyFile");
  if (groupKey === undefined && groupKeyFile) groupKey = readSecret(groupKeyFile);
  if (group !== undefined && !groupKey) {
    fail(
      flags.group !== undefined ? "--group" : "group",
      `group ${group} needs the group's key in TUNNELMUX_GROUP_KEY (or groupKeyFile)`,
    );
  }
  const shared = flags.shared ?? fileBoolean("shared")?.value ?? false;
  const membership = group !== undefined ? { group, groupKey } : shared ? { shared: true } : {};

  let health: HealthOptions | undefined;
  const healthSource = flag("health", flags.health) ?? fileString("health");
  if (healthSource) {
    const text = healthSource.value;
    const http = /^http:(\/[^=\s]*)(?:=(\d{3}))?$/.exec(text);
    if (text === "tcp") health = { check: { kind: "tcp" } };
    else if (http) {
      health = {
        check: { kind: "http", path: http[1], status: http[2] ? Number(http[2]) : undefined },
      };
    } else fail(healthSource.where, `must be "tcp" or "http:/PATH[=STATUS]", got "${text}"`);
    const interval = flag("health-interval-ms", flags["health-interval-ms"]) ??
      fileNumber("healthIntervalMs");
    if (health && interval) {
      health.intervalMs = integer(interval, 5_000, 100, 3_600_000, "milliseconds");
    }
  }

  const httpPolicy = httpPolicySetting(
    file.httpPolicy,
    [
      ...fileList("basicAuth"),
      ...(flags["basic-auth"] ?? []).map((value) => ({ value, where: "--basic-auth" })),
    ],
    flag("host-rewrite", flags["host-rewrite"]),
    fail,
  );
  // ---- the visitor policy of every tunnel: the file's `visitors`, the flags over it ----
  let policy: VisitorPolicy | undefined;
  {
    const raw: Record<string, unknown> = file.visitors === undefined
      ? {}
      : typeof file.visitors === "object" && file.visitors !== null && !Array.isArray(file.visitors)
      ? { ...file.visitors as Record<string, unknown> }
      : (fail("visitors", "expected an object (see docs/policy.md)"), {});
    const where: Record<string, string> = {};
    const addList = (key: "allow" | "deny", name: "allow-ip" | "deny-ip") => {
      const values = flags[name];
      if (!values || values.length === 0) return;
      const before = Array.isArray(raw[key]) ? raw[key] as unknown[] : [];
      raw[key] = [...before, ...values.flatMap((v) => v.split(",")).map((v) => v.trim())];
      where[key] = `--${name}`;
    };
    addList("allow", "allow-ip");
    addList("deny", "deny-ip");
    const setNumber = (key: string, name: keyof ClientFlags, bytes = false) => {
      const text = flags[name] as string | undefined;
      if (text === undefined) return;
      const n = bytes ? parseBytes(text) : /^\d+$/.test(text) ? Number(text) : undefined;
      if (n === undefined) {
        return fail(
          `--${name}`,
          `must be ${bytes ? "bytes (N, Nk, Nm or Ng)" : "a number"}, got "${text}"`,
        );
      }
      if (key.startsWith("bandwidth.")) {
        const bandwidth = typeof raw.bandwidth === "object" && raw.bandwidth !== null
          ? { ...raw.bandwidth as Record<string, unknown> }
          : {};
        bandwidth[key.slice("bandwidth.".length)] = n;
        raw.bandwidth = bandwidth;
      } else raw[key] = n;
      where[key] = `--${name}`;
    };
    setNumber("connectionsPerSecond", "rate");
    setNumber("tunnelConnectionsPerSecond", "tunnel-rate");
    setNumber("connectionsPerVisitor", "max-conn-per-visitor");
    setNumber("bandwidth.in", "bandwidth-in", true);
    setNumber("bandwidth.out", "bandwidth-out", true);
    if (Object.keys(raw).length > 0) {
      const parsed = parseVisitorPolicy(raw, "visitors");
      if (parsed.ok) policy = parsed.policy;
      else {
        // Named by the flag that set the bad value, else by its path in the file.
        const colon = parsed.error.indexOf(": ");
        const path = parsed.error.slice(0, colon).replace(/\[\d+\]$/, "");
        const flagName = where[path.slice("visitors.".length)];
        fail(flagName ?? parsed.error.slice(0, colon), parsed.error.slice(colon + 2));
      }
    }
  }
  // An HTTP tunnel's policy: `httpPolicy` (and its flags) as its `http` part, over `visitors.http`;
  // other tunnels carry no HTTP rules.
  const httpWithPolicy = policy || httpPolicy
    ? { policy: { ...(policy ?? {}), ...(httpPolicy ? { http: httpPolicy } : {}) } }
    : {};
  const { http: _http, ...plain } = policy ?? {};
  const withPolicy = Object.keys(plain).length > 0 ? { policy: plain } : {};

  // ---- the lists: the file's first, then the flags' ----
  const list = (key: "expose" | "http" | "tls" | "forward" | "offer" | "use") => [
    ...fileList(key),
    ...(flags[key] ?? []).map((value) => ({ value, where: `--${key}` })),
  ];
  const udpForwards = [
    ...fileList("forwardUdp"),
    ...(flags["forward-udp"] ?? []).map((value) => ({ value, where: "--forward-udp" })),
  ];
  const pair = (source: Sourced<string>): [string, string] | undefined => {
    const at = source.value.indexOf("=");
    if (at <= 0 || at === source.value.length - 1) {
      fail(source.where, `expects A=B, got "${source.value}"`);
      return undefined;
    }
    return [source.value.slice(0, at), source.value.slice(at + 1)];
  };
  const hostPort = (source: Sourced<string>, text: string, what: string): boolean => {
    try {
      parseHostPort(text);
      return true;
    } catch {
      fail(source.where, `bad ${what} "${text}" in "${source.value}" (HOST:PORT)`);
      return false;
    }
  };
  // A listen address may be a bare port (loopback), as an expose's remote port may.
  const listenAddress = (source: Sourced<string>, listen: string): string | undefined => {
    const address = /^\d+$/.test(listen) ? `127.0.0.1:${listen}` : listen;
    return hostPort(source, address, "listen address") ? address : undefined;
  };

  let inspect: InspectSettings | undefined;
  const inspectFile = file.inspect;
  if (
    inspectFile !== undefined && typeof inspectFile !== "boolean" && typeof inspectFile !== "string"
  ) {
    fail("inspect", 'expected true, false or an address ("127.0.0.1:4040")');
  }
  const inspectSource: Sourced<string> | undefined = flags.inspect !== undefined
    ? { value: flags.inspect, where: "--inspect" }
    : inspectFile === true
    ? { value: "", where: "inspect" }
    : typeof inspectFile === "string"
    ? { value: inspectFile, where: "inspect" }
    : undefined;
  if (inspectSource) {
    const text = inspectSource.value === "" ? "127.0.0.1:4040" : inspectSource.value;
    const address = /^\d+$/.test(text) ? `127.0.0.1:${text}` : text;
    let inspectToken = variable("TUNNELMUX_INSPECT_TOKEN")?.value;
    const inspectTokenFile = fileString("inspectTokenFile");
    if (inspectToken === undefined && inspectTokenFile) inspectToken = readSecret(inspectTokenFile);
    if (inspectToken !== undefined && inspectToken.length < 16) {
      fail("TUNNELMUX_INSPECT_TOKEN", "the inspector's token must have at least 16 characters");
    }
    if (hostPort(inspectSource, address, "inspector address")) {
      const { hostname } = parseHostPort(address);
      if (!isLoopbackName(hostname) && inspectToken === undefined) {
        fail(
          inspectSource.where,
          `the inspector on ${address} would be reachable from other machines and shows ` +
            "requests with their bodies: set TUNNELMUX_INSPECT_TOKEN (or inspectTokenFile), " +
            "or use a loopback address",
        );
      }
    }
    inspect = {
      address,
      unredacted: flags["inspect-unredacted"] ?? fileBoolean("inspectUnredacted")?.value ?? false,
      token: inspectToken,
    };
  } else if (flags["inspect-unredacted"]) {
    fail("--inspect-unredacted", "only applies with --inspect");
  }

  const exposes: ExposeSpec[] = [];
  const udpExposes = [
    ...fileList("exposeUdp"),
    ...(flags["expose-udp"] ?? []).map((value) => ({ value, where: "--expose-udp" })),
  ];
  const allExposes = [
    ...list("expose").map((source) => ({ source, udp: false })),
    ...udpExposes.map((source) => ({ source, udp: true })),
  ];
  for (const { source, udp } of allExposes) {
    const parts = pair(source);
    if (!parts) continue;
    const [remote, local] = parts;
    const split = splitHostPort(remote);
    const bindHost = split?.host ? split.host : undefined;
    const portText = bindHost !== undefined ? split!.port : remote;
    const remotePort = Number(portText);
    if (!/^\d+$/.test(portText) || remotePort > 65535) {
      fail(source.where, `bad port in "${source.value}" (0 to 65535)`);
      continue;
    }
    // Every member of a group serves one UDP port, which each must name.
    if (udp && group !== undefined && remotePort === 0) {
      fail(source.where, `a group's UDP port must be named, not 0 ("${source.value}")`);
      continue;
    }
    if (!hostPort(source, local, "local address")) continue;
    exposes.push({
      // A UDP port is apart from the TCP port of the same number.
      key: udp ? `udp ${source.value}` : source.value,
      remotePort,
      bindHost,
      local,
      // A UDP flow has no PROXY header nor TCP health check to give.
      ...(udp ? { protocol: "udp" as const } : { proxyProtocol, health }),
      ...membership,
      ...withPolicy,
    });
  }
  // HTTP tunnels: NAME=LOCAL, NAME a label under the daemon's base domain or a full host name.
  for (const source of list("http")) {
    const parts = pair(source);
    if (!parts || !hostPort(source, parts[1], "local address")) continue;
    exposes.push({
      key: `http ${source.value}`,
      remotePort: 0,
      http: parts[0],
      local: parts[1],
      health,
      ...httpWithPolicy,
    });
  }
  // TLS tunnels: the same names, on the daemon's HTTPS port, passed through to a TLS service.
  for (const source of list("tls")) {
    const parts = pair(source);
    if (!parts || !hostPort(source, parts[1], "local address")) continue;
    exposes.push({
      key: `tls ${source.value}`,
      remotePort: 0,
      tls: parts[0],
      local: parts[1],
      health,
      ...withPolicy,
    });
  }
  const forwards: ForwardSpec[] = [];
  for (const source of list("forward")) {
    const parts = pair(source);
    if (!parts) continue;
    const listen = listenAddress(source, parts[0]);
    if (listen && hostPort(source, parts[1], "target")) {
      forwards.push({ key: `forward ${source.value}`, listen, target: parts[1] });
    }
  }
  for (const source of udpForwards) {
    const parts = pair(source);
    if (!parts) continue;
    const listen = listenAddress(source, parts[0]);
    if (listen && hostPort(source, parts[1], "target")) {
      forwards.push({
        key: `forward-udp ${source.value}`,
        listen,
        target: parts[1],
        protocol: "udp",
      });
    }
  }
  for (const source of list("use")) {
    const parts = pair(source);
    if (!parts) continue;
    const listen = listenAddress(source, parts[0]);
    if (listen) forwards.push({ key: `use ${source.value}`, listen, service: parts[1] });
  }
  /**
   * The SOCKS5 front: `--socks [ADDR]` (or `socks`: an address, or true for the default one),
   * its username (`--socks-user`, `socksUser`) and password (TUNNELMUX_SOCKS_PASSWORD, or a file:
   * `--socks-password-file`, `socksPasswordFile`; never a flag, as the token is not).
   */
  const socksSettings = (): SocksSpec | undefined => {
    const fileValue = file.socks;
    let source: Sourced<string> | undefined = flag("socks", flags.socks);
    if (!source && fileValue !== undefined && fileValue !== false) {
      if (fileValue === true) source = { value: DEFAULT_SOCKS_LISTEN, where: "socks" };
      else source = fileString("socks");
    }
    const userSource = flag("socks-user", flags["socks-user"]) ?? fileString("socksUser");
    const passwordFile = flag("socks-password-file", flags["socks-password-file"]) ??
      variable("TUNNELMUX_SOCKS_PASSWORD_FILE") ?? fileString("socksPasswordFile");
    let password = variable("TUNNELMUX_SOCKS_PASSWORD")?.value;
    if (passwordFile && (flags["socks-password-file"] !== undefined || password === undefined)) {
      password = readSecret(passwordFile);
    }
    if (!source) {
      // Variables may be set for every client of a machine; flags and the file speak for this one.
      const stray = userSource ??
        (passwordFile?.where !== "TUNNELMUX_SOCKS_PASSWORD_FILE" ? passwordFile : undefined);
      if (stray) fail(stray.where, "SOCKS credentials need --socks (or socks)");
      return undefined;
    }
    const listen = listenAddress(source, source.value);
    if (!listen) return undefined;
    const user = userSource?.value;
    if (user !== undefined && password === undefined && !passwordFile) {
      fail(
        userSource!.where,
        "a SOCKS username needs its password: TUNNELMUX_SOCKS_PASSWORD, --socks-password-file " +
          "or socksPasswordFile",
      );
      return undefined;
    }
    if (user === undefined && password !== undefined) {
      fail(
        passwordFile?.where ?? "TUNNELMUX_SOCKS_PASSWORD",
        "a SOCKS password needs its username: --socks-user or socksUser",
      );
      return undefined;
    }
    const spec = { listen, ...(user !== undefined ? { user, password } : {}) };
    const problem = socksOptionsProblem(spec);
    if (problem) fail(source.where, problem);
    return problem ? undefined : spec;
  };
  const socks = socksSettings();
  const offers: OfferSpec[] = [];
  for (const source of list("offer")) {
    const parts = pair(source);
    if (!parts || !hostPort(source, parts[1], "local address")) continue;
    offers.push({
      key: source.value,
      name: parts[0],
      local: parts[1],
      options: { ...(group !== undefined ? { group, groupKey } : {}), health },
    });
  }
  if (
    exposes.length + forwards.length + offers.length === 0 && !socks && errors.length === 0
  ) {
    fail(
      "(client)",
      "nothing to do: give --expose, --expose-udp, --http, --tls, --forward, --forward-udp, " +
        "--socks, --offer or --use (see --help)",
    );
  }

  if (errors.length > 0) return { errors };
  return {
    errors,
    settings: {
      file: filePath,
      servers,
      token: token!,
      name,
      caCerts,
      ha,
      reconnect,
      readyTimeoutMs,
      keepAliveInterval,
      keepAliveTimeout,
      streamWindow,
      logFormat,
      exposes,
      forwards,
      ...(socks ? { socks } : {}),
      offers,
      inspect,
    },
  };
}

/**
 * The `policy.http` of the client's HTTP tunnels: the file's `httpPolicy` (checked as the daemon
 * will), with `--basic-auth USER:PASSWORD` users added (hashed here: the password never leaves;
 * `USER:scrypt:…` is taken as a hash already made) and `--host-rewrite`.
 */
function httpPolicySetting(
  fromFile: unknown,
  users: Sourced<string>[],
  hostRewrite: Sourced<string> | undefined,
  fail: (where: string, message: string) => void,
): HttpPolicy | undefined {
  const value: Record<string, unknown> = isObject(fromFile) ? { ...fromFile } : {};
  if (fromFile !== undefined && !isObject(fromFile)) fail("httpPolicy", "expected an object");
  const basicAuth = Array.isArray(value.basicAuth) ? [...value.basicAuth] : [];
  for (const source of users) {
    const colon = source.value.indexOf(":");
    if (colon <= 0 || colon === source.value.length - 1) {
      fail(source.where, "expects USER:PASSWORD (or USER:scrypt:… from tunnelmux hash-password)");
      continue;
    }
    const secret = source.value.slice(colon + 1);
    basicAuth.push({
      user: source.value.slice(0, colon),
      passwordHash: secret.startsWith(PASSWORD_HASH_PREFIX) ? secret : hashPasswordSync(secret),
    });
  }
  if (basicAuth.length > 0) value.basicAuth = basicAuth;
  if (hostRewrite) value.hostRewrite = hostRewrite.value;
  if (Object.keys(value).length === 0) return undefined;
  const parsed = parseHttpPolicy(value, "httpPolicy");
  if (!parsed.ok) {
    // An error in what a flag gave is named by the flag.
    const where = users.length > 0 && parsed.error.startsWith("httpPolicy.basicAuth")
      ? users[0].where
      : hostRewrite && parsed.error.startsWith("httpPolicy.hostRewrite")
      ? hostRewrite.where
      : parsed.error.slice(0, parsed.error.indexOf(":"));
    fail(where, parsed.error.slice(parsed.error.indexOf(":") + 2));
    return undefined;
  }
  return parsed.policy;
}

/** Whether `hostname` is `localhost` or a loopback address (127/8, ::1). */
export function isLoopbackName(hostname: string): boolean {
  const name = hostname.replace(/^\[|\]$/g, "").toLowerCase();
  if (name === "localhost") return true;
  const ip = parseIp(name);
  if (!ip) return false;
  const plain = unmapIPv4(ip);
  return plain.family === 4
    ? plain.bytes[0] === 127
    : plain.bytes.every((b, i) => b === (i === 15 ? 1 : 0));
}

/** A readable report of `errors`, one per line, for the command's stderr. */
export function formatSettingsErrors(errors: readonly SettingsError[], file?: string): string {
  const head = `client: ${errors.length} problem${errors.length === 1 ? "" : "s"}${
    file ? ` (config ${file})` : ""
  }:`;
  return [head, ...errors.map((e) => `  ${e.where}: ${e.message}`)].join("\n");
}
