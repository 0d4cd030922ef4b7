/**
 * `bench:failover`: what visitors see when a cluster node dies. A cluster of three daemons on
 * one nats-server; a client CLI with `--ha N` exposes an echo service; visitors arrive at a
 * fixed rate through the third node (which stays up) while the first node, which holds a route,
 * is killed with SIGKILL. Reported per `--ha`: visitors sent and failed, the longest gap between
 * two successful visitors, and the time from the kill until visitors succeed again for good.
 * Run with `--ha 1` (one session: it must reconnect to another node and wait for the dead node's
 * claim to expire) beside `--ha 2` (a second route is already there).
 *
 * @module
 */

import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import process from "node:process";
import { parseArgs } from "node:util";
import { daemonConfig, newToken, ROOT } from "../testing/mod.ts";
import { installGoTool } from "../util/host/go_build.ts";
import { parseHostPort } from "../util/net/address.ts";
import { echoProbe } from "./echo_probe.ts";
import { type JsRuntime, RUNTIME_BIN } from "./impls.ts";
import { freePort, type LongProcess, startProcess } from "./tunnel/procs.ts";

const HELP = `bench:failover: visitors through a three-node cluster while a node dies

Usage: failover [--runtime deno|bun] [--ha 1,2] [--rate N] [--ttl-ms MS] [--json FILE] [--quick]

  --runtime R     the daemons' and client's runtime (default: the one running this)
  --ha 1,2        the --ha values to compare (default 1,2)
  --rate N        visitors per second (default 50)
  --ttl-ms MS     the cluster's presence TTL (default 2000)
  --quick         shorter phases (a smoke test)
  --json FILE     write the results as JSON`;

/** What one run measured. */
export interface FailoverResult {
  /** The client's --ha. */
  ha: number;
  /** Visitors sent. */
  visitors: number;
  /** Visitors that failed (refused, reset, or a wrong echo). */
  failed: number;
  /** The longest time between two successful visitors, ms. */
  longestGapMs: number;
  /** From the kill until the first success after the last failure, ms (0: none failed). */
  wholeAfterMs: number;
}

const START_MS = 30_000;

function argv(runtime: JsRuntime, file: string): string[] {
  const path = join(ROOT, file);
  return runtime === "deno" ? [RUNTIME_BIN.deno, "run", "-A", path] : [RUNTIME_BIN.bun, path];
}

/** One visitor: 32 bytes through `host:port`, expected back. */
function visitor(host: string, port: number, timeoutMs: number): Promise<boolean> {
  return echoProbe(host, port, 32, timeoutMs);
}

/** Runs the scenario once with `--ha ha`. */
export async function runFailover(options: {
  runtime: JsRuntime;
  ha: number;
  ratePerSecond: number;
  ttlMs: number;
  beforeMs: number;
  afterMs: number;
  log?: (line: string) => void;
}): Promise<FailoverResult> {
  const { runtime, ha, ttlMs } = options;
  const log = options.log ?? (() => {});
  const dir = mkdtempSync(join(tmpdir(), "tunnelmux-failover-"));
  const started: LongProcess[] = [];
  const closers: (() => void)[] = [];
  try {
    const nats = await installGoTool({
      name: "nats-server",
      pkg: "github.com/nats-io/nats-server/v2@v2.15.2",
      cacheDir: join(ROOT, ".cache", "tools"),
    });
    const natsPort = await freePort();
    started.push(
      await startProcess(
        [nats, "-js", "-sd", join(dir, "nats"), "-a", "127.0.0.1", "-p", String(natsPort)],
        { ready: /Server is ready/, timeoutMs: START_MS },
      ),
    );
    // The local service: an echo server in this process.
    const backend = createServer((socket) => {
      socket.on("error", () => {});
      socket.pipe(socket);
    });
    await new Promise<void>((resolve) => backend.listen(0, "127.0.0.1", resolve));
    closers.push(() => backend.close());
    const backendAddress = `127.0.0.1:${(backend.address() as { port: number }).port}`;
    const token = newToken("failover");
    const key = newToken("cluster-key");
    const nodes: LongProcess[] = [];
    for (let i = 1; i <= 3; i++) {
      const config = join(dir, `n${i}.json`);
      writeFileSync(
        config,
        JSON.stringify(daemonConfig([{ name: "bench", token }], {
          dataDir: join(dir, `data${i}`),
          cluster: {
            servers: [`nats://127.0.0.1:${natsPort}`],
            node: `n${i}`,
            listen: "127.0.0.1:0", // a free port, the one the node advertises
            tunnelHost: `127.0.0.${i}`,
            presenceTtlMs: ttlMs,
          },
        })),
      );
      const node = await startProcess([
        ...argv(runtime, "daemon/main.ts"),
        "--config",
        config,
        "--listen-tcp",
        "127.0.0.1:0",
        "--listen-ws",
        "off",
        "--listen-admin",
        "off",
        "--log-format",
        "json",
      ], {
        ready: /tunnels over TCP on (\S+)/,
        timeoutMs: START_MS,
        env: { ...process.env, TUNNELMUX_CLUSTER_KEY: key } as Record<string, string>,
      });
      nodes.push(node);
      started.push(node);
    }
    const client = await startProcess([
      ...argv(runtime, "client/main.ts"),
      "--server",
      nodes.map((n) => `tcp://${n.ready[1]}`).join(","),
      "--ha",
      String(ha),
      "--expose",
      `0=${backendAddress}`,
      "--log-format",
      "json",
    ], {
      ready: ha > 1 ? /"whole: a session on each node"/ : /"tunnel up".*"remote":"([^"]+)"/,
      timeoutMs: START_MS,
      env: { ...process.env, TUNNELMUX_TOKEN: token } as Record<string, string>,
    });
    started.push(client);
    let remote: string | undefined;
    for (let waited = 0; !remote; waited += 50) {
      remote = /"tunnel up".*?"remote":"([^"]+)"/.exec(client.output())?.[1];
      if (waited > START_MS) throw new Error("the client announced no tunnel");
      if (!remote) await new Promise((resolve) => setTimeout(resolve, 50));
    }
    const { port } = parseHostPort(remote);
    // The third node stays: visitors come through it (a relay to whichever node holds a route).
    while (!(await visitor("127.0.0.3", port, 1000))) {
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    log(`  --ha ${ha}: visitors on 127.0.0.3:${port}, killing n1 in ${options.beforeMs} ms`);
    const interval = 1000 / options.ratePerSecond;
    const results: { at: number; ok: boolean }[] = [];
    const inFlight: Promise<void>[] = [];
    const t0 = Date.now();
    let killedAt = 0;
    const end = t0 + options.beforeMs + options.afterMs;
    for (let i = 0; Date.now() < end; i++) {
      const at = t0 + i * interval;
      const wait = at - Date.now();
      if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
      if (!killedAt && Date.now() - t0 >= options.beforeMs) {
        killedAt = Date.now();
        process.kill(nodes[0].pid, "SIGKILL"); // the node dies without a word
      }
      const started = Date.now();
      inFlight.push(
        visitor("127.0.0.3", port, 2000).then((ok) => {
          results.push({ at: started, ok });
        }),
      );
    }
    await Promise.all(inFlight);
    results.sort((a, b) => a.at - b.at);
    let longestGapMs = 0;
    let lastOk = t0;
    let lastFailure = 0;
    for (const r of results) {
      if (r.ok) {
        longestGapMs = Math.max(longestGapMs, r.at - lastOk);
        lastOk = r.at;
      } else lastFailure = r.at;
    }
    const recovered = results.find((r) => r.ok && r.at > lastFailure);
    return {
      ha,
      visitors: results.length,
      failed: results.filter((r) => !r.ok).length,
      longestGapMs,
      wholeAfterMs: lastFailure === 0 ? 0 : (recovered?.at ?? Date.now()) - killedAt,
    };
  } finally {
    await Promise.all(started.reverse().map((p) => p.stop(500)));
    for (const close of closers) close();
    rmSync(dir, { recursive: true, force: true });
  }
}

async function main(): Promise<number> {
  const { values } = parseArgs({
    args: process.argv.slice(2).filter((a) => a !== "--"),
    options: {
      runtime: { type: "string" },
      ha: { type: "string", default: "1,2" },
      rate: { type: "string", default: "50" },
      "ttl-ms": { type: "string", default: "2000" },
      json: { type: "string" },
      quick: { type: "boolean", default: false },
      help: { type: "boolean", short: "h" },
    },
  });
  if (values.help) {
    console.log(HELP);
    return 0;
  }
  const runtime = (values.runtime ?? ("Bun" in globalThis ? "bun" : "deno")) as JsRuntime;
  const has = values.ha.split(",").map(Number);
  const results: FailoverResult[] = [];
  console.log(`failover bench: ${runtime}, presence TTL ${values["ttl-ms"]} ms`);
  for (const ha of has) {
    results.push(
      await runFailover({
        runtime,
        ha,
        ratePerSecond: Number(values.rate),
        ttlMs: Number(values["ttl-ms"]),
        beforeMs: values.quick ? 500 : 2_000,
        afterMs: values.quick ? Number(values["ttl-ms"]) + 2_500 : Number(values["ttl-ms"]) + 6_000,
        log: (line) => console.log(line),
      }),
    );
  }
  console.log("\n  --ha   visitors   failed   longest gap ms   whole again after ms");
  for (const r of results) {
    console.log(
      `  ${String(r.ha).padStart(4)}   ${String(r.visitors).padStart(8)}   ${
        String(r.failed).padStart(6)
      }   ${String(r.longestGapMs).padStart(14)}   ${String(r.wholeAfterMs).padStart(20)}`,
    );
  }
  if (values.json) {
    writeFileSync(values.json, JSON.stringify({ runtime, date: new Date(), results }, null, 2));
  }
  return 0;
}

if (import.meta.main) process.exit(await main());
