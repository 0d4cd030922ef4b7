/**
 * `tunnelmux client`: the command line over the SDK. Only wiring: read the settings (flags,
 * variables, a config file: `settings.ts`), connect, ask for the tunnels, forwards and offers, log
 * what happens, apply a changed config file on SIGHUP (or when it changes, with --watch-config),
 * close on SIGTERM or SIGINT.
 *
 * @module
 */

import type { VisitorPolicy } from "../tunnel/policy/visitor_policy.ts";
import {
  exitHost,
  hostArgs,
  hostEnv,
  onHostSignal,
  stderrIsTerminal,
  watchLauncher,
  writeStderr,
} from "../util/host/host.ts";
import { parseArgs } from "../util/parse/parse_args.ts";
import { argsErrorMessage } from "../util/parse/args_error.ts";
import { watchFile } from "../util/files/watch_file.ts";
import { collectWhenIdle } from "../util/host/idle_collector.ts";
import { Logger } from "../util/log.ts";
import { HaClient } from "./ha_client.ts";
import { DEFAULT_SOCKS_LISTEN } from "./tunnels/socks_options.ts";
import { Client } from "./client.ts";
import { streamWindowConfig } from "../protocol/config.ts";
import {
  type ClientFlags,
  type ClientSettings,
  clientSettings,
  formatSettingsErrors,
} from "./settings.ts";

const HELP = `tunnelmux client: hold tunnels through a tunnelmux daemon

Usage:
  tunnelmux client --server URL [options]
  tunnelmux client --config FILE [options]

Options:
  --config FILE                a JSONC file with the settings below (env
                               TUNNELMUX_CLIENT_CONFIG): server, tokenFile, name, ca, ha,
                               reconnect, readyTimeoutMs, keepAliveIntervalMs,
                               keepAliveTimeoutMs, streamWindow, group, groupKeyFile, shared,
                               proxyProtocol, health, healthIntervalMs, logFormat, socks (ADDR,
                               or true), socksUser, socksPasswordFile, visitors (the visitor
                               policy, docs/policy.md), httpPolicy (the HTTP tunnels' policy.http),
                               inspect (true or an address), inspectUnredacted,
                               inspectTokenFile, and the lists expose, exposeUdp, http, tls,
                               forward, forwardUdp, offer, use, basicAuth
                               (written as the flags are); flags override its values and add to its
                               lists; SIGHUP reads it again and applies the lists' changes
                               without dropping the session
  --watch-config               apply the config file's changes as SIGHUP does, each time the
                               file changes (for Windows, which has no SIGHUP)
  --token-file FILE            read the token from FILE (Docker and systemd secrets; env
                               TUNNELMUX_TOKEN_FILE)
  --server URL[,URL…]          the daemon: tcp://HOST:PORT, ws://HOST:PORT/tunnel or wss://…
                               or tls://HOST:PORT (env TUNNELMUX_SERVER); several (comma-
                               separated or repeated): the nodes of a cluster, tried in turn
                               when a connection fails or is lost; a host name with several
                               addresses (one DNS name for the nodes) is dialed at each in turn
  --expose [BIND:]PORT=LOCAL   the daemon listens on PORT (0 = any allowed port) and sends its
                               visitors to LOCAL (HOST:PORT) here; repeatable
  --expose-udp [BIND:]PORT=LOCAL
                               the daemon binds UDP PORT (the same port permissions as
                               --expose); each visitor address there is a flow whose datagrams
                               (up to 65507 bytes; larger ones are dropped and counted) reach
                               UDP LOCAL here from a socket of its own, replies go back; a flow
                               ends after the daemon's limits.udpFlowIdleMs without a
                               datagram; the visitor policy applies per flow; repeatable
  --http NAME=LOCAL            an HTTP tunnel: requests to the daemon's HTTP port (and HTTPS,
                               where it has a certificate for the name) whose Host is NAME (a
                               label under the daemon's domain, or a full host name the daemon
                               allows this client) go to LOCAL (HOST:PORT); repeatable
  --basic-auth USER:PASSWORD   every --http tunnel asks its visitors for basic auth; the
                               password is hashed here (scrypt) and never sent; better
                               USER:scrypt:… from "tunnelmux hash-password", since arguments
                               show in the process list; repeatable (any listed user gets in)
  --host-rewrite HOST[:PORT]   the Host header the --http tunnels' local services see
  --tls NAME=LOCAL             a TLS tunnel: connections to the daemon's HTTPS port whose TLS
                               server name is NAME go to LOCAL undecrypted (LOCAL serves TLS
                               with its own certificate); repeatable
  --forward LISTEN=TARGET      listen on LISTEN (HOST:PORT) here; each connection goes through
                               the daemon to TARGET (HOST:PORT); repeatable
  --socks [ADDR]               a SOCKS5 proxy on ADDR (HOST:PORT or PORT; default
                               127.0.0.1:1080): each CONNECT is a forward to the target the
                               SOCKS client names, the name resolved by the daemon and checked
                               against this client's forward allowlist there (socks5h:// works);
                               UDP ASSOCIATE too, each target a UDP flow under the same rules
                               (no fragments); BIND and SOCKS4 are refused; a non-loopback ADDR
                               needs credentials
  --socks-user NAME            require username/password (RFC 1929) on the SOCKS proxy; the
                               password comes from TUNNELMUX_SOCKS_PASSWORD or a file
                               (--socks-password-file FILE, env TUNNELMUX_SOCKS_PASSWORD_FILE),
                               never from a flag
  --forward-udp LISTEN=TARGET  bind UDP LISTEN (HOST:PORT) here; each sender's datagrams go
                               through the daemon to UDP TARGET (allowed by the same forward
                               rules), replies come back; repeatable
  --offer NAME=LOCAL           offer named service NAME, served by LOCAL here; repeatable
  --use LISTEN=NAME            listen on LISTEN here for named service NAME; repeatable
  --name NAME                  how the daemon's logs call this client
  --ca FILE                    extra CA certificate (PEM) to trust for tls:// and wss://
  --group NAME                 serve every --expose, --expose-udp and --offer as a member of
                               group NAME (the group key comes from TUNNELMUX_GROUP_KEY):
                               members share the public port or service name, visitors are
                               balanced across them (a UDP flow stays on its member; a UDP
                               member names its port, not 0)
  --health CHECK               check each --expose's and --offer's local service: "tcp" (a
                               connect) or "http:/PATH" (a GET answering 2xx/3xx;
                               "http:/PATH=204" for one status); 3 failures withdraw the route
                               (visitors go to the other routes), 2 successes restore it
  --health-interval-ms MS      between two checks (default 5000)
  --ha N                       keep N sessions, each to another node of the --server list,
                               all serving every --expose and --offer, any of them carrying
                               --forward and --use connections (default 1); warns while fewer
                               nodes than N are reached
  --shared                     let other sessions of this client serve the same ports (several
                               clients with one token, for high availability)
  --proxy-protocol v1|v2       send a PROXY protocol header to exposed local services, so they
                               see the visitor's real address

Visitor policy of every --expose, --expose-udp, --http and --tls (docs/policy.md; the daemon
narrows it by the operator's rules for this client, never widens it; a reload changes it in
place; for --expose-udp a new flow counts as a new connection, and a datagram over the bandwidth
is dropped):
  --allow-ip CIDR[,CIDR…]      only visitors from these networks (IPv4 or IPv6; an address is
                               one address); repeatable
  --deny-ip CIDR[,CIDR…]       never visitors from these networks (wins over --allow-ip);
                               repeatable
  --rate N                     new connections (HTTP: requests) per second per visitor address
  --tunnel-rate N              new connections per second to each tunnel, all visitors together
  --max-conn-per-visitor N     connections (HTTP: requests) at once per visitor address
  --bandwidth-in BYTES         bytes per second from visitors to the service, per tunnel
                               (N, or with a k, m or g suffix: 1m is 1048576)
  --bandwidth-out BYTES        bytes per second from the service to visitors, per tunnel
  --no-reconnect               exit when the connection is lost instead of reconnecting
  --ready-timeout-ms MS        give up (exit 1) when no session is ready MS after the start
                               (default 30000; 0: keep trying, for a client started before
                               its daemon); a lost session is reconnected whatever it says
  --keepalive-interval-ms MS   ping the daemon after MS without a frame from it; keep it below
                               any proxy's or CDN's idle timeout (default 30000;
                               env TUNNELMUX_KEEPALIVE_INTERVAL_MS)
  --keepalive-timeout-ms MS    reconnect when a ping is unanswered for MS (default 30000;
                               env TUNNELMUX_KEEPALIVE_TIMEOUT_MS)
  --stream-window BYTES        the largest receive window of a stream: what one stream carries
                               toward the services per round trip (default 6m, about a gigabit
                               at 50 ms; 256k to 64m; env TUNNELMUX_STREAM_WINDOW)
  --log-format FORMAT          auto, pretty or json (default auto: pretty on a terminal)
  --inspect [ADDR]             record every request through the --http tunnels and show them
                               at http://ADDR (default 127.0.0.1:4040; a bare port is on
                               127.0.0.1): headers, bodies up to 64 KiB, timings, the visitor's
                               address, replays (edited or not), HAR export; the last 500
                               requests (32 MiB at most) are kept. An address other machines can
                               reach needs a token in TUNNELMUX_INSPECT_TOKEN (the page asks for it)
  --inspect-unredacted         keep Authorization, Cookie and Set-Cookie values in the inspector
                               (default: shown and kept as [redacted], left out of replays)
  -h, --help                   show this help

The token comes from TUNNELMUX_TOKEN or a file (--token-file, tokenFile), never from a flag:
arguments are visible to every user of the machine in the process list. Every problem in the
flags, variables and file is reported at once, named by its flag or its path in the file.

Each --expose, --expose-udp, --http, --tls, --forward, --forward-udp, --socks, --offer and --use
stands alone: one that cannot start (a port or name another client holds, one the daemon does not
allow this client, a local port in use) is logged with its reason and left out, and the others
run.

Exit status: 0 after SIGTERM or SIGINT; 1 when the client gives up: settings that cannot work,
a mistake retrying cannot fix (a URL at the wrong kind of listener, a refused token), no
session within --ready-timeout-ms, the session lost with --no-reconnect, or nothing asked for
could start; 2 for a usage error (an unknown flag, nothing asked for).

Example:
  TUNNELMUX_TOKEN=… tunnelmux client --server ws://127.0.0.1:7080/tunnel \\
    --expose 8080=127.0.0.1:3000 --forward 127.0.0.1:15432=127.0.0.1:5432`;

/** The client command's flags, as `parseArgs` takes them. */
const OPTIONS = {
  config: { type: "string" },
  server: { type: "string", multiple: true },
  "token-file": { type: "string" },
  expose: { type: "string", multiple: true },
  "expose-udp": { type: "string", multiple: true },
  http: { type: "string", multiple: true },
  "basic-auth": { type: "string", multiple: true },
  "host-rewrite": { type: "string" },
  tls: { type: "string", multiple: true },
  forward: { type: "string", multiple: true },
  socks: { type: "string" },
  "socks-user": { type: "string" },
  "socks-password-file": { type: "string" },
  "forward-udp": { type: "string", multiple: true },
  offer: { type: "string", multiple: true },
  use: { type: "string", multiple: true },
  name: { type: "string" },
  ca: { type: "string" },
  "proxy-protocol": { type: "string" },
  group: { type: "string" },
  ha: { type: "string" },
  health: { type: "string" },
  "health-interval-ms": { type: "string" },
  shared: { type: "boolean" },
  "no-reconnect": { type: "boolean" },
  "ready-timeout-ms": { type: "string" },
  "keepalive-interval-ms": { type: "string" },
  "keepalive-timeout-ms": { type: "string" },
  "stream-window": { type: "string" },
  "log-format": { type: "string" },
  "watch-config": { type: "boolean" },
  inspect: { type: "string" },
  "inspect-unredacted": { type: "boolean" },
  "allow-ip": { type: "string", multiple: true },
  "deny-ip": { type: "string", multiple: true },
  rate: { type: "string" },
  "tunnel-rate": { type: "string" },
  "max-conn-per-visitor": { type: "string" },
  "bandwidth-in": { type: "string" },
  "bandwidth-out": { type: "string" },
  help: { type: "boolean", short: "h" },
} as const;

/** Flags people try that do not exist, and what to do instead. */
const FLAG_HINTS = {
  "--token": "the token is never a flag (the process list shows arguments to every user): " +
    "set TUNNELMUX_TOKEN or give --token-file FILE",
  "--socks-password": "a password is never a flag (the process list shows arguments to every " +
    "user): set TUNNELMUX_SOCKS_PASSWORD or give --socks-password-file FILE",
};

/**
 * `--socks` may stand without its address (the default one): parseArgs wants a value for a string
 * option, so a bare `--socks` (last, or before another option) gets the default spelled out.
 */
function defaultSocksAddress(args: string[]): string[] {
  return args.map((arg, i) =>
    arg === "--socks" && (i === args.length - 1 || args[i + 1].startsWith("-"))
      ? `--socks=${DEFAULT_SOCKS_LISTEN}`
      : arg
  );
}

/** What is running now for each expose, forward, use and offer, by the text that asked for it. */
type Running = Map<string, () => Promise<void>>;

/**
 * Runs `tunnelmux client` with `args` (the words after the command) and resolves with the exit
 * code. Run directly, this file passes its own arguments.
 */
export async function main(args: string[] = hostArgs()): Promise<number> {
  args = defaultSocksAddress(args);
  if (args[0] === "--") args.shift();
  // `--inspect` takes its address optionally: alone (last, or before another flag) it is the
  // default one. The client takes no positional words, so a word after it is its address.
  args = args.map((arg, i) =>
    arg === "--inspect" && (i + 1 >= args.length || args[i + 1].startsWith("-"))
      ? "--inspect="
      : arg
  );
  let flags: ClientFlags & { help?: boolean; "watch-config"?: boolean };
  try {
    flags = parseArgs({ args, options: OPTIONS }).values;
  } catch (error) {
    console.error(
      `client: ${
        argsErrorMessage(error as Error, OPTIONS, FLAG_HINTS)
      } (see tunnelmux client --help)`,
    );
    return 2;
  }
  if (flags.help) {
    console.log(HELP);
    return 0;
  }
  const first = clientSettings({ flags, env: hostEnv() });
  if (!first.settings) {
    const nothing = first.errors.length === 1 && first.errors[0].where === "(client)";
    console.error(
      nothing
        ? `client: ${first.errors[0].message}`
        : formatSettingsErrors(first.errors, flags.config ?? hostEnv().TUNNELMUX_CLIENT_CONFIG),
    );
    // Nothing asked for is a usage error (2); settings that cannot work, like the daemon's
    // config errors, exit 1.
    return nothing ? 2 : 1;
  }
  let settings = first.settings;
  if (flags["watch-config"] && settings.file === undefined) {
    console.error("client: --watch-config needs a config file (--config)");
    return 2;
  }

  const pretty = settings.logFormat === "pretty" ||
    (settings.logFormat === "auto" && stderrIsTerminal());
  const log = new Logger({
    level: "info",
    format: pretty ? "pretty" : "json",
    sink: (line) => writeStderr(line + "\n"),
  });

  // The inspector's modules (its web app among them) load only when it is asked for: without it
  // nothing looks at the tunnels' bytes.
  let inspector: import("./inspector/start.ts").InspectorServer | undefined;
  if (settings.inspect) {
    const { startInspector } = await import("./inspector/start.ts");
    try {
      inspector = await startInspector({
        address: settings.inspect.address,
        token: settings.inspect.token,
        unredacted: settings.inspect.unredacted,
      });
    } catch (error) {
      log.error(`cannot start the inspector: ${(error as Error).message}`, {
        address: settings.inspect.address,
      });
      return 1;
    }
    log.info("inspector listening", {
      url: inspector.url,
      redacted: !settings.inspect.unredacted,
      ...(settings.inspect.token ? { token: "required" } : {}),
    });
  }

  const connectOptions = {
    inspector,
    token: settings.token,
    name: settings.name,
    reconnect: settings.reconnect,
    session: {
      keepAliveInterval: settings.keepAliveInterval,
      keepAliveTimeout: settings.keepAliveTimeout,
      ...streamWindowConfig(settings.streamWindow),
    },
    caCerts: settings.caCerts,
  };
  // With --ha N, N sessions (each to another node when the URLs allow) serve every --expose
  // and --offer; each connection of a forward or use goes through a session that is ready.
  const ha = settings.ha > 1
    ? new HaClient(settings.servers, { ...connectOptions, sessions: settings.ha })
    : undefined;
  const client = ha ? ha.members[0] : new Client(settings.servers, connectOptions);
  const members = ha ? ha.members : [client];
  // Signals are handled from the start, so Ctrl-C during the first connect is a clean stop too.
  let stopping = false;
  const done = new Promise<number>((resolve) => {
    const stop = async (signal: string) => {
      if (stopping) return;
      stopping = true;
      log.info("closing", { signal });
      await Promise.all(members.map((m) => m.close()));
      resolve(0);
    };
    onHostSignal("SIGINT", () => stop("SIGINT"));
    onHostSignal("SIGTERM", () => stop("SIGTERM"));
    // Started by a launcher that died: close rather than stay behind under init.
    watchLauncher(() => stop("launcher gone"));
    for (const member of members) {
      member.on("state", (state) => {
        // Gave up (a fatal error, or no reconnect): when every session has.
        if (state === "closed" && !stopping && members.every((m) => m.state === "closed")) {
          resolve(1);
        }
      });
    }
  });
  /** Whether the error that closed the client was logged. */
  let toldWhy = false;
  members.forEach((member, i) => {
    const which = ha ? { session: i } : {};
    member.on("state", (state) => log.info(`state: ${state}`, which));
    member.on("ready", (info) => {
      log.info("session ready", { node: info.node, server: info.url, ...which });
    });
    // An error that closed the client is the one line that says why it stops.
    member.on("error", (error) => {
      const final = member.state === "closed";
      if (final) toldWhy = true;
      (final ? log.error : log.warn).call(log, error.message, { code: error.code, ...which });
    });
    member.on("health", ({ service, local, healthy, detail }) => {
      const what = { local, ...(service !== undefined ? { service } : {}), ...which };
      if (healthy) log.info("local service healthy again", what);
      else log.warn("local service unhealthy: route withdrawn", { ...what, detail });
    });
    member.on("tunnel", (t) => {
      log.info("tunnel up", {
        remote: `${t.remoteHost}:${t.remotePort}`,
        ...(t.url ? { url: t.url } : {}),
        ...(t.protocol === "udp" ? { protocol: "udp" } : {}),
        local: t.local,
        ...which,
      });
    });
  });
  // A forward's failed connection (the sessions' own errors are logged above).
  ha?.on("error", (error, session) => {
    if (session === -1) log.warn(error.message, { code: error.code });
  });
  ha?.on("degraded", ({ nodes, wanted }) => {
    log.warn(`running degraded: sessions on ${nodes.length} of ${wanted} nodes`, {
      nodes: nodes.join(","),
    });
  });
  ha?.on(
    "whole",
    ({ nodes }) => log.info("whole: a session on each node", { nodes: nodes.join(",") }),
  );

  const sdk = ha ?? client;
  const running: Running = new Map();
  /** The password the running SOCKS front checks, to tell when a reload changes it. */
  let socksPassword: string | undefined;
  /** Each running expose's visitor policy (as JSON) and how to change it in place. */
  const policies = new Map<
    string,
    { policy: string; set(policy: VisitorPolicy): Promise<void> }
  >();
  /**
   * Starts what `next` asks for and `running` lacks; stops what it no longer asks for. Each
   * stands or falls alone: one refused is logged with its reason and left out. Resolves with how
   * many could not start.
   */
  const apply = async (next: ClientSettings): Promise<number> => {
    let failed = 0;
    const socks = next.socks;
    // The password is no part of the key (keys are logged): a new one restarts the front.
    const socksKey = socks && `socks ${socks.listen}${socks.user ? ` user ${socks.user}` : ""}`;
    const wanted = new Set([
      ...next.exposes.map((e) => `expose ${e.key}`),
      ...next.forwards.map((f) => f.key),
      ...(socksKey ? [socksKey] : []),
      ...next.offers.map((o) => `offer ${o.key}`),
    ]);
    for (const [key, stop] of [...running]) {
      if (wanted.has(key) && !(key === socksKey && socks!.password !== socksPassword)) continue;
      running.delete(key);
      policies.delete(key);
      await stop().catch(() => {});
      log.info("stopped", { what: key });
    }
    const start = async (key: string, begin: () => Promise<() => Promise<void>>) => {
      if (running.has(key)) return;
      try {
        running.set(key, await begin());
      } catch (error) {
        failed++;
        const code = (error as { code?: unknown }).code;
        // "http NAME=LOCAL" as the flag was written, not "expose http …".
        const what = key.replace(/^expose (?=(http|tls) )/, "").replace(
          /^expose udp /,
          "expose-udp ",
        );
        log.error(`cannot start ${what}: ${(error as Error).message}`, {
          what,
          ...(typeof code === "string" ? { code } : {}),
        });
      }
    };
    for (const expose of next.exposes) {
      const key = `expose ${expose.key}`;
      const policy = JSON.stringify(expose.policy ?? {});
      const held = policies.get(key);
      if (running.has(key) && held && held.policy !== policy) {
        // The same tunnel with new visitor rules: changed in place, its visitors stay.
        try {
          await held.set(expose.policy ?? {});
          held.policy = policy;
          log.info("visitor policy changed", { what: key });
        } catch (error) {
          failed++;
          log.error(`cannot change the visitor policy of ${key}: ${(error as Error).message}`);
        }
        continue;
      }
      await start(key, async () => {
        const tunnel = await sdk.expose(expose);
        policies.set(key, { policy, set: (p) => tunnel.setPolicy(p) });
        return () => tunnel.close();
      });
    }
    for (const spec of next.forwards) {
      await start(spec.key, async () => {
        if (spec.protocol === "udp") {
          const udp = await sdk.forwardUdp({ listen: spec.listen, target: spec.target! });
          log.info("forwarding udp", { listen: udp.address, target: spec.target });
          return () => Promise.resolve(udp.close());
        }
        const forward = await sdk.forward(spec);
        if (spec.target !== undefined) {
          log.info("forwarding", { listen: forward.address, target: spec.target });
        } else log.info("using service", { listen: forward.address, service: spec.service });
        return () => Promise.resolve(forward.close());
      });
    }
    if (socks && socksKey) {
      await start(socksKey, async () => {
        const server = await sdk.socks(socks);
        socksPassword = socks.password;
        log.info("socks5 listening", {
          listen: server.address,
          auth: socks.user ? "username/password" : "none",
        });
        return () => server.close();
      });
    }
    for (const offer of next.offers) {
      await start(`offer ${offer.key}`, async () => {
        await sdk.offer(offer.name, offer.local, offer.options);
        log.info("offering service", { service: offer.name, local: offer.local });
        return () => sdk.withdraw(offer.name);
      });
    }
    return failed;
  };
  // SIGHUP, or a change of the file with --watch-config: the config file again; the lists'
  // changes are applied, the session stays.
  const reload = () => {
    const again = clientSettings({ flags, env: hostEnv() });
    if (!again.settings) {
      log.error("reload refused: keeping the running settings", {
        detail: formatSettingsErrors(again.errors, settings.file),
      });
      return;
    }
    const next = again.settings;
    const fixed = (["servers", "token", "ha", "name", "inspect"] as const).filter((k) =>
      JSON.stringify(next[k]) !== JSON.stringify(settings[k])
    );
    if (fixed.length > 0) {
      log.warn("reload: these take a restart and are left as they are", {
        settings: fixed.join(","),
      });
    }
    settings = next;
    apply(next).then(
      () => log.info("configuration reloaded", { running: running.size }),
      (error) => log.error("reload failed", { detail: String(error) }),
    );
  };
  onHostSignal("SIGHUP", reload);
  if (flags["watch-config"]) {
    const stopWatching = watchFile(settings.file!, reload);
    done.then(stopWatching);
    log.info("watching the config file for changes", { file: settings.file });
  }
  /** Connects and starts everything asked for; resolves with an exit code if the client stops. */
  const setUp = async (): Promise<number | undefined> => {
    const limit = settings.readyTimeoutMs;
    let timer: ReturnType<typeof setTimeout> | undefined;
    const timedOut = new Promise<"timeout">((resolve) => {
      if (limit > 0) timer = setTimeout(() => resolve("timeout"), limit);
    });
    try {
      if (await Promise.race([sdk.ready(), timedOut]) === "timeout") {
        const last = members.map((m) => m.lastError?.message).find((m) => m !== undefined);
        log.error(
          `no session with ${settings.servers.join(", ")} within ${limit} ms${
            last ? ` (last error: ${last})` : ""
          }; giving up (--ready-timeout-ms 0 keeps trying)`,
        );
        return 1;
      }
    } catch (error) {
      if (stopping) return undefined; // a signal during the first connect: a clean stop
      // Gave up: said by its error event, unless that came before the listeners (a bad URL).
      if (!toldWhy) {
        const code = (error as { code?: unknown }).code;
        log.error((error as Error).message, typeof code === "string" ? { code } : {});
      }
      return 1;
    } finally {
      clearTimeout(timer);
    }
    log.info("connected", { server: client.url, node: client.node });
    const failed = await apply(settings);
    if (failed > 0 && running.size === 0) {
      log.error(`nothing could be started (${failed} failed); exiting`);
      return 1;
    }
    if (failed > 0) {
      log.warn(`${failed} of ${failed + running.size} could not be started; the others run`);
    }
    return undefined;
  };
  const stopped = await Promise.race([setUp(), done]);
  if (stopped !== undefined && !stopping) {
    stopping = true;
    await Promise.all(members.map((m) => m.close()));
    await inspector?.close();
    return stopped;
  }
  // What a burst of visitors left behind goes back once it is over (Deno; see the module).
  const stopCollecting = collectWhenIdle();
  const code = await done;
  stopCollecting();
  await inspector?.close();
  return code;
}

if (import.meta.main) {
  try {
    exitHost(await main());
  } catch (error) {
    console.error(`client: ${(error as Error).message}`);
    exitHost(1);
  }
}
