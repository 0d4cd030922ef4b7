/**
 * `npm run cluster`: a local three-node cluster to try the cluster out on one machine. Builds
 * `nats-server` (v2.15.2, from the Go module proxy, into `.cache/tools`; needs Go), starts it with
 * JetStream on 127.0.0.1:4222, then three daemons n1, n2 and n3 that bind tunnel ports on
 * 127.0.0.1, 127.0.0.2 and 127.0.0.3 (so all three can hold the same port numbers, as separate
 * hosts would). Prints each node's listeners and pid, the client token and the admin token (kept
 * in `.cache/cluster/secrets.json`, the same on every start). A node that dies leaves the others
 * running, so failover can be tried by killing one; Ctrl-C stops everything and removes the
 * temporary state.
 *
 * @module
 */

import { type ChildProcess, spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import process from "node:process";
import { fileURLToPath } from "node:url";
import { installGoTool } from "../util/host/go_build.ts";

const HELP = `npm run cluster: a local three-node tunnelmux cluster on one NATS server

Usage:
  npm run cluster [-- --nodes N] [-- --nats-port PORT]

Starts nats-server (JetStream) on 127.0.0.1:4222 and N daemons (default 3). Node i listens on
127.0.0.1:710i (TCP), 127.0.0.1:718i (WebSocket), 127.0.0.1:719i (admin) and 127.0.0.1:709i
(relays between nodes), and binds tunnel ports on 127.0.0.i. The client and admin tokens are
kept in .cache/cluster/secrets.json and stay the same from one start to the next. A node that
dies (kill its pid to try failover) leaves the others running; Ctrl-C stops them all.`;

const ROOT = fileURLToPath(new URL("..", import.meta.url));
const children: ChildProcess[] = [];
let dir = "";
let stopping = false;

/**
 * Stops every child with `signal` (the one we got: the children got their own copy of a Ctrl-C
 * too, and a copy of the same signal is taken as one), waits for them (bounded), then exits.
 */
async function stopAll(code: number, signal: NodeJS.Signals = "SIGTERM"): Promise<never> {
  if (!stopping) {
    stopping = true;
    const running = children.filter((c) => c.exitCode === null && c.signalCode === null);
    for (const child of running) child.kill(signal);
    const exited = running.map((c) => new Promise((resolve) => c.once("exit", resolve)));
    const bound = new Promise((resolve) => setTimeout(resolve, 35_000).unref());
    await Promise.race([Promise.all(exited), bound]);
    if (dir) rmSync(dir, { recursive: true, force: true });
  }
  process.exit(code);
}

/** The client, admin and cluster secrets: made on the first start, the same on the next ones. */
export function clusterSecrets(
  file: string,
): { token: string; adminToken: string; key: string } {
  if (existsSync(file)) {
    try {
      const kept = JSON.parse(readFileSync(file, "utf8"));
      if (kept.token && kept.adminToken && kept.key) return kept;
    } catch { /* remade below */ }
  }
  const made = {
    token: randomBytes(24).toString("base64url"),
    adminToken: randomBytes(24).toString("base64url"),
    key: randomBytes(24).toString("base64url"),
  };
  mkdirSync(join(file, ".."), { recursive: true });
  writeFileSync(file, JSON.stringify(made, null, 2) + "\n", { mode: 0o600 });
  return made;
}

async function main(): Promise<void> {
  const args = process.argv.slice(2);
  if (args.includes("-h") || args.includes("--help")) {
    console.log(HELP);
    return;
  }
  const option = (name: string, fallback: number) => {
    const at = args.indexOf(name);
    return at >= 0 ? Number(args[at + 1]) : fallback;
  };
  const nodes = option("--nodes", 3);
  const natsPort = option("--nats-port", 4222);
  if (!(nodes >= 1 && nodes <= 9)) throw new Error("--nodes must be 1 to 9");
  console.log("building nats-server (first run only)...");
  const nats = await installGoTool({
    name: "nats-server",
    pkg: "github.com/nats-io/nats-server/v2@v2.15.2",
    cacheDir: join(ROOT, ".cache", "tools"),
  });
  dir = mkdtempSync(join(tmpdir(), "tunnelmux-cluster-"));
  for (const signal of ["SIGINT", "SIGTERM", "SIGHUP"] as const) {
    process.on(signal, () => void stopAll(0, signal === "SIGHUP" ? "SIGTERM" : signal));
  }
  const natsProcess = spawn(
    nats,
    ["-js", "-sd", join(dir, "nats"), "-a", "127.0.0.1", "-p", String(natsPort)],
    { stdio: ["ignore", "ignore", "pipe"] },
  );
  children.push(natsProcess);
  let natsOutput = "";
  natsProcess.stderr!.on("data", (chunk: Uint8Array) => {
    natsOutput = (natsOutput + new TextDecoder().decode(chunk)).slice(-4000);
  });
  natsProcess.once("exit", (code) => {
    if (stopping) return;
    console.error(`nats-server exited (${code}):\n${natsOutput}`);
    void stopAll(1);
  });
  await new Promise((resolve) => setTimeout(resolve, 500));
  const { token, adminToken, key } = clusterSecrets(
    join(ROOT, ".cache", "cluster", "secrets.json"),
  );
  const deno = join(ROOT, "node_modules", ".bin", "deno");
  const nodePids: number[] = [];
  for (let i = 1; i <= nodes; i++) {
    const child = spawn(deno, [
      "run",
      "--allow-net",
      "--allow-env",
      "--allow-read",
      "--allow-write",
      "--allow-sys",
      join(ROOT, "daemon", "main.ts"),
      "--listen-tcp",
      `127.0.0.1:710${i}`,
      "--listen-ws",
      `127.0.0.1:718${i}`,
      "--listen-admin",
      `127.0.0.1:719${i}`,
      "--data-dir",
      join(dir, `n${i}`),
      "--log-format",
      "pretty",
      "--cluster-servers",
      `nats://127.0.0.1:${natsPort}`,
      "--cluster-node",
      `n${i}`,
      "--cluster-listen",
      `127.0.0.1:709${i}`,
      "--cluster-tunnel-host",
      `127.0.0.${i}`,
    ], {
      stdio: ["ignore", "ignore", "inherit"],
      env: {
        ...process.env,
        TUNNELMUX_TOKEN: token,
        TUNNELMUX_ADMIN_TOKEN: adminToken,
        TUNNELMUX_CLUSTER_KEY: key,
        // If this tool is SIGKILLed, the nodes stop too (util/host/host.ts, watchLauncher).
        TUNNELMUX_LAUNCHER_PID: String(process.pid),
      },
    });
    children.push(child);
    nodePids.push(child.pid!);
    // One node's death is what failover is about: the others keep running. Only when the last
    // one is gone is there nothing left to try.
    child.once("exit", (code, signal) => {
      if (stopping) return;
      const left = children.slice(1).filter((c) => c.exitCode === null && c.signalCode === null);
      console.error(`node n${i} exited (${signal ?? code}); ${left.length} still running`);
      if (left.length === 0) void stopAll(1);
    });
  }
  console.log(`
A ${nodes}-node cluster on NATS 127.0.0.1:${natsPort}:
${
    Array.from({ length: nodes }, (_, k) => k + 1).map((i) =>
      `  n${i}: tcp://127.0.0.1:710${i}  ws://127.0.0.1:718${i}/tunnel  admin http://127.0.0.1:719${i}  tunnels on 127.0.0.${i}  pid ${
        nodePids[i - 1]
      }`
    ).join("\n")
  }

client token (TUNNELMUX_TOKEN): ${token}
admin token:                    ${adminToken}
(both kept in .cache/cluster/secrets.json: the same on the next start)

Try: TUNNELMUX_TOKEN=${token} npx tunnelmux client \\
       --server tcp://127.0.0.1:7101,tcp://127.0.0.1:7102 --ha 2 --expose 9000=127.0.0.1:3000
then reach 127.0.0.3:9000 (node n3 relays to n1 or n2), kill n1's pid and reach it again (the
session on n2 serves it), and curl -H "Authorization: Bearer ${adminToken}"
http://127.0.0.1:7192/v1/cluster. Ctrl-C stops the cluster.`);
}

if (import.meta.main) {
  main().catch((error) => {
    console.error(`cluster: ${(error as Error).message}`);
    void stopAll(1);
  });
}
