/**
 * `tunnelmux client`: the command line over the SDK. Only wiring: parse flags, connect, ask for
 * the tunnels and forwards, log what happens, close on a signal.
 *
 * @module
 */

import process from "node:process";
import { readFileSync } from "node:fs";
import { parseArgs } from "node:util";
import { Logger } from "../util/log.ts";
import { parseHostPort, unbracketHost } from "../util/address.ts";
import { HaClient } from "./ha_client.ts";
import type { HealthOptions } from "./health_check.ts";
import { Client } from "./client.ts";

const HELP = `tunnelmux client: hold tunnels through a tunnelmux daemon

Usage:
  client --server URL [options]

Options:
  --server URL[,URL…]          the daemon: tcp://HOST:PORT, ws://HOST:PORT/tunnel or wss://…
                               or tls://HOST:PORT (env TUNNELMUX_SERVER); several (comma-
                               separated or repeated): the nodes of a cluster, tried in turn
                               when a connection fails or is lost; a host name with several
                               addresses (one DNS name for the nodes) is dialed at each in turn
  --expose [BIND:]PORT=LOCAL   the daemon listens on PORT (0 = any allowed port) and sends its
                               visitors to LOCAL (HOST:PORT) here; repeatable
  --forward LISTEN=TARGET      listen on LISTEN (HOST:PORT) here; each connection goes through
                               the daemon to TARGET (HOST:PORT); repeatable
  --offer NAME=LOCAL           offer named service NAME, served by LOCAL here; repeatable
  --use LISTEN=NAME            listen on LISTEN here for named service NAME; repeatable
  --name NAME                  how the daemon's logs call this client
  --ca FILE                    extra CA certificate (PEM) to trust for tls:// and wss://
  --group NAME                 serve every --expose and --offer as a member of group NAME (the
                               group key comes from TUNNELMUX_GROUP_KEY): members share the
                               public port or service name, visitors are balanced across them
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
  --no-reconnect               exit when the connection is lost instead of reconnecting
  --keepalive-interval-ms MS   ping the daemon after MS without a frame from it; keep it below
                               any proxy's or CDN's idle timeout (default 30000;
                               env TUNNELMUX_KEEPALIVE_INTERVAL_MS)
  --keepalive-timeout-ms MS    reconnect when a ping is unanswered for MS (default 30000;
                               env TUNNELMUX_KEEPALIVE_TIMEOUT_MS)
  --log-format FORMAT          auto, pretty or json (default auto: pretty on a terminal)
  -h, --help                   show this help

The token comes from TUNNELMUX_TOKEN (the environment, not a flag: arguments are visible to
every user of the machine in the process list).

Example:
  TUNNELMUX_TOKEN=… client --server ws://127.0.0.1:7080/tunnel \\
    --expose 8080=127.0.0.1:3000 --forward 127.0.0.1:15432=127.0.0.1:5432`;

/** Splits `A=B` at the first `=` (neither addresses nor service names contain one). */
function pair(flag: string, text: string): [string, string] {
  const at = text.indexOf("=");
  if (at <= 0 || at === text.length - 1) throw new Error(`--${flag} expects A=B, got "${text}"`);
  return [text.slice(0, at), text.slice(at + 1)];
}

/**
 * Runs `tunnelmux client` with `args` (the words after the command) and resolves with the exit
 * code. Run directly, this file passes its own arguments.
 */
export async function main(args: string[] = process.argv.slice(2)): Promise<number> {
  args = [...args];
  if (args[0] === "--") args.shift();
  const { values } = parseArgs({
    args,
    options: {
      server: { type: "string", multiple: true },
      expose: { type: "string", multiple: true, default: [] },
      forward: { type: "string", multiple: true, default: [] },
      offer: { type: "string", multiple: true, default: [] },
      use: { type: "string", multiple: true, default: [] },
      name: { type: "string" },
      ca: { type: "string" },
      "proxy-protocol": { type: "string" },
      group: { type: "string" },
      ha: { type: "string" },
      health: { type: "string" },
      "health-interval-ms": { type: "string" },
      shared: { type: "boolean" },
      "no-reconnect": { type: "boolean", default: false },
      "keepalive-interval-ms": { type: "string" },
      "keepalive-timeout-ms": { type: "string" },
      "log-format": { type: "string", default: "auto" },
      help: { type: "boolean", short: "h" },
    },
  });
  if (values.help) {
    console.log(HELP);
    return 0;
  }
  const server = (values.server ?? [process.env.TUNNELMUX_SERVER ?? ""])
    .flatMap((text) => text.split(","))
    .map((url) => url.trim())
    .filter((url) => url !== "");
  const token = process.env.TUNNELMUX_TOKEN;
  if (server.length === 0) throw new Error("--server (or TUNNELMUX_SERVER) is required");
  if (!token) throw new Error("TUNNELMUX_TOKEN is not set");
  const proxyProtocol = values["proxy-protocol"] as "v1" | "v2" | undefined;
  if (proxyProtocol !== undefined && proxyProtocol !== "v1" && proxyProtocol !== "v2") {
    throw new Error(`--proxy-protocol must be v1 or v2, got "${proxyProtocol}"`);
  }
  const group = values.group;
  const groupKey = process.env.TUNNELMUX_GROUP_KEY;
  if (group !== undefined && !groupKey) {
    throw new Error(`--group ${group} needs the group's key in TUNNELMUX_GROUP_KEY`);
  }
  const membership = group !== undefined
    ? { group, groupKey }
    : values.shared
    ? { shared: true }
    : {};
  let health: HealthOptions | undefined;
  if (values.health !== undefined) {
    const text = values.health;
    const http = /^http:(\/[^=\s]*)(?:=(\d{3}))?$/.exec(text);
    if (text === "tcp") health = { check: { kind: "tcp" } };
    else if (http) {
      health = {
        check: { kind: "http", path: http[1], status: http[2] ? Number(http[2]) : undefined },
      };
    } else throw new Error(`--health must be "tcp" or "http:/PATH[=STATUS]", got "${text}"`);
    const interval = values["health-interval-ms"];
    if (interval !== undefined) {
      const ms = Number(interval);
      if (!/^\d+$/.test(interval) || ms < 100 || ms > 3_600_000) {
        throw new Error(`--health-interval-ms must be milliseconds from 100 to 3600000`);
      }
      health.intervalMs = ms;
    }
  }
  const exposes = values.expose.map((text) => {
    const [remote, local] = pair("expose", text);
    const colon = remote.lastIndexOf(":");
    const bindHost = colon > 0 ? unbracketHost(remote.slice(0, colon)) : undefined;
    const remotePort = Number(colon > 0 ? remote.slice(colon + 1) : remote);
    if (!Number.isInteger(remotePort) || remotePort < 0 || remotePort > 65535) {
      throw new Error(`--expose: bad port in "${text}"`);
    }
    parseHostPort(local);
    return { remotePort, bindHost, local, proxyProtocol, health, ...membership };
  });
  const duration = (flag: string, env: string, fallback: number): number => {
    const text = values[flag as "keepalive-interval-ms"] ?? process.env[env] ?? "";
    if (text === "") return fallback;
    const ms = Number(text);
    if (!/^\d+$/.test(text) || ms < 100 || ms > 3_600_000) {
      throw new Error(
        `--${flag} (or ${env}) must be milliseconds from 100 to 3600000, got "${text}"`,
      );
    }
    return ms;
  };
  const keepAliveInterval = duration(
    "keepalive-interval-ms",
    "TUNNELMUX_KEEPALIVE_INTERVAL_MS",
    30_000,
  );
  const keepAliveTimeout = duration(
    "keepalive-timeout-ms",
    "TUNNELMUX_KEEPALIVE_TIMEOUT_MS",
    30_000,
  );
  // LISTEN may be a bare port (loopback), as --expose takes one; every address is checked here,
  // before connecting.
  const listenAddress = (flag: string, text: string, listen: string): string => {
    const address = /^\d+$/.test(listen) ? `127.0.0.1:${listen}` : listen;
    try {
      parseHostPort(address);
    } catch {
      throw new Error(`--${flag}: bad listen address "${listen}" in "${text}" (PORT or HOST:PORT)`);
    }
    return address;
  };
  const forwards = values.forward.map((text): [string, string] => {
    const [listen, target] = pair("forward", text);
    try {
      parseHostPort(target);
    } catch {
      throw new Error(`--forward: bad target "${target}" in "${text}" (HOST:PORT)`);
    }
    return [listenAddress("forward", text, listen), target];
  });
  const offers = values.offer.map((text) => pair("offer", text));
  const uses = values.use.map((text): [string, string] => {
    const [listen, name] = pair("use", text);
    return [listenAddress("use", text, listen), name];
  });
  if (exposes.length + forwards.length + offers.length + uses.length === 0) {
    process.stderr.write(
      "client: nothing to do: give --expose, --forward, --offer or --use (see --help)\n",
    );
    return 2;
  }

  const format = values["log-format"];
  const pretty = format === "pretty" || (format === "auto" && process.stderr.isTTY === true);
  const log = new Logger({
    level: "info",
    format: pretty ? "pretty" : "json",
    sink: (line) => process.stderr.write(line + "\n"),
  });

  const haText = values.ha ?? "1";
  const haSessions = Number(haText);
  if (!/^\d+$/.test(haText) || haSessions < 1 || haSessions > 8) {
    throw new Error(`--ha must be a number of sessions from 1 to 8, got "${haText}"`);
  }
  const connectOptions = {
    token,
    name: values.name,
    reconnect: !values["no-reconnect"],
    session: { keepAliveInterval, keepAliveTimeout },
    caCerts: values.ca ? [readFileSync(values.ca, "utf8")] : undefined,
  };
  // With --ha N, N sessions (each to another node when the URLs allow) serve every --expose
  // and --offer; each connection of a forward or use goes through a session that is ready.
  const ha = haSessions > 1
    ? new HaClient(server, { ...connectOptions, sessions: haSessions })
    : undefined;
  const client = ha ? ha.members[0] : new Client(server, connectOptions);
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
    process.on("SIGINT", () => stop("SIGINT"));
    process.on("SIGTERM", () => stop("SIGTERM"));
    for (const member of members) {
      member.on("state", (state) => {
        // Gave up (a fatal error, or no reconnect): when every session has.
        if (state === "closed" && !stopping && members.every((m) => m.state === "closed")) {
          resolve(1);
        }
      });
    }
  });
  members.forEach((member, i) => {
    const which = ha ? { session: i } : {};
    member.on("state", (state) => log.info(`state: ${state}`, which));
    member.on("ready", (info) => {
      log.info("session ready", { node: info.node, server: info.url, ...which });
    });
    member.on("error", (error) => log.warn(error.message, { code: error.code, ...which }));
    member.on("health", ({ service, local, healthy, detail }) => {
      const what = { local, ...(service !== undefined ? { service } : {}), ...which };
      if (healthy) log.info("local service healthy again", what);
      else log.warn("local service unhealthy: route withdrawn", { ...what, detail });
    });
    member.on("tunnel", (t) => {
      log.info("tunnel up", {
        remote: `${t.remoteHost}:${t.remotePort}`,
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
  const setUp = async () => {
    await (ha ?? client).ready();
    log.info("connected", { server: client.url, node: client.node });
    for (const expose of exposes) await (ha ?? client).expose(expose);
    for (const [listen, target] of forwards) {
      const forward = await (ha ?? client).forward({ listen, target });
      log.info("forwarding", { listen: forward.address, target });
    }
    for (const [name, local] of offers) {
      const offerOptions = { ...(group !== undefined ? { group, groupKey } : {}), health };
      await (ha ?? client).offer(name, local, offerOptions);
      log.info("offering service", { service: name, local });
    }
    for (const [listen, name] of uses) {
      const forward = await (ha ?? client).forward({ listen, service: name });
      log.info("using service", { listen: forward.address, service: name });
    }
  };
  await Promise.race([setUp(), done]);
  return await done;
}

if (import.meta.main) {
  try {
    process.exit(await main());
  } catch (error) {
    console.error(`client: ${(error as Error).message}`);
    process.exit(1);
  }
}
