/**
 * Test support: link faults with Shopify's toxiproxy, a real TCP proxy that injects latency,
 * jitter, tiny segments, bandwidth limits, resets and blackholes between two sockets. The server
 * (v2.12.0) is installed from the Go module proxy into `.cache/tools` on first use and driven over
 * its HTTP API; each test file gets its own server on a free loopback port.
 *
 * @example
 * ```ts ignore
 * import { startToxiproxy } from "./toxiproxy.ts";
 * const toxiproxy = await startToxiproxy();
 * const link = await toxiproxy.proxy("daemon", daemonPort);
 * await link.add({ type: "latency", attributes: { latency: 20, jitter: 10 } });
 * // clients dial link.port instead of daemonPort
 * ```
 *
 * @module
 */

import { spawn } from "node:child_process";
import { join } from "node:path";
import { installGoTool } from "../util/host/go_build.ts";
import { register } from "./cleanup.ts";
import { closedPort } from "./fake_servers.ts";
import { ROOT } from "./process.ts";
import { waitFor } from "./wait.ts";

/** The toxiproxy release the chaos tests are written against. */
export const TOXIPROXY_PACKAGE = "github.com/Shopify/toxiproxy/v2/cmd/server@v2.12.0";

/** A toxic, as toxiproxy's API takes it. */
export interface Toxic {
  /** `latency`, `bandwidth`, `slicer`, `reset_peer`, `timeout`, `limit_data`, `slow_close`. */
  type: string;
  /** Name (default: type and direction). */
  name?: string;
  /** `downstream` (toward the dialer, default) or `upstream` (toward the upstream server). */
  stream?: "upstream" | "downstream";
  /** Probability in [0, 1] that a connection gets the toxic (default 1). */
  toxicity?: number;
  /** The toxic's own settings, e.g. `{ latency: 20, jitter: 10 }` (milliseconds). */
  attributes?: Record<string, number>;
}

/** One proxy: listens on `port`, forwards to the upstream, with toxics added and removed live. */
export interface Link {
  /** The loopback port to dial instead of the upstream. */
  readonly port: number;
  /** Adds a toxic; resolves with its name. */
  add(toxic: Toxic): Promise<string>;
  /** Removes a toxic by name. */
  remove(name: string): Promise<void>;
  /** Cuts every connection and refuses new ones (`false`), or accepts again (`true`). */
  setEnabled(enabled: boolean): Promise<void>;
  /** Sends new connections to `127.0.0.1:port` (a load balancer moving to another node). */
  setUpstream(port: number): Promise<void>;
}

/** A running toxiproxy server. */
export interface Toxiproxy {
  /** Creates a proxy named `name` from a free loopback port to `127.0.0.1:upstreamPort`. */
  proxy(name: string, upstreamPort: number): Promise<Link>;
  /** Stops the server. */
  close(): Promise<void>;
}

async function api(base: string, method: string, path: string, body?: unknown): Promise<unknown> {
  const response = await fetch(`${base}${path}`, {
    method,
    headers: body === undefined ? undefined : { "content-type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await response.text();
  if (!response.ok) throw new Error(`toxiproxy ${method} ${path}: ${response.status} ${text}`);
  return text ? JSON.parse(text) : undefined;
}

/** Installs (once) and starts a toxiproxy server on a free loopback port; stopped by cleanup. */
export async function startToxiproxy(): Promise<Toxiproxy> {
  const bin = await installGoTool({
    name: "toxiproxy-server",
    pkg: TOXIPROXY_PACKAGE,
    cacheDir: join(ROOT, ".cache", "tools"),
  });
  const apiPort = await closedPort();
  const child = spawn(bin, ["-host", "127.0.0.1", "-port", String(apiPort)], {
    stdio: ["ignore", "ignore", "pipe"],
  });
  let output = "";
  child.stderr!.on("data", (chunk: Uint8Array) => {
    output = (output + new TextDecoder().decode(chunk)).slice(-4000);
  });
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  const close = async () => {
    if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
    await exited;
  };
  const unregister = register(close);
  const base = `http://127.0.0.1:${apiPort}`;
  await waitFor(
    () => api(base, "GET", "/version").then(() => true, () => false),
    { timeoutMs: 10_000, intervalMs: 50, message: "toxiproxy to answer on its API" },
  );
  return {
    async proxy(name, upstreamPort) {
      for (let tries = 0;; tries++) {
        const port = await closedPort();
        try {
          await api(base, "POST", "/proxies", {
            name,
            listen: `127.0.0.1:${port}`,
            upstream: `127.0.0.1:${upstreamPort}`,
            enabled: true,
          });
        } catch (error) {
          if (tries < 3) continue; // the free port was taken in between
          throw error;
        }
        return {
          port,
          async add(toxic) {
            const stream = toxic.stream ?? "downstream";
            const toxicName = toxic.name ?? `${toxic.type}_${stream}`;
            await api(base, "POST", `/proxies/${name}/toxics`, {
              name: toxicName,
              type: toxic.type,
              stream,
              toxicity: toxic.toxicity ?? 1,
              attributes: toxic.attributes ?? {},
            });
            return toxicName;
          },
          async remove(toxicName) {
            await api(base, "DELETE", `/proxies/${name}/toxics/${toxicName}`);
          },
          async setEnabled(enabled) {
            await api(base, "POST", `/proxies/${name}`, { enabled });
          },
          async setUpstream(port) {
            await api(base, "POST", `/proxies/${name}`, { upstream: `127.0.0.1:${port}` });
          },
        };
      }
    },
    async close() {
      unregister();
      await close();
    },
  };
}
