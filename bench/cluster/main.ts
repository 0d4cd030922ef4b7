/**
 * `npm run bench:cluster`: the coordination load of a cluster as it grows. For each shape (N nodes
 * × T tunnels) it starts one nats-server (JetStream, monitoring on loopback), N daemon processes
 * in one cluster (relays and tunnel ports on 127.0.0.x), and one client process per node holding
 * T/N reverse tunnels there; then, in steady state, reads nats-server's `/varz` twice to get the
 * NATS messages, bytes and JetStream API requests per second, and each daemon's CPU and RSS from
 * `/proc`. Then churn: a few more tunnels claimed on node 1 (time until a watcher of the ports
 * bucket sees each), the last node SIGKILLed (time until every one of its ports is released by
 * the others), then restarted with its client (time until its tunnels are claimed again, and the
 * NATS messages its start cost). Every process is started in its own process group and killed at
 * the end.
 *
 * ```sh
 * deno run -A bench/cluster/main.ts [--nodes 2,5,10] [--tunnels 100,1000] [--window 50]
 *   [--root DIR] [--out DIR] [--from FILE,FILE]
 * ```
 *
 * @module
 */

import { type ChildProcess, spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdirSync, mkdtempSync, openSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { connect as netConnect, createServer } from "node:net";
import { loadavg, tmpdir } from "node:os";
import { join, resolve } from "node:path";
import process from "node:process";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { connect as natsConnect } from "@nats-io/transport-node";
import { Kvm } from "@nats-io/kv";
import { natsServerBinary } from "../../testing/nats.ts";
import {
  cpuSecondsOfStat,
  type NatsCounters,
  parseVarz,
  ratesOf,
  rssMiBOfStatus,
} from "./model.ts";
import { renderCurves } from "../scale/plot.ts";

const HELP = `Usage: bench/cluster/main.ts [options]

The cluster's coordination load: for each N × T, one nats-server, N daemons (Deno) and a client
process per node holding T/N tunnels; NATS messages, bytes and JetStream API requests per second
in steady state, each daemon's CPU and RSS, nats-server's CPU, the time for a claim to reach a
watcher, for a killed node's ports to be released and for the node, restarted, to hold its
tunnels again.

  --nodes LIST     node counts (default 2,5,10)
  --tunnels LIST   tunnel counts in the whole cluster (default 100,1000)
  --window S       steady-state window, seconds (default 50: two periods of the records check
                   at the default TTL; a window that is not a whole number of periods is
                   biased by where it falls)
  --ttl MS         presence TTL (default 5000, the daemon's default)
  --root DIR       run the daemons from this checkout (to compare with an older commit)
  --no-churn       measure the steady state only
  --out DIR        write cluster.json, cluster.md and cluster.svg there
  --from LIST      run nothing: merge finished runs' cluster.json files (comma-separated), print
                   the table and, with --out, write the three files from them
  -h, --help       this text
`;

const ROOT = fileURLToPath(new URL("../..", import.meta.url));
const DENO = join(ROOT, "node_modules", ".bin", "deno");
const BUN = join(ROOT, "node_modules", ".bin", "bun");
/** Tunnels claimed on node 1 to time a claim reaching a watcher. */
const PROBES = 10;

/** One measured shape. */
export interface ShapeResult {
  nodes: number;
  tunnels: number;
  window: number;
  rates: NatsCounters;
  cpuPercentPerNode: number;
  rssMiBPerNode: number;
  /** nats-server's CPU over the window, % of one core (absent in runs made before it was kept). */
  natsCpuPercent?: number;
  claimVisibleMs?: number;
  releaseMs?: number;
  /** A killed node restarted: until its client's tunnels were all claimed again. */
  rejoinMs?: number;
  /** NATS messages in meanwhile (its start reads every bucket whole, then the claims). */
  rejoinMsgs?: number;
  loadAvg: number[];
}

const children: ChildProcess[] = [];
/** Temporary directories of the shape running now, removed however the run ends. */
const scratch = new Set<string>();

function started(child: ChildProcess): ChildProcess {
  children.push(child);
  return child;
}

/** Kills every process group this run started (each child leads its own group). */
function killAll(): void {
  for (const child of children.splice(0)) {
    if (child.exitCode !== null || child.signalCode !== null || !child.pid) continue;
    try {
      process.kill(-child.pid, "SIGKILL");
    } catch { /* already gone */ }
  }
}

function freePort(host = "127.0.0.1"): Promise<number> {
  return new Promise((done, fail) => {
    const server = createServer();
    server.once("error", fail);
    server.listen(0, host, () => {
      const port = (server.address() as { port: number }).port;
      server.close(() => done(port));
    });
  });
}

function portOpen(port: number): Promise<true | undefined> {
  return new Promise((done) => {
    const socket = netConnect({ host: "127.0.0.1", port }, () => {
      socket.destroy();
      done(true);
    });
    socket.once("error", () => done(undefined));
  });
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function until<T>(what: string, ms: number, probe: () => Promise<T | undefined>): Promise<T> {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    const value = await probe().catch(() => undefined);
    if (value !== undefined) return value;
    await sleep(100);
  }
  throw new Error(`timed out after ${ms} ms waiting for ${what}`);
}

function procSample(pid: number): { cpu: number; rss: number } {
  const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  const status = readFileSync(`/proc/${pid}/status`, "utf8");
  return { cpu: cpuSecondsOfStat(stat), rss: rssMiBOfStatus(status) ?? 0 };
}

/** A holder (bench/scale/holder.ts) driven by JSON lines. */
class Holder {
  readonly #lines: AsyncIterator<string>;
  constructor(readonly child: ChildProcess) {
    this.#lines = createInterface({ input: child.stdout! })[Symbol.asyncIterator]();
  }
  async ready(): Promise<void> {
    const line = await this.#lines.next();
    if (line.done || !line.value.includes("ready")) throw new Error("holder did not start");
  }
  async send(command: object): Promise<Record<string, unknown>> {
    this.child.stdin!.write(JSON.stringify(command) + "\n");
    const line = await this.#lines.next();
    if (line.done) throw new Error("holder exited");
    const answer = JSON.parse(line.value);
    if (!answer.ok) throw new Error(`holder: ${answer.error}`);
    return answer;
  }
}

async function runShape(
  nodes: number,
  tunnels: number,
  options: { window: number; ttl: number; root: string; churn: boolean },
): Promise<ShapeResult> {
  const dir = mkdtempSync(join(tmpdir(), "tunnelmux-cluster-scale-"));
  scratch.add(dir);
  try {
    const nats = await natsServerBinary();
    const natsPort = await freePort(), monitor = await freePort();
    const natsProcess = started(spawn(nats, [
      "-js",
      "-sd",
      join(dir, "nats"),
      "-a",
      "127.0.0.1",
      "-p",
      String(natsPort),
      "-m",
      String(monitor),
    ], { stdio: "ignore", detached: true }));
    const varz = async () =>
      parseVarz(await (await fetch(`http://127.0.0.1:${monitor}/varz`)).json());
    await until("nats-server", 20_000, async () => {
      const r = await fetch(`http://127.0.0.1:${monitor}/healthz`);
      await r.body?.cancel();
      return r.ok ? true : undefined;
    });
    const token = randomBytes(24).toString("base64url");
    const key = randomBytes(24).toString("base64url");
    const daemons: ChildProcess[] = [];
    const startDaemon = (i: number) =>
      started(spawn(DENO, [
        "run",
        "-A",
        join(options.root, "daemon", "main.ts"),
        "--config",
        join(dir, `n${i}.json`),
      ], {
        stdio: ["ignore", "ignore", openSync(join(dir, `n${i}.log`), "a")],
        detached: true,
        env: { ...process.env, TUNNELMUX_CLUSTER_KEY: key, NO_COLOR: "1" },
      }));
    const startHolder = async (port: number) => {
      const holder = new Holder(started(spawn(BUN, [
        join(ROOT, "bench", "scale", "holder.ts"),
        "--server",
        `tcp://127.0.0.1:${port}`,
        "--token",
        token,
      ], { stdio: ["pipe", "pipe", "ignore"], detached: true })));
      await holder.ready();
      return holder;
    };
    const tcpPorts: number[] = [];
    for (let i = 1; i <= nodes; i++) {
      const tcp = await freePort(), relay = await freePort();
      tcpPorts.push(tcp);
      const config = {
        listen: { tcp: `127.0.0.1:${tcp}`, websocket: null, admin: null },
        dataDir: join(dir, `n${i}`),
        shutdownGraceMs: 1_000,
        log: { level: "warn", format: "json" },
        limits: { tunnelsPerClient: 65535, sessions: 100 },
        clients: [{ name: "bench", token, expose: { ports: ["20000-32767", 0] } }],
        // Owners only bind their ports: the coordination load is the same, and the machine is
        // spared T × N listeners (visitors "all" binds every tunnel's port on every node).
        cluster: {
          servers: [`nats://127.0.0.1:${natsPort}`],
          node: `n${i}`,
          listen: `127.0.0.1:${relay}`,
          tunnelHost: `127.0.0.${i + 1}`,
          presenceTtlMs: options.ttl,
          visitors: "owner",
        },
      };
      writeFileSync(join(dir, `n${i}.json`), JSON.stringify(config));
      daemons.push(startDaemon(i));
    }
    for (const port of tcpPorts) {
      await until(`a daemon on ${port}`, 60_000, () => portOpen(port));
    }
    // The tunnels, T/N on each node, from one client process per node.
    const holders: Holder[] = [];
    for (let i = 0; i < nodes; i++) holders.push(await startHolder(tcpPorts[i]));
    const share = (i: number) => Math.floor(tunnels / nodes) + (i < tunnels % nodes ? 1 : 0);
    await Promise.all(
      holders.map((h, i) => h.send({ op: "tunnels", count: share(i), local: "127.0.0.1:9" })),
    );
    // Settle: the starts' full reads are over, beats and checks go on.
    await sleep(Math.max(5_000, options.ttl));
    const nats0 = await varz();
    const procs0 = daemons.map((d) => procSample(d.pid!));
    const natsCpu0 = procSample(natsProcess.pid!).cpu;
    const t0 = performance.now();
    await sleep(options.window * 1000);
    const nats1 = await varz();
    const procs1 = daemons.map((d) => procSample(d.pid!));
    const natsCpu1 = procSample(natsProcess.pid!).cpu;
    const seconds = (performance.now() - t0) / 1000;
    const loadAvg = loadavg();
    const cpu = procs1.reduce((s, p, i) => s + p.cpu - procs0[i].cpu, 0) / nodes / seconds * 100;
    const result: ShapeResult = {
      nodes,
      tunnels,
      window: seconds,
      rates: ratesOf(nats0, nats1, seconds),
      cpuPercentPerNode: cpu,
      rssMiBPerNode: procs1.reduce((s, p) => s + p.rss, 0) / nodes,
      natsCpuPercent: (natsCpu1 - natsCpu0) / seconds * 100,
      loadAvg,
    };
    if (options.churn && nodes >= 2) {
      const nc = await natsConnect({ servers: `nats://127.0.0.1:${natsPort}` });
      try {
        const kv = await new Kvm(nc).open("tunnelmux-ports");
        const owner = new Map<string, string>();
        const seenAt = new Map<string, number>();
        let released = 0, lastRelease = 0;
        const victim = `n${nodes}`;
        const watch = await kv.watch();
        void (async () => {
          for await (const e of watch) {
            if (e.operation === "PUT") {
              const node = /"node":"([^"]+)"/.exec(e.string())?.[1];
              if (node) owner.set(e.key, node);
              if (!seenAt.has(e.key)) seenAt.set(e.key, performance.now());
            } else if (owner.get(e.key) === victim) {
              owner.delete(e.key);
              released++;
              lastRelease = performance.now();
            }
          }
        })();
        await sleep(2_000); // the watch has delivered what the bucket held
        // A claim: expose on node 1, then wait for the watcher to see the new port.
        const delays: number[] = [];
        for (let k = 1; k <= PROBES; k++) {
          const asked = performance.now();
          const answer = await holders[0].send({
            op: "tunnels",
            count: share(0) + k,
            local: "127.0.0.1:9",
          });
          const ports = answer.ports as number[];
          const key = `port-${ports[ports.length - 1]}`;
          const at = await until(
            "a claim seen by a watcher",
            10_000,
            () => Promise.resolve(seenAt.get(key)),
          );
          delays.push(Math.max(0, at - asked));
        }
        delays.sort((a, b) => a - b);
        result.claimVisibleMs = delays[Math.floor(delays.length / 2)];
        // A dead node: SIGKILL it (and its client), time until all its ports are released.
        const held = [...owner.values()].filter((n) => n === victim).length;
        const killedAt = performance.now();
        process.kill(-daemons[nodes - 1].pid!, "SIGKILL");
        process.kill(-holders[nodes - 1].child.pid!, "SIGKILL");
        await until(
          "the dead node's ports released",
          60_000,
          () => Promise.resolve(released >= held ? true : undefined),
        );
        result.releaseMs = lastRelease - killedAt;
        // The node restarted, and its client with it: time until its tunnels are claimed again,
        // and what its start (every bucket read whole) cost NATS.
        const before = await varz();
        const restarted = performance.now();
        daemons[nodes - 1] = startDaemon(nodes);
        await until("the restarted daemon", 60_000, () => portOpen(tcpPorts[nodes - 1]));
        const back = await startHolder(tcpPorts[nodes - 1]);
        await back.send({ op: "tunnels", count: share(nodes - 1), local: "127.0.0.1:9" });
        result.rejoinMs = performance.now() - restarted;
        const after = await varz();
        result.rejoinMsgs = after.inMsgs - before.inMsgs;
        watch.stop();
      } finally {
        await nc.close();
      }
    }
    return result;
  } catch (error) {
    const logs = Array.from({ length: nodes }, (_, i) => {
      const text = readFileSync(join(dir, `n${i + 1}.log`), "utf8");
      return text ? `n${i + 1}: ${text.slice(-1500)}` : "";
    }).filter(Boolean);
    throw new Error(`${(error as Error).message}\n${logs.join("\n")}`);
  } finally {
    killAll();
    await sleep(500);
    rmSync(dir, { recursive: true, force: true });
    scratch.delete(dir);
  }
}

/** The results as a Markdown table. */
export function markdownOf(results: readonly ShapeResult[]): string {
  const rows = results.map((r) =>
    `| ${r.nodes} | ${r.tunnels} | ${r.rates.apiTotal.toFixed(1)} | ${
      r.rates.inMsgs.toFixed(0)
    } | ${r.rates.outMsgs.toFixed(0)} | ${(r.rates.outBytes / 1024).toFixed(1)} | ${
      r.cpuPercentPerNode.toFixed(1)
    } | ${r.rssMiBPerNode.toFixed(0)} | ${r.natsCpuPercent?.toFixed(1) ?? "–"} | ${
      r.claimVisibleMs?.toFixed(0) ?? "–"
    } | ${r.releaseMs?.toFixed(0) ?? "–"} | ${r.rejoinMs?.toFixed(0) ?? "–"} | ${
      r.rejoinMsgs ?? "–"
    } | ${r.loadAvg[0].toFixed(1)} |`
  );
  return [
    "| nodes | tunnels | JS API req/s | msgs in/s | msgs out/s | KiB out/s | CPU %/node | RSS MiB/node | nats-server CPU % | claim seen ms | release ms | rejoin ms | rejoin msgs in | load |",
    "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ...rows,
  ].join("\n");
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      nodes: { type: "string", default: "2,5,10" },
      tunnels: { type: "string", default: "100,1000" },
      window: { type: "string", default: "50" },
      ttl: { type: "string", default: "5000" },
      root: { type: "string" },
      "no-churn": { type: "boolean", default: false },
      out: { type: "string" },
      from: { type: "string" },
      help: { type: "boolean", short: "h", default: false },
    },
  });
  if (values.help) {
    console.log(HELP);
    return;
  }
  const list = (text: string, what: string, max: number) =>
    text.split(",").map((s) => {
      const n = Number(s);
      if (!Number.isInteger(n) || n < 1 || n > max) {
        throw new Error(`--${what}: ${s} is not a whole number from 1 to ${max}`);
      }
      return n;
    });
  if (values.from) {
    const merged = values.from.split(",").flatMap((file) => {
      const runs = JSON.parse(readFileSync(file, "utf8"));
      if (!Array.isArray(runs)) throw new Error(`--from: ${file} is not a cluster.json`);
      return runs as ShapeResult[];
    }).sort((a, b) => a.tunnels - b.tunnels || a.nodes - b.nodes);
    report(merged, values.out);
    return;
  }
  const nodeCounts = list(values.nodes!, "nodes", 50);
  const tunnelCounts = list(values.tunnels!, "tunnels", 10_000);
  const window = Number(values.window);
  const ttl = Number(values.ttl);
  if (!(window >= 5 && window <= 600)) throw new Error("--window: 5 to 600 seconds");
  if (!(ttl >= 1000 && ttl <= 60_000)) throw new Error("--ttl: 1000 to 60000 ms");
  const root = resolve(values.root ?? ROOT);
  const results: ShapeResult[] = [];
  for (const signal of ["SIGINT", "SIGTERM"] as const) {
    process.on(signal, () => {
      killAll();
      for (const dir of scratch) rmSync(dir, { recursive: true, force: true });
      process.exit(130);
    });
  }
  for (const tunnels of tunnelCounts) {
    for (const nodes of nodeCounts) {
      console.error(`-- ${nodes} nodes × ${tunnels} tunnels`);
      const r = await runShape(nodes, tunnels, {
        window,
        ttl,
        root,
        churn: !values["no-churn"],
      });
      results.push(r);
      console.error(markdownOf([r]).split("\n")[2]);
    }
  }
  report(results, values.out);
}

/** Prints the table of `results` and, given `out`, writes the JSON, the table and the SVG. */
function report(results: ShapeResult[], out: string | undefined): void {
  const table = markdownOf(results);
  console.log(table);
  if (!out) return;
  mkdirSync(out, { recursive: true });
  writeFileSync(join(out, "cluster.json"), JSON.stringify(results, null, 2) + "\n");
  writeFileSync(join(out, "cluster.md"), table + "\n");
  const tunnelCounts = [...new Set(results.map((r) => r.tunnels))].sort((a, b) => a - b);
  const series = (pick: (r: ShapeResult) => number) =>
    tunnelCounts.map((t) => ({
      name: `${t} tunnels`,
      points: results.filter((r) => r.tunnels === t).sort((a, b) => a.nodes - b.nodes)
        .map((r) => ({ x: r.nodes, y: pick(r) })),
    }));
  writeFileSync(
    join(out, "cluster.svg"),
    renderCurves("tunnelmux cluster: coordination load over nodes", [
      { title: "NATS messages out/s", series: series((r) => r.rates.outMsgs) },
      { title: "NATS messages in/s", series: series((r) => r.rates.inMsgs) },
      { title: "CPU % per daemon", series: series((r) => r.cpuPercentPerNode) },
    ]),
  );
}

if (import.meta.main) {
  main().catch((error) => {
    console.error(`bench:cluster: ${(error as Error).message}`);
    killAll();
    process.exit(1);
  });
}
