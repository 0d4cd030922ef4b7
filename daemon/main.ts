/**
 * `tunnelmux daemon`: the command line. Only wiring: it loads the configuration, starts a
 * {@linkcode Daemon}, and maps signals to drain, stop and reload.
 *
 * @module
 */

import {
  exitHost,
  hostArgs,
  hostEnv,
  onHostSignal,
  stderrIsTerminal,
  warmTimers,
  watchLauncher,
  writeStderr,
} from "../util/host/host.ts";
import { parseArgs } from "../util/parse/parse_args.ts";
import { type ConfigFlags, formatConfigReport, loadConfig } from "./config/mod.ts";
import { Daemon, listenerLines } from "./daemon.ts";
import type { AdminServer } from "./admin/start.ts";
import { HEALTHCHECK_TIMEOUT_MS, probe, readyzUrl } from "./healthcheck.ts";
import { Logger } from "../util/log.ts";
import { argsErrorMessage } from "../util/parse/args_error.ts";
import { closest } from "../util/parse/suggest.ts";
import { watchFile } from "../util/files/watch_file.ts";
import { collectWhenIdle } from "../util/host/idle_collector.ts";

const HELP = `tunnelmux daemon: a multiplexed tunnel server (yamux over TCP and WebSocket)

Usage:
  tunnelmux daemon [options]       run (embedded defaults: tunnels on 127.0.0.1:7000 over TCP
                                   and 127.0.0.1:7080/tunnel over WebSocket)
  tunnelmux daemon check [--config FILE]
                                   validate the configuration and report every error
  tunnelmux daemon healthcheck [--url URL]
                                   exit 0 if the admin API's /readyz answers 200, else 1; the
                                   URL defaults to the configured admin listener (a wildcard
                                   bind is probed on loopback); --timeout MS bounds it (3000)

Options (each overrides the config file and the matching TUNNELMUX_* variable):
  --config FILE              JSON or JSONC config file (env TUNNELMUX_CONFIG)
  --listen-tcp HOST:PORT     yamux over TCP, or "off" (TUNNELMUX_LISTEN_TCP)
  --listen-ws HOST:PORT      yamux over WebSocket, or "off" (TUNNELMUX_LISTEN_WS)
  --listen-admin HOST:PORT   admin API, or "off" (TUNNELMUX_LISTEN_ADMIN)
  --listen-http HOST:PORT    HTTP tunnels' shared port: requests routed by Host to the client
                             holding the name, or "off" (default; TUNNELMUX_LISTEN_HTTP)
  --listen-https HOST:PORT   HTTPS and TLS tunnels' shared port: connections routed by their
                             TLS server name, terminated with --https-cert or passed through
                             to the client, or "off" (default; TUNNELMUX_LISTEN_HTTPS)
  --http-domain DOMAIN       base domain: a client's --http NAME holds NAME.DOMAIN
                             (TUNNELMUX_HTTP_DOMAIN)
  --https-cert FILE          certificate (PEM) the HTTPS port terminates with, e.g. a wildcard
                             for the base domain; replaces http.certificates
                             (TUNNELMUX_HTTPS_CERT)
  --https-key FILE           its private key (TUNNELMUX_HTTPS_KEY)
  --data-dir DIR             state directory (TUNNELMUX_DATA_DIR)
  --log-level LEVEL          debug, info, warn or error (TUNNELMUX_LOG_LEVEL)
  --log-format FORMAT        auto, pretty or json (TUNNELMUX_LOG_FORMAT)
  --tls-cert FILE            TLS certificate (PEM): serve TLS and wss:// (TUNNELMUX_TLS_CERT)
  --tls-key FILE             TLS private key (TUNNELMUX_TLS_KEY)
  --keepalive-interval-ms MS ping a client after MS without a frame from it; keep it below any
                             proxy's or CDN's idle timeout (default 30000;
                             TUNNELMUX_KEEPALIVE_INTERVAL_MS)
  --keepalive-timeout-ms MS  close a session whose ping is unanswered for MS (default 30000;
                             TUNNELMUX_KEEPALIVE_TIMEOUT_MS)
  --http-response-timeout-ms MS
                             answer an HTTP tunnel's visitor 504 when no response head came MS
                             after its request was all sent (default 60000;
                             TUNNELMUX_HTTP_RESPONSE_TIMEOUT_MS)
  --cluster-servers URLS     join a cluster through these NATS servers, comma-separated
                             (TUNNELMUX_CLUSTER_SERVERS; the cluster key comes from
                             TUNNELMUX_CLUSTER_KEY or the file, and while rotating it the
                             keys still accepted from TUNNELMUX_CLUSTER_PREVIOUS_KEYS
                             (comma-separated) or the file's cluster.previousKeys; never
                             from flags; see docs/cluster.md)
  --cluster-node NAME        this node's name in the cluster (default: the host name)
  --cluster-listen HOST:PORT where other nodes' relay sessions arrive (default 0.0.0.0:7090;
                             port 0: any free port)
  --cluster-advertise HOST:PORT
                             the address other nodes dial for that listener (default: the
                             listen address; needed when its host is 0.0.0.0 or ::; port 0:
                             the port the listener got)
  --cluster-tunnel-host HOST bind tunnel ports on HOST (nodes sharing one machine)
  --watch-config             reload the config file each time it changes, as SIGHUP does
                             (for Windows, which has no SIGHUP)
  -h, --help                 show this help

With no clients configured, a client named "default" is created; its token is TUNNELMUX_TOKEN
or, if unset, generated and printed once at start. The admin API (default 127.0.0.1:7081) takes
the bearer token TUNNELMUX_ADMIN_TOKEN, likewise generated and printed once when unset.
An HTTP tunnel's OIDC login (policy.http.oidc, docs/policy.md) encrypts its session cookies
with TUNNELMUX_HTTP_SESSION_KEY (32 bytes, base64url; the same on every node of a cluster) or,
unset, a key made at the first login in the data dir (http-session.key).

Signals: SIGTERM or SIGINT drain (GoAway to every client, up to the grace period, default
30 s); a second one stops at once (copies of SIGINT or SIGTERM within 200 ms of each other are
one: Ctrl-C under npm arrives twice). SIGHUP reloads clients, tokens and allowlists and closes sessions whose
token was revoked. Started by npm or bin/tunnelmux.mjs, the daemon drains and stops when that
launcher dies (npm itself dies of SIGHUP: send it to the daemon's pid to reload).`;

/** The daemon command's flags, as `parseArgs` takes them. */
const OPTIONS = {
  config: { type: "string" },
  "listen-tcp": { type: "string" },
  "listen-ws": { type: "string" },
  "listen-admin": { type: "string" },
  "listen-http": { type: "string" },
  "listen-https": { type: "string" },
  "http-domain": { type: "string" },
  "https-cert": { type: "string" },
  "https-key": { type: "string" },
  "data-dir": { type: "string" },
  "log-level": { type: "string" },
  "log-format": { type: "string" },
  "tls-cert": { type: "string" },
  "tls-key": { type: "string" },
  "keepalive-interval-ms": { type: "string" },
  "keepalive-timeout-ms": { type: "string" },
  "http-response-timeout-ms": { type: "string" },
  "cluster-servers": { type: "string" },
  "cluster-node": { type: "string" },
  "cluster-listen": { type: "string" },
  "cluster-advertise": { type: "string" },
  "cluster-tunnel-host": { type: "string" },
  url: { type: "string" },
  timeout: { type: "string" },
  "watch-config": { type: "boolean" },
  help: { type: "boolean", short: "h" },
} as const;

/** Flags people try that do not exist: secrets never come from flags (the process list). */
const FLAG_HINTS = {
  "--token": "the default client's token comes from TUNNELMUX_TOKEN (or the config's clients)",
  "--admin-token": "the admin API's token comes from TUNNELMUX_ADMIN_TOKEN",
};

/**
 * Runs `tunnelmux daemon` with `args` (the words after the command) and resolves with the exit
 * code. Run directly, this file passes its own arguments.
 */
export async function main(args: string[] = hostArgs()): Promise<number> {
  args = [...args];
  if (args[0] === "--") args.shift();
  let parsed;
  try {
    parsed = parseArgs({ args, allowPositionals: true, options: OPTIONS });
  } catch (error) {
    // One line naming the mistake (node:util's own ends in an unbalanced quote), not the help.
    console.error(
      `daemon: ${
        argsErrorMessage(error as Error, OPTIONS, FLAG_HINTS)
      } (see tunnelmux daemon --help)`,
    );
    return 2;
  }
  const { values, positionals } = parsed;
  if (values.help) {
    console.log(HELP);
    return 0;
  }
  const flags: ConfigFlags = {
    config: values.config,
    listenTcp: values["listen-tcp"],
    listenWebsocket: values["listen-ws"],
    listenAdmin: values["listen-admin"],
    listenHttp: values["listen-http"],
    listenHttps: values["listen-https"],
    httpDomain: values["http-domain"],
    httpsCert: values["https-cert"],
    httpsKey: values["https-key"],
    dataDir: values["data-dir"],
    logLevel: values["log-level"],
    logFormat: values["log-format"],
    tlsCert: values["tls-cert"],
    tlsKey: values["tls-key"],
    keepaliveIntervalMs: values["keepalive-interval-ms"],
    keepaliveTimeoutMs: values["keepalive-timeout-ms"],
    httpResponseTimeoutMs: values["http-response-timeout-ms"],
    clusterServers: values["cluster-servers"],
    clusterNode: values["cluster-node"],
    clusterListen: values["cluster-listen"],
    clusterAdvertise: values["cluster-advertise"],
    clusterTunnelHost: values["cluster-tunnel-host"],
  };
  const command = positionals[0] ?? "run";
  if (command !== "run" && command !== "check" && command !== "healthcheck") {
    const near = closest(command, ["run", "check", "healthcheck"]);
    console.error(
      `daemon: unknown command "${command}"${
        near ? ` (did you mean "${near}"?)` : ""
      } (see tunnelmux daemon --help)`,
    );
    return 2;
  }
  if (command !== "healthcheck" && (values.url !== undefined || values.timeout !== undefined)) {
    console.error(`daemon: --url and --timeout belong to the healthcheck command`);
    return 2;
  }
  if (command === "healthcheck") return await healthcheck(flags, values.url, values.timeout);
  const configFile = flags.config ?? hostEnv().TUNNELMUX_CONFIG;
  if (values["watch-config"] && !configFile) {
    console.error("daemon: --watch-config needs a config file (--config or TUNNELMUX_CONFIG)");
    return 2;
  }
  const loaded = await loadConfig({ env: hostEnv(), flags });
  if (command === "check" || loaded.errors.length > 0) {
    const report = formatConfigReport(loaded);
    (loaded.errors.length > 0 ? console.error : console.log)(report);
    return loaded.errors.length > 0 ? 1 : 0;
  }
  const config = loaded.config!;
  const pretty = config.log.format === "pretty" ||
    (config.log.format === "auto" && stderrIsTerminal());
  const log = new Logger({
    level: config.log.level,
    format: pretty ? "pretty" : "json",
    sink: (line) => writeStderr(line + "\n"),
  });
  for (const warning of loaded.warnings) {
    log.warn("configuration", { path: warning.path, detail: warning.message });
  }
  const daemon = new Daemon(config, { log });
  await daemon.start();
  // Signals are handled from the moment the listeners are up (before they are announced), so a
  // process manager's SIGTERM right after the start drains instead of killing.
  // A repeat within SIGNAL_REPEAT_MS is the same signal passed on by a launcher
  // (util/host/host.ts).
  let signals = 0;
  const shutdown = (signal: string) => {
    if (++signals > 1) {
      log.warn("second signal: stopping now", { signal });
      return daemon.stop();
    }
    log.info("signal: draining", { signal });
    void daemon.drain();
  };
  onHostSignal("SIGTERM", () => shutdown("SIGTERM"));
  onHostSignal("SIGINT", () => shutdown("SIGINT"));
  // Started by a launcher that died (npm killed by a SIGHUP it does not pass on, a SIGKILLed
  // Node wrapper): drain and stop rather than keep listening under init.
  watchLauncher(() => {
    if (signals > 0) return;
    signals++;
    log.info("launcher gone: draining");
    void daemon.drain();
  });
  const reload = async () => {
    const next = await loadConfig({ env: hostEnv(), flags });
    if (next.errors.length > 0 || !next.config) {
      log.error("reload refused: the configuration has errors; keeping the old one", {
        detail: formatConfigReport(next),
      });
      return;
    }
    daemon.reload(next.config);
  };
  onHostSignal("SIGHUP", reload);
  if (values["watch-config"]) {
    const stopWatching = watchFile(configFile!, () => void reload());
    daemon.stopped.then(stopWatching);
    log.info("watching the config file for changes", { file: configFile });
  }
  for (const line of listenerLines(daemon.addresses, config.tls !== null)) console.log(line);
  warmTimers();
  // What a burst of visitors left behind goes back once it is over (Deno; see the module).
  daemon.stopped.then(collectWhenIdle());
  if (loaded.generated.token) {
    console.log(`token of client "default" (generated; set TUNNELMUX_TOKEN to choose one):`);
    console.log(`  ${loaded.generated.token}`);
  }
  // The admin API stays up while draining (so /readyz reports 503) and closes once stopped.
  let admin: AdminServer | undefined;
  if (config.listen.admin) {
    // Loaded only when asked for: the admin API (hono, the dashboard, the OpenAPI document) is
    // not on the path from start to the first tunnel.
    const { startAdmin } = await import("./admin/start.ts");
    admin = await startAdmin(daemon, { address: config.listen.admin, log }).catch((e) => {
      daemon.stop();
      throw e;
    });
    // Only a node whose admin API is on answers the other nodes' admin queries about itself.
    if (daemon.cluster) {
      const { answerQueries } = await import("./cluster/answers.ts");
      answerQueries(daemon.cluster, daemon);
    }
    console.log(`admin API on ${admin.url}`);
    if (loaded.generated.adminToken) {
      console.log(`admin token (generated; set TUNNELMUX_ADMIN_TOKEN to choose one):`);
      console.log(`  ${loaded.generated.adminToken}`);
    }
  }

  await daemon.stopped;
  await admin?.close(); // lets the answer to a POST /v1/drain that stopped us reach the caller
  return 0;
}

/**
 * `daemon healthcheck`: probes `url`, or the configured admin listener's `/readyz`. Prints one
 * line (stdout on success, stderr on failure) and never prints the generated tokens that loading
 * the configuration may mint.
 */
async function healthcheck(
  flags: ConfigFlags,
  url: string | undefined,
  timeout: string | undefined,
): Promise<number> {
  const timeoutMs = timeout === undefined ? HEALTHCHECK_TIMEOUT_MS : Number(timeout);
  if (!Number.isInteger(timeoutMs) || timeoutMs <= 0) {
    console.error(`daemon healthcheck: --timeout takes a positive number of ms, got "${timeout}"`);
    return 2;
  }
  if (url === undefined) {
    const loaded = await loadConfig({ env: hostEnv(), flags });
    if (!loaded.config) {
      console.error(`daemon healthcheck: ${formatConfigReport(loaded)}`);
      return 1;
    }
    if (!loaded.config.listen.admin) {
      console.error("daemon healthcheck: the admin API is off; pass --url");
      return 1;
    }
    url = readyzUrl(loaded.config.listen.admin);
  }
  const result = await probe(url, timeoutMs);
  (result.ok ? console.log : console.error)(`daemon healthcheck: ${result.detail}`);
  return result.ok ? 0 : 1;
}

if (import.meta.main) {
  try {
    exitHost(await main());
  } catch (error) {
    console.error(`daemon: ${(error as Error).message}`);
    exitHost(1);
  }
}
