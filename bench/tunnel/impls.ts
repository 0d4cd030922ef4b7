/**
 * What the tunnel scenarios run through: `direct` (the load straight to the backend, the
 * baseline), tunnelmux's daemon and client CLIs on Deno or Bun over TCP or WebSocket, and the
 * foreign tunnels frp, chisel, bore and rathole when their binaries are found. Every start is a
 * fresh pair of processes on 127.0.0.1 with an auth token, exposing the backend on a new port.
 * `jsrelay-deno` and `jsrelay-bun` are each runtime's floor: two chained plain relays.
 * The `http-` family does the same through HTTP tunnels routed by name (tunnelmux's `--http`,
 * frp's `type = "http"`), the load speaking HTTP/1.1 with the tunnel's `Host`. The `udp-` family
 * carries the U scenarios' datagrams to a UDP echo: `udp-direct`, tunnelmux's UDP reverse tunnel
 * and UDP forward, frp's `type = "udp"` proxy and rathole's UDP service.
 *
 * @module
 */

import { accessSync, constants, writeFileSync } from "node:fs";
import { delimiter, join } from "node:path";
import process from "node:process";
import { daemonConfig, newToken, ROOT } from "../../testing/mod.ts";
import { parseHostPort } from "../../util/net/address.ts";
import { installGoTool } from "../../util/host/go_build.ts";
import { type JsRuntime, RUNTIME_BIN } from "../impls.ts";
import { freePort, type LongProcess, startProcess, waitForPort, waitForUdpEcho } from "./procs.ts";

/** A running tunnel from a public address to the backend. */
export interface Tunnel {
  /** Where the load connects (`HOST:PORT`). */
  address: string;
  /**
   * An HTTP tunnel's name: the load speaks HTTP/1.1 with this `Host` (the `http-` family), not
   * the raw byte modes.
   */
  host?: string;
  /** The server side (daemon, frps, chisel server, ...); absent for `direct`. */
  server?: LongProcess;
  /** The client side, which dials the backend; absent for `direct`. */
  client?: LongProcess;
  /**
   * Further processes of the tunnel (the relay hop's owner daemon and nats-server): their CPU
   * counts with the server's and client's; they are stopped with them.
   */
  others?: LongProcess[];
  /** The relay hop's far node (the owner daemon, also in `others`): `count.ts` counts it too. */
  hop?: LongProcess;
}

/** One implementation of the tunnel suite. */
export interface TunnelImpl {
  /** Unique id (`tunnelmux-deno-tcp`, `frp`, `direct`); `--only` matches its prefix. */
  id: string;
  /** Why it cannot run here (a missing binary), or null. */
  missing: string | null;
  /**
   * Starts a tunnel to `backend` (`HOST:PORT`); temp files go to `dir`. With `tcpToo` (a UDP
   * tunnel for iperf3, whose control connection is TCP), TCP to the same port is carried too, on
   * the same public port.
   */
  start(backend: string, dir: string, options?: StartOptions): Promise<Tunnel>;
  /** A UDP tunnel: its backend is a UDP echo and it runs the UDP scenarios only. */
  udp?: boolean;
}

/** Options of {@linkcode TunnelImpl.start}. */
export interface StartOptions {
  /** Carry TCP beside UDP on the same public port (UDP tunnels only). */
  tcpToo?: boolean;
}

/** Bound on a tunnel's start (process start, handshake, public port open). */
const START_MS = 20_000;

/** Our environment without `TUNNELMUX_*` (so only what we pass applies), plus `extra`. */
function childEnv(extra: Record<string, string> = {}): Record<string, string> {
  const env: Record<string, string> = {};
  for (const [key, value] of Object.entries(process.env)) {
    if (value !== undefined && !key.startsWith("TUNNELMUX_")) env[key] = value;
  }
  return { ...env, NO_COLOR: "1", ...extra };
}

function runtimeArgv(runtime: JsRuntime, file: string): string[] {
  const path = join(ROOT, file);
  return runtime === "deno" ? [RUNTIME_BIN.deno, "run", "-A", path] : [RUNTIME_BIN.bun, path];
}

const direct: TunnelImpl = {
  id: "direct",
  missing: null,
  start: (backend) => Promise.resolve({ address: backend }),
};

/** Starts a tunnelmux daemon with `config` (written to `file`) and one listener. */
function startDaemonProcess(
  runtime: JsRuntime,
  file: string,
  config: Record<string, unknown>,
  transport: "tcp" | "ws",
  env: Record<string, string> = {},
): Promise<LongProcess> {
  writeFileSync(file, JSON.stringify(config));
  return startProcess([
    ...runtimeArgv(runtime, "daemon/main.ts"),
    "--config",
    file,
    "--listen-tcp",
    transport === "tcp" ? "127.0.0.1:0" : "off",
    "--listen-ws",
    transport === "ws" ? "127.0.0.1:0" : "off",
    "--listen-admin",
    "off",
    "--log-format",
    "json",
  ], {
    ready: transport === "tcp"
      ? /tunnels over TCP on (\S+)/
      : /tunnels over WebSocket on (ws:\/\/\S+)/,
    timeoutMs: START_MS,
    env: childEnv(env),
  });
}

/** Starts the client CLI exposing `backend` through the daemon at `url`; ready with its port. */
function startClientProcess(
  runtime: JsRuntime,
  url: string,
  backend: string,
  token: string,
): Promise<LongProcess> {
  return startProcess([
    ...runtimeArgv(runtime, "client/main.ts"),
    "--server",
    url,
    "--expose",
    `0=${backend}`,
    "--no-reconnect",
    "--log-format",
    "json",
  ], {
    ready: /^(?=.*"tunnel up").*"remote":"([^"]+)"/m,
    timeoutMs: START_MS,
    env: childEnv({ TUNNELMUX_TOKEN: token }),
  });
}

function tunnelmux(runtime: JsRuntime, transport: "tcp" | "ws"): TunnelImpl {
  return {
    id: `tunnelmux-${runtime}-${transport}`,
    missing: null,
    async start(backend, dir) {
      const token = newToken("bench");
      const config = daemonConfig([{ name: "bench", token }], { dataDir: join(dir, "data") });
      const server = await startDaemonProcess(
        runtime,
        join(dir, "daemon.json"),
        config,
        transport,
      );
      const url = transport === "tcp" ? `tcp://${server.ready[1]}` : server.ready[1];
      try {
        const client = await startClientProcess(runtime, url, backend, token);
        return { address: client.ready[1], server, client };
      } catch (error) {
        await server.stop(0);
        throw error;
      }
    },
  };
}

/**
 * The runtime's floor: two chained plain relays (`floor/relay_RUNTIME.ts`), visitor -> A -> B ->
 * backend, on the runtime's native sockets; no multiplexing, no auth, a TCP connection per hop per
 * visitor. A takes the public port (measured as the server side), B dials the backend (the client
 * side), so tunnelmux's rows can be read against what two processes on that runtime cost anyway.
 */
function jsrelay(runtime: JsRuntime): TunnelImpl {
  const relay = (listen: string, target: string) =>
    startProcess([
      ...runtimeArgv(runtime, `bench/tunnel/floor/relay_${runtime}.ts`),
      listen,
      target,
    ], { ready: /relay on (\S+) -> /, timeoutMs: START_MS, env: childEnv() });
  return {
    id: `jsrelay-${runtime}`,
    missing: null,
    async start(backend) {
      const client = await relay("127.0.0.1:0", backend);
      try {
        const server = await relay("127.0.0.1:0", client.ready[1]);
        return { address: server.ready[1], server, client };
      } catch (error) {
        await client.stop(0);
        throw error;
      }
    },
  };
}

/**
 * tunnelmux in a two-node cluster, measured through the node that does NOT hold the client's
 * session: visitors arrive at the relay node (tunnel host 127.0.0.2) and cross one relay session
 * to the owner (127.0.0.1), then the client. Beside `tunnelmux-RUNTIME-tcp` its ratio is the
 * relay hop's cost. Needs Go to build nats-server on first use.
 */
function tunnelmuxRelay(runtime: JsRuntime): TunnelImpl {
  return {
    id: `tunnelmux-${runtime}-relay`,
    missing: null,
    async start(backend, dir) {
      const natsBin = await installGoTool({
        name: "nats-server",
        pkg: "github.com/nats-io/nats-server/v2@v2.15.2",
        cacheDir: join(ROOT, ".cache", "tools"),
      });
      const natsPort = await freePort();
      const others: LongProcess[] = [];
      const started: LongProcess[] = []; // everything, for cleanup on a failed start
      const stopAll = () => Promise.all(started.map((p) => p.stop(0)));
      try {
        const nats = await startProcess(
          [natsBin, "-js", "-sd", join(dir, "nats"), "-a", "127.0.0.1", "-p", String(natsPort)],
          { ready: /Server is ready/, timeoutMs: START_MS },
        );
        others.push(nats);
        started.push(nats);
        const token = newToken("bench");
        const key = newToken("cluster-key");
        const node = async (index: number) =>
          startDaemonProcess(
            runtime,
            join(dir, `n${index}.json`),
            daemonConfig([{ name: "bench", token }], {
              dataDir: join(dir, `data${index}`),
              cluster: {
                servers: [`nats://127.0.0.1:${natsPort}`],
                node: `n${index}`,
                listen: `127.0.0.1:${await freePort()}`,
                tunnelHost: `127.0.0.${index}`,
              },
            }),
            "tcp",
            { TUNNELMUX_CLUSTER_KEY: key },
          );
        const owner = await node(1);
        others.push(owner);
        started.push(owner);
        const relay = await node(2);
        started.push(relay);
        const client = await startClientProcess(runtime, `tcp://${owner.ready[1]}`, backend, token);
        started.push(client);
        const port = parseHostPort(client.ready[1]).port;
        // Ready when the relay node listens on the port and has its relay session to the owner.
        const deadline = Date.now() + START_MS;
        while (!/"relay session up"/.test(relay.output())) {
          if (Date.now() > deadline) throw new Error("the relay session did not come up");
          await new Promise((resolve) => setTimeout(resolve, 20));
        }
        await waitForPort(`127.0.0.2:${port}`, START_MS);
        return { address: `127.0.0.2:${port}`, server: relay, client, others, hop: owner };
      } catch (error) {
        await stopAll();
        throw error;
      }
    },
  };
}

/** The path of `name` in `peersDir` or on PATH, or null. */
export function findBinary(name: string, peersDir: string | undefined): string | null {
  const dirs = [...(peersDir ? [peersDir] : []), ...(process.env.PATH ?? "").split(delimiter)];
  for (const dir of dirs.filter(Boolean)) {
    try {
      accessSync(join(dir, name), constants.X_OK);
      return join(dir, name);
    } catch { /* not here */ }
  }
  return null;
}

/**
 * A foreign tunnel made of binaries `names`: `launch` gets their paths and starts the pair
 * (the first process is the server side, the second the client side).
 */
function foreign(
  id: string,
  names: string[],
  peersDir: string | undefined,
  launch: (bins: string[], backend: string, dir: string, options: StartOptions) => Promise<Tunnel>,
): TunnelImpl {
  const bins = names.map((name) => findBinary(name, peersDir));
  const absent = names.filter((_, i) => bins[i] === null);
  return {
    id,
    missing: absent.length ? `${absent.join(", ")} not on PATH or in --peers-dir` : null,
    start: (backend, dir, options = {}) => launch(bins as string[], backend, dir, options),
  };
}

/**
 * Starts the server side, then the client side, then waits for the public port; stops what
 * started if a step fails.
 */
async function pair(
  server: () => Promise<LongProcess>,
  client: (server: LongProcess) => Promise<{ client: LongProcess; address: string }>,
  probe: (address: string, timeoutMs: number) => Promise<void> = waitForPort,
): Promise<Tunnel> {
  const s = await server();
  let c: LongProcess | undefined;
  try {
    const started = await client(s);
    c = started.client;
    await probe(started.address, START_MS);
    return { address: started.address, server: s, client: c };
  } catch (error) {
    await Promise.all([s.stop(0), c?.stop(0)]);
    throw error;
  }
}

/**
 * frps and frpc with a fresh token, one proxy: `server` adds to frps.toml, `proxy` is the proxy's
 * type and fields in frpc.toml; the public side is `127.0.0.1:publicPort`.
 */
async function frpPair(
  [frps, frpc]: string[],
  backend: string,
  dir: string,
  server: string,
  proxy: string,
  publicPort: number,
  probe?: (address: string, timeoutMs: number) => Promise<void>,
): Promise<Tunnel> {
  const token = newToken("bench");
  const bindPort = await freePort();
  const { hostname: localIP, port: localPort } = parseHostPort(backend);
  const common = `auth.token = "${token}"\nlog.level = "info"\n`;
  writeFileSync(
    join(dir, "frps.toml"),
    `bindAddr = "127.0.0.1"\nbindPort = ${bindPort}\n${server}${common}`,
  );
  writeFileSync(
    join(dir, "frpc.toml"),
    `serverAddr = "127.0.0.1"\nserverPort = ${bindPort}\n${common}\n[[proxies]]\n` +
      `name = "bench"\n${proxy}localIP = "${localIP}"\nlocalPort = ${localPort}\n`,
  );
  return await pair(
    () =>
      startProcess([frps, "-c", join(dir, "frps.toml")], {
        ready: /frps started successfully/,
        timeoutMs: START_MS,
      }),
    async () => ({
      client: await startProcess([frpc, "-c", join(dir, "frpc.toml")], {
        ready: /start proxy success/,
        timeoutMs: START_MS,
      }),
      address: `127.0.0.1:${publicPort}`,
    }),
    probe,
  );
}

const frp = (peersDir?: string) =>
  foreign("frp", ["frps", "frpc"], peersDir, async (bins, backend, dir) => {
    const remotePort = await freePort();
    return await frpPair(
      bins,
      backend,
      dir,
      "",
      `type = "tcp"\nremotePort = ${remotePort}\n`,
      remotePort,
    );
  });

const chisel = (peersDir?: string) =>
  foreign("chisel", ["chisel"], peersDir, async ([bin], backend) => {
    const auth = `bench:${newToken("bench")}`;
    const [port, remotePort] = [await freePort(), await freePort()];
    return await pair(
      () =>
        startProcess(
          [bin, "server", "--host", "127.0.0.1", "--port", String(port), "--reverse"],
          { ready: /Listening on/, timeoutMs: START_MS, env: childEnv({ AUTH: auth }) },
        ),
      async () => ({
        client: await startProcess(
          [bin, "client", `http://127.0.0.1:${port}`, `R:127.0.0.1:${remotePort}:${backend}`],
          { ready: /Connected/, timeoutMs: START_MS, env: childEnv({ AUTH: auth }) },
        ),
        address: `127.0.0.1:${remotePort}`,
      }),
    );
  });

// bore's control port is fixed (7835): two bore runs cannot overlap, which the runner never does.
const bore = (peersDir?: string) =>
  foreign("bore", ["bore"], peersDir, async ([bin], backend) => {
    const env = childEnv({ BORE_SECRET: newToken("bench") });
    const { hostname: host, port } = parseHostPort(backend);
    return await pair(
      () =>
        startProcess([bin, "server", "--bind-addr", "127.0.0.1", "--min-port", "20000"], {
          ready: /server listening/,
          timeoutMs: START_MS,
          env,
        }),
      async () => {
        const client = await startProcess(
          [bin, "local", String(port), "--local-host", host, "--to", "127.0.0.1"],
          { ready: /listening at (\S+:\d+)/, timeoutMs: START_MS, env },
        );
        return { client, address: client.ready[1] };
      },
    );
  });

const rathole = (peersDir?: string) =>
  foreign("rathole", ["rathole"], peersDir, async ([bin], backend, dir) => {
    const token = newToken("bench");
    const [port, remotePort] = [await freePort(), await freePort()];
    writeFileSync(
      join(dir, "server.toml"),
      `[server]\nbind_addr = "127.0.0.1:${port}"\n[server.services.bench]\n` +
        `token = "${token}"\nbind_addr = "127.0.0.1:${remotePort}"\n`,
    );
    writeFileSync(
      join(dir, "client.toml"),
      `[client]\nremote_addr = "127.0.0.1:${port}"\n[client.services.bench]\n` +
        `token = "${token}"\nlocal_addr = "${backend}"\n`,
    );
    return await pair(
      () =>
        startProcess([bin, "--server", join(dir, "server.toml")], {
          ready: /Listening at/,
          timeoutMs: START_MS,
          env: childEnv(),
        }),
      async () => ({
        client: await startProcess([bin, "--client", join(dir, "client.toml")], {
          ready: /Control channel established/,
          timeoutMs: START_MS,
          env: childEnv(),
        }),
        address: `127.0.0.1:${remotePort}`,
      }),
    );
  });

/** The name HTTP tunnels serve the backend under. */
const HTTP_HOST = "app.bench.test";

/** The load straight to the backend in HTTP: the `http-` family's baseline. */
const httpDirect: TunnelImpl = {
  id: "http-direct",
  missing: null,
  start: (backend) => Promise.resolve({ address: backend, host: HTTP_HOST }),
};

/**
 * tunnelmux's HTTP tunnel: the daemon's shared HTTP port, the client's --http; with `inspect`,
 * the client's request inspector on too (`--inspect 127.0.0.1:0`), to measure what it costs.
 */
function tunnelmuxHttp(runtime: JsRuntime, inspect = false): TunnelImpl {
  return {
    id: `http-tunnelmux-${runtime}${inspect ? "-inspect" : ""}`,
    missing: null,
    async start(backend, dir) {
      const token = newToken("bench");
      const httpPort = await freePort();
      const config = daemonConfig([{ name: "bench", token }], {
        dataDir: join(dir, "data"),
        http: { domain: "bench.test" },
      });
      const server = await startDaemonProcess(runtime, join(dir, "daemon.json"), {
        ...config,
        listen: { admin: null, http: `127.0.0.1:${httpPort}` },
      }, "tcp");
      try {
        const client = await startProcess([
          ...runtimeArgv(runtime, "client/main.ts"),
          "--server",
          `tcp://${server.ready[1]}`,
          "--http",
          `app=${backend}`,
          ...(inspect ? ["--inspect", "127.0.0.1:0"] : []),
          "--no-reconnect",
          "--log-format",
          "json",
        ], {
          ready: /"tunnel up"/,
          timeoutMs: START_MS,
          env: childEnv({ TUNNELMUX_TOKEN: token }),
        });
        return { address: `127.0.0.1:${httpPort}`, host: HTTP_HOST, server, client };
      } catch (error) {
        await server.stop(0);
        throw error;
      }
    },
  };
}

/** frp's HTTP proxy: frps's vhost HTTP port routes by Host to frpc's `type = "http"` proxy. */
const frpHttp = (peersDir?: string) =>
  foreign("http-frp", ["frps", "frpc"], peersDir, async (bins, backend, dir) => {
    const httpPort = await freePort();
    const tunnel = await frpPair(
      bins,
      backend,
      dir,
      `vhostHTTPPort = ${httpPort}\nsubDomainHost = "bench.test"\n`,
      `type = "http"\nsubdomain = "app"\n`,
      httpPort,
    );
    return { ...tunnel, host: HTTP_HOST };
  });

/**
 * No readiness probe: for iperf3's server, which a probe connection leaves unable to serve the next
 * client (the tunnel's own log line says it is up).
 */
const noProbe = () => Promise.resolve();

/** The load straight to the UDP echo: the `udp-` family's baseline. */
const udpDirect: TunnelImpl = {
  id: "udp-direct",
  missing: null,
  udp: true,
  start: (backend) => Promise.resolve({ address: backend }),
};

/**
 * tunnelmux's UDP reverse tunnel (`--expose-udp`): load -> the daemon's UDP port -> client -> the
 * UDP echo, one flow: the shape of frp's and rathole's UDP rows.
 */
function tunnelmuxUdpExpose(runtime: JsRuntime): TunnelImpl {
  return {
    id: `udp-tunnelmux-${runtime}`,
    missing: null,
    udp: true,
    async start(backend, dir, options = {}) {
      const token = newToken("bench");
      // The port is chosen here (free for TCP and UDP alike), wherever the system puts it.
      const config = daemonConfig([{ name: "bench", token, expose: { ports: ["1024-65535"] } }], {
        dataDir: join(dir, "data"),
      });
      const server = await startDaemonProcess(runtime, join(dir, "daemon.json"), config, "tcp");
      let client: LongProcess | undefined;
      try {
        // With TCP too, both tunnels hold one port number.
        const port = await freePort();
        client = await startProcess([
          ...runtimeArgv(runtime, "client/main.ts"),
          "--server",
          `tcp://${server.ready[1]}`,
          "--expose-udp",
          `${port}=${backend}`,
          ...(options.tcpToo ? ["--expose", `${port}=${backend}`] : []),
          "--no-reconnect",
          "--log-format",
          "json",
        ], {
          ready: /^(?=.*"tunnel up")(?=.*"protocol":"udp").*"remote":"([^"]+)"/m,
          timeoutMs: START_MS,
          env: childEnv({ TUNNELMUX_TOKEN: token }),
        });
        const address = `127.0.0.1:${port}`;
        // As for the forward: with TCP too (iperf3), the log line is the only sign waited for.
        if (!options.tcpToo) await waitForUdpEcho(address, START_MS);
        return { address, server, client };
      } catch (error) {
        await Promise.all([server.stop(0), client?.stop(0)]);
        throw error;
      }
    },
  };
}

/**
 * tunnelmux's UDP forward (`--forward-udp`): load -> the client's UDP port -> daemon -> the UDP
 * echo, one flow. It crosses the same two processes as the reverse tunnel, the other way round.
 */
function tunnelmuxUdpForward(runtime: JsRuntime): TunnelImpl {
  return {
    id: `udp-tunnelmux-${runtime}-fwd`,
    missing: null,
    udp: true,
    async start(backend, dir, options = {}) {
      const token = newToken("bench");
      const config = daemonConfig([{ name: "bench", token, forward: [backend] }], {
        dataDir: join(dir, "data"),
      });
      const server = await startDaemonProcess(runtime, join(dir, "daemon.json"), config, "tcp");
      let client: LongProcess | undefined;
      try {
        // With TCP too, both forwards listen on one port number, chosen here.
        const listen = `127.0.0.1:${options.tcpToo ? await freePort() : 0}`;
        client = await startProcess([
          ...runtimeArgv(runtime, "client/main.ts"),
          "--server",
          `tcp://${server.ready[1]}`,
          "--forward-udp",
          `${listen}=${backend}`,
          ...(options.tcpToo ? ["--forward", `${listen}=${backend}`] : []),
          "--no-reconnect",
          "--log-format",
          "json",
        ], {
          ready: /^(?=.*"forwarding udp").*"listen":"([^"]+)"/m,
          timeoutMs: START_MS,
          env: childEnv({ TUNNELMUX_TOKEN: token }),
        });
        // iperf3's server echoes nothing, and a probe connection leaves it unable to serve the next
        // client: with TCP too, the client's log line is the only sign waited for.
        if (!options.tcpToo) await waitForUdpEcho(client.ready[1], START_MS);
        return { address: client.ready[1], server, client };
      } catch (error) {
        await Promise.all([server.stop(0), client?.stop(0)]);
        throw error;
      }
    },
  };
}

/** frp's UDP proxy: frpc's `type = "udp"`, its public UDP port on frps. */
const frpUdp = (peersDir?: string) => ({
  ...foreign("udp-frp", ["frps", "frpc"], peersDir, async (bins, backend, dir, options) => {
    const remotePort = await freePort();
    const { hostname, port } = parseHostPort(backend);
    // With TCP too: a tcp proxy on the same remote port, ahead of the udp one.
    const tcp = options.tcpToo
      ? `type = "tcp"\nremotePort = ${remotePort}\nlocalIP = "${hostname}"\nlocalPort = ${port}\n` +
        `\n[[proxies]]\nname = "bench-udp"\n`
      : "";
    return await frpPair(
      bins,
      backend,
      dir,
      "",
      `${tcp}type = "udp"\nremotePort = ${remotePort}\n`,
      remotePort,
      options.tcpToo ? noProbe : waitForUdpEcho,
    );
  }),
  udp: true,
});

/** rathole's UDP service (`type = "udp"` on both sides). */
const ratholeUdp = (peersDir?: string) => ({
  ...foreign("udp-rathole", ["rathole"], peersDir, async ([bin], backend, dir, options) => {
    const token = newToken("bench");
    const [port, remotePort] = [await freePort(), await freePort()];
    // With TCP too: a second service, tcp, on the same port number.
    const types = options.tcpToo ? ["udp", "tcp"] : ["udp"];
    const service = (side: "server" | "client", type: string) =>
      `[${side}.services.bench-${type}]\ntype = "${type}"\ntoken = "${token}"\n` +
      (side === "server"
        ? `bind_addr = "127.0.0.1:${remotePort}"\n`
        : `local_addr = "${backend}"\n`);
    writeFileSync(
      join(dir, "server.toml"),
      `[server]\nbind_addr = "127.0.0.1:${port}"\n` +
        types.map((type) => service("server", type)).join(""),
    );
    writeFileSync(
      join(dir, "client.toml"),
      `[client]\nremote_addr = "127.0.0.1:${port}"\n` +
        types.map((type) => service("client", type)).join(""),
    );
    return await pair(
      () =>
        startProcess([bin, "--server", join(dir, "server.toml")], {
          ready: /Listening at/,
          timeoutMs: START_MS,
          env: childEnv(),
        }),
      async () => ({
        client: await startProcess([bin, "--client", join(dir, "client.toml")], {
          ready: /Control channel established/,
          timeoutMs: START_MS,
          env: childEnv(),
        }),
        address: `127.0.0.1:${remotePort}`,
      }),
      options.tcpToo ? noProbe : waitForUdpEcho,
    );
  }),
  udp: true,
});

/** The foreign tunnel families, in table order. */
export const FOREIGN = ["frp", "chisel", "bore", "rathole"] as const;

/**
 * Every tunnel implementation in table order: direct, tunnelmux on each runtime over TCP and
 * WebSocket and through a cluster relay, each runtime's floor (`jsrelay-RUNTIME`), and (unless `foreignPeers` is false) the foreign tunnels, found in `peersDir` or on
 * PATH; those not found carry a `missing` reason.
 */
export function tunnelImpls(
  runtimes: readonly JsRuntime[],
  peersDir: string | undefined,
  foreignPeers: boolean,
): TunnelImpl[] {
  const impls = [direct];
  for (const runtime of runtimes) {
    impls.push(tunnelmux(runtime, "tcp"), tunnelmux(runtime, "ws"), tunnelmuxRelay(runtime));
  }
  // The floor rows, ours (so also in --quick runs, which leave the foreign tunnels out).
  impls.push(...runtimes.map(jsrelay));
  if (foreignPeers) impls.push(frp(peersDir), chisel(peersDir), bore(peersDir), rathole(peersDir));
  // HTTP tunnels by name, their own family: `--only http` runs them.
  impls.push(httpDirect, ...runtimes.map((runtime) => tunnelmuxHttp(runtime)));
  // The inspector's cost: full runs only, as the foreign rows (a --quick smoke test skips it).
  if (foreignPeers) impls.push(...runtimes.map((runtime) => tunnelmuxHttp(runtime, true)));
  if (foreignPeers) impls.push(frpHttp(peersDir));
  // UDP, its own family (`--only udp`): the U scenarios run through these and only these.
  impls.push(udpDirect, ...runtimes.map(tunnelmuxUdpExpose), ...runtimes.map(tunnelmuxUdpForward));
  if (foreignPeers) impls.push(frpUdp(peersDir), ratholeUdp(peersDir));
  return impls;
}
