/**
 * Loading the configuration in layers, later winning: embedded defaults < config file (JSON or
 * JSONC) < `TUNNELMUX_*` environment < command-line flags; then validation, and the report that
 * `daemon check` prints.
 *
 * @module
 */

import { readHostTextFile } from "../../util/host/host.ts";
import { formatHostPort, type HostPort } from "../../util/net/address.ts";
import type { Issue, ValidationResult } from "./types.ts";
import { embeddedDefaults } from "./defaults.ts";
import { mergeLayers, setOwn, suggest } from "./merge.ts";
import { isObject } from "../../util/parse/is_object.ts";
import { validateConfig } from "./validate.ts";
import { type JsoncResult, parseJsonc } from "../../util/parse/jsonc.ts";
import { generateToken } from "./token_hash.ts";

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
  /** `HOST:PORT` of HTTP tunnels' shared port, or `off`. */
  listenHttp?: string;
  /** `HOST:PORT` of HTTPS and TLS tunnels' shared port, or `off`. */
  listenHttps?: string;
  /** `http.domain`: the base domain of HTTP tunnels' names. */
  httpDomain?: string;
  /** A certificate file for the HTTPS port (with `httpsKey`): replaces `http.certificates`. */
  httpsCert?: string;
  /** Its private key file. */
  httpsKey?: string;
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
  /** `limits.keepAliveIntervalMs`, as typed (a number is checked by validation). */
  keepaliveIntervalMs?: string;
  /** `limits.keepAliveTimeoutMs`, as typed. */
  keepaliveTimeoutMs?: string;
  /** `limits.httpResponseTimeoutMs`, as typed. */
  httpResponseTimeoutMs?: string;
  /** `cluster.servers`: NATS URLs, comma-separated. */
  clusterServers?: string;
  /** `cluster.node`. */
  clusterNode?: string;
  /** `cluster.listen`. */
  clusterListen?: string;
  /** `cluster.advertise`. */
  clusterAdvertise?: string;
  /** `cluster.tunnelHost`. */
  clusterTunnelHost?: string;
}

/** Inputs of {@link loadConfig}; everything is passed in, nothing is read from globals. */
export interface LoadOptions {
  /** Environment variables (the caller passes `process.env` or `Deno.env.toObject()`). */
  env?: Record<string, string | undefined>;
  /** Command-line settings. */
  flags?: ConfigFlags;
  /** Reads the config file; `readHostTextFile` by default. */
  readFile?: (path: string) => Promise<string>;
}

/** Outcome of {@link loadConfig}. */
export interface LoadResult extends ValidationResult {
  /** The config file read, if any. */
  file?: string;
  /** Tokens generated because none was configured: print them once, they are stored only hashed. */
  generated: { token?: string; adminToken?: string };
}

// Layered settings: [environment variable, flag, path in the document]. The flag's command-line
// spelling is its key in kebab case, except where the CLI is shorter.
const OVERRIDES: [string, keyof ConfigFlags, string[]][] = [
  ["TUNNELMUX_LISTEN_TCP", "listenTcp", ["listen", "tcp"]],
  ["TUNNELMUX_LISTEN_WS", "listenWebsocket", ["listen", "websocket"]],
  ["TUNNELMUX_LISTEN_ADMIN", "listenAdmin", ["listen", "admin"]],
  ["TUNNELMUX_LISTEN_HTTP", "listenHttp", ["listen", "http"]],
  ["TUNNELMUX_LISTEN_HTTPS", "listenHttps", ["listen", "https"]],
  ["TUNNELMUX_HTTP_DOMAIN", "httpDomain", ["http", "domain"]],
  ["TUNNELMUX_DATA_DIR", "dataDir", ["dataDir"]],
  ["TUNNELMUX_LOG_LEVEL", "logLevel", ["log", "level"]],
  ["TUNNELMUX_LOG_FORMAT", "logFormat", ["log", "format"]],
  ["TUNNELMUX_TLS_CERT", "tlsCert", ["tls", "cert"]],
  ["TUNNELMUX_TLS_KEY", "tlsKey", ["tls", "key"]],
  ["TUNNELMUX_KEEPALIVE_INTERVAL_MS", "keepaliveIntervalMs", ["limits", "keepAliveIntervalMs"]],
  ["TUNNELMUX_KEEPALIVE_TIMEOUT_MS", "keepaliveTimeoutMs", ["limits", "keepAliveTimeoutMs"]],
  [
    "TUNNELMUX_HTTP_RESPONSE_TIMEOUT_MS",
    "httpResponseTimeoutMs",
    ["limits", "httpResponseTimeoutMs"],
  ],
  ["TUNNELMUX_CLUSTER_SERVERS", "clusterServers", ["cluster", "servers"]],
  ["TUNNELMUX_CLUSTER_NODE", "clusterNode", ["cluster", "node"]],
  ["TUNNELMUX_CLUSTER_LISTEN", "clusterListen", ["cluster", "listen"]],
  ["TUNNELMUX_CLUSTER_ADVERTISE", "clusterAdvertise", ["cluster", "advertise"]],
  ["TUNNELMUX_CLUSTER_TUNNEL_HOST", "clusterTunnelHost", ["cluster", "tunnelHost"]],
];
// Secrets come from the environment or the file, never from argv (visible in `ps`).
const SECRET_OVERRIDES: [string, string[]][] = [
  ["TUNNELMUX_CLUSTER_KEY", ["cluster", "key"]],
  ["TUNNELMUX_CLUSTER_PREVIOUS_KEYS", ["cluster", "previousKeys"]],
  ["TUNNELMUX_CLUSTER_TOKEN", ["cluster", "token"]],
  ["TUNNELMUX_CLUSTER_PASSWORD", ["cluster", "password"]],
];
const FLAG_SPELLING: Partial<Record<keyof ConfigFlags, string>> = {
  listenWebsocket: "--listen-ws",
};

function flagName(flag: keyof ConfigFlags): string {
  return FLAG_SPELLING[flag] ?? `--${flag.replace(/[A-Z]/g, (c) => "-" + c.toLowerCase())}`;
}
// One certificate for the HTTPS port from the environment or flags: it replaces the file's list.
const CERTIFICATE_OVERRIDE = {
  env: ["TUNNELMUX_HTTPS_CERT", "TUNNELMUX_HTTPS_KEY"],
  flags: ["httpsCert", "httpsKey"],
} as const;
const KNOWN_ENV = [
  ...OVERRIDES.map(([e]) => e),
  ...CERTIFICATE_OVERRIDE.env,
  "TUNNELMUX_TOKEN",
  "TUNNELMUX_ADMIN_TOKEN",
  "TUNNELMUX_CONFIG",
  ...SECRET_OVERRIDES.map(([e]) => e),
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
      text = await (options.readFile ?? readHostTextFile)(file);
    } catch (error) {
      const { code, name } = (error ?? {}) as { code?: unknown; name?: unknown };
      // Deno refuses a path its --allow-read does not cover with NotCapable and no code.
      if (name === "NotCapable" || name === "PermissionDenied") {
        return fail(
          `cannot read config file ${file}: the daemon is not allowed to read it (its --allow-read ` +
            `covers only some directories; in the image: /data, /etc/tunnelmux, /run/secrets, so ` +
            `mount the file under /etc/tunnelmux)`,
        );
      }
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
      // Durations arrive as text; a number in decimal becomes one, anything else stays text for
      // validation to refuse with its source named.
      const typed = path[0] === "limits" && /^\d+$/.test(value) ? Number(value) : value;
      // A variable that overrides the file is said: in the image, TUNNELMUX_LISTEN_* are set, and
      // a mounted config's listen would otherwise be ignored without a word.
      const inFile = valueAt(fromFile, path);
      if (layer === "env" && inFile !== undefined && String(inFile) !== String(value)) {
        warnings.push({
          path: path.join("."),
          message: `${envName}=${value} overrides the config file's ${
            JSON.stringify(inFile)
          } (unset the variable to use the file's)`,
        });
      }
      setPath(doc, path, off ? null : typed);
      sources.set(
        path.join("."),
        layer === "env" ? envName : flagName(flag),
      );
    }
  }
  for (const layer of ["env", "flag"] as const) {
    const [cert, key] = layer === "env"
      ? CERTIFICATE_OVERRIDE.env.map(envValue)
      : CERTIFICATE_OVERRIDE.flags.map((f) => flags[f]);
    if (cert === undefined && key === undefined) continue;
    if (!isObject(doc.http)) setOwn(doc, "http", {});
    // Validation names a missing half (an empty string is not a file).
    setOwn(doc.http as Record<string, unknown>, "certificates", [{
      cert: cert ?? "",
      key: key ?? "",
    }]);
    sources.set(
      "http.certificates",
      layer === "env" ? CERTIFICATE_OVERRIDE.env.join(" and ") : "--https-cert and --https-key",
    );
  }
  // Cluster secrets fill a cluster section the other layers made; alone they make none.
  for (const [envName, path] of SECRET_OVERRIDES) {
    const value = envValue(envName);
    if (value === undefined || !isObject(doc.cluster)) continue;
    setPath(doc, path, value);
    sources.set(path.join("."), envName);
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
    const source = [...sources].find(([p]) =>
      issue.path === p || issue.path.startsWith(p + ".") || issue.path.startsWith(p + "[")
    )
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
    const addr = (hp: HostPort | null) => hp ? formatHostPort(hp.hostname, hp.port) : "off";
    lines.push(`config OK${where}: ${count(c.clients.length, "client")}`);
    lines.push(
      `  tcp ${addr(c.listen.tcp)}${c.tls ? " (tls)" : ""}, websocket ${addr(c.listen.websocket)}${
        c.listen.websocket ? c.listen.websocketPath : ""
      }${c.tls ? " (wss)" : ""}, admin ${addr(c.listen.admin)}`,
    );
    if (c.listen.http || c.listen.https) {
      const acme = c.http.acme;
      lines.push(
        `  http ${addr(c.listen.http)}, https ${addr(c.listen.https)}, domain ${
          c.http.domain ?? "none"
        }, ${count(c.http.certificates.length, "certificate file")}${
          acme ? `, acme ${acme.directory} (${acme.challenge})` : ""
        }`,
      );
    }
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

/** The value at `path` in a parsed document, if every step exists. */
function valueAt(doc: Record<string, unknown>, path: readonly string[]): unknown {
  let at: unknown = doc;
  for (const key of path) {
    if (!isObject(at) || !Object.hasOwn(at, key)) return undefined;
    at = at[key];
  }
  return at;
}
