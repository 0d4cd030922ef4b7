/**
 * Test support: real NATS servers with JetStream, for the cluster tests. `nats-server` (v2.15.2)
 * is installed from the Go module proxy into `.cache/tools` on first use, like the other Go tools;
 * never a mock. A server keeps its port and its store across {@linkcode NatsServer.stop} and
 * {@linkcode NatsServer.start}, so a test can take NATS away and bring it back.
 *
 * @example
 * ```ts ignore
 * import { startNats } from "./nats.ts";
 * const nats = await startNats();
 * // daemons get `cluster: { servers: [nats.url], … }`
 * await nats.stop(); // NATS unreachable
 * await nats.start(); // back, same port, same JetStream store
 * ```
 *
 * @module
 */

import { type ChildProcess, spawn } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { connect as tcpConnect } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { installGoTool } from "../util/host/go_build.ts";
import { register } from "./cleanup.ts";
import { closedPort } from "./fake_servers.ts";
import { ROOT } from "./process.ts";
import { waitFor } from "./wait.ts";

/** The nats-server release the cluster is written against. */
export const NATS_SERVER_PACKAGE = "github.com/nats-io/nats-server/v2@v2.15.2";

/** One nats-server process (or its place, while stopped). */
export interface NatsServer {
  /** `nats://127.0.0.1:PORT`, stable across stop and start. */
  readonly url: string;
  /** Its client port. */
  readonly port: number;
  /** Whether the process is running. */
  readonly running: boolean;
  /** Recent output (stderr), for failure messages. */
  output(): string;
  /** Starts it again (same port and store) after {@linkcode stop}. */
  start(): Promise<void>;
  /** SIGKILLs it and waits for the exit. */
  stop(): Promise<void>;
  /**
   * Resolves once its monitoring `/healthz` answers 200: JetStream is up, and in a NATS cluster
   * the servers have elected a meta leader (before that, JetStream refuses: "jetstream is not
   * enabled"). Rejects after `timeoutMs`.
   */
  ready(timeoutMs?: number): Promise<void>;
}

/** Options for {@linkcode startNats}. */
export interface NatsOptions {
  /** Require this token from clients. */
  token?: string;
  /** Server name (default `n1`). */
  name?: string;
  /** Route port and every route of a NATS cluster (see {@linkcode startNatsCluster}). */
  cluster?: { name: string; port: number; routes: number[] };
}

/** Installs (once) the nats-server binary; resolves with its path. */
export function natsServerBinary(): Promise<string> {
  return installGoTool({
    name: "nats-server",
    pkg: NATS_SERVER_PACKAGE,
    cacheDir: join(ROOT, ".cache", "tools"),
  });
}

function portOpen(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = tcpConnect({ host: "127.0.0.1", port }, () => {
      socket.destroy();
      resolve(true);
    });
    socket.on("error", () => resolve(false));
  });
}

/** Starts a nats-server with JetStream on a free loopback port; stopped and removed by cleanup. */
export async function startNats(options: NatsOptions = {}): Promise<NatsServer> {
  const bin = await natsServerBinary();
  const port = await closedPort();
  const monitorPort = await closedPort();
  const dir = mkdtempSync(join(tmpdir(), "tunnelmux-nats-"));
  const name = options.name ?? "n1";
  const lines = [
    `server_name: ${name}`,
    `listen: "127.0.0.1:${port}"`,
    `http: "127.0.0.1:${monitorPort}"`,
    `jetstream: { store_dir: ${JSON.stringify(join(dir, "js"))} }`,
  ];
  if (options.token) lines.push(`authorization: { token: ${JSON.stringify(options.token)} }`);
  if (options.cluster) {
    const routes = options.cluster.routes.map((p) => `"nats-route://127.0.0.1:${p}"`);
    lines.push(
      `cluster: { name: ${options.cluster.name}, listen: "127.0.0.1:${options.cluster.port}",` +
        ` routes: [${routes.join(", ")}] }`,
    );
  }
  const configFile = join(dir, "nats.conf");
  writeFileSync(configFile, lines.join("\n") + "\n");
  let child: ChildProcess | undefined;
  let exited: Promise<void> = Promise.resolve();
  let output = "";
  const stop = async () => {
    if (child && child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
    await exited;
    child = undefined;
  };
  const start = async () => {
    if (child) return;
    const proc = spawn(bin, ["-c", configFile], { stdio: ["ignore", "ignore", "pipe"] });
    child = proc;
    proc.stderr!.on("data", (chunk: Uint8Array) => {
      output = (output + new TextDecoder().decode(chunk)).slice(-8000);
    });
    exited = new Promise((resolve) => proc.once("exit", () => resolve()));
    await waitFor(async () => {
      if (proc.exitCode !== null) throw new Error(`nats-server exited:\n${output}`);
      return await portOpen(port);
    }, { timeoutMs: 20_000, intervalMs: 50, message: `nats-server on port ${port}` });
  };
  register(async () => {
    await stop();
    rmSync(dir, { recursive: true, force: true });
  });
  await start();
  return {
    url: `nats://127.0.0.1:${port}`,
    port,
    get running() {
      return child !== undefined;
    },
    output: () => output,
    start,
    stop,
    ready: (timeoutMs = 30_000) =>
      waitFor(async () => {
        const response = await fetch(`http://127.0.0.1:${monitorPort}/healthz`).catch(() => null);
        await response?.body?.cancel();
        return response?.status === 200;
      }, { timeoutMs, intervalMs: 100, message: `nats-server ${name}'s JetStream ready` })
        .then(() => {}),
  };
}

/**
 * Starts a NATS cluster of `size` servers (routes between all), JetStream on each, and resolves
 * once every server's JetStream is ready (the servers have elected a meta leader).
 */
export async function startNatsCluster(size = 3): Promise<NatsServer[]> {
  const routePorts: number[] = [];
  for (let i = 0; i < size; i++) routePorts.push(await closedPort());
  const servers = await Promise.all(routePorts.map((port, i) =>
    startNats({
      name: `n${i + 1}`,
      cluster: { name: "tunnelmux", port, routes: routePorts.filter((p) => p !== port) },
    })
  ));
  await Promise.all(servers.map((server) => server.ready()));
  return servers;
}
