/**
 * `npm run cluster`: a local three-node cluster to try the cluster out on one machine. Builds
 * `nats-server` (v2.15.2, from the Go module proxy, into `.cache/tools`; needs Go), starts it with
 * JetStream on 127.0.0.1:4222, then three daemons n1, n2 and n3 that bind tunnel ports on
 * 127.0.0.1, 127.0.0.2 and 127.0.0.3 (so all three can hold the same port numbers, as separate
 * hosts would). Prints each node's listeners, the client token and the admin token; Ctrl-C stops
 * everything and removes the temporary state.
 *
 * @module
 */

import { type ChildProcess, spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import process from "node:process";
import { fileURLToPath } from "node:url";
import { installGoTool } from "../util/go_build.ts";

const HELP = `npm run cluster: a local three-node tunnelmux cluster on one NATS server

Usage:
  npm run cluster [-- --nodes N] [-- --nats-port PORT]

Starts nats-server (JetStream) on 127.0.0.1:4222 and N daemons (default 3). Node i listens on
127.0.0.1:710i (TCP), 127.0.0.1:718i (WebSocket), 127.0.0.1:719i (admin) and 127.0.0.1:709i
(relays between nodes), and binds tunnel ports on 127.0.0.i. Ctrl-C stops them all.`;

const ROOT = fileURLToPath(new URL("..", import.meta.url));
const children: ChildProcess[] = [];
let dir = "";

function stopAll(code: number): never {
  for (const child of children) child.kill("SIGTERM");
  if (dir) rmSync(dir, { recursive: true, force: true });
  process.exit(code);
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
  process.on("SIGINT", () => stopAll(0));
  process.on("SIGTERM", () => stopAll(0));
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
    console.error(`nats-server exited (${code}):\n${natsOutput}`);
    stopAll(1);
  });
  await new Promise((resolve) => setTimeout(resolve, 500));
  const token = randomBytes(24).toString("base64url");
  const adminToken = randomBytes(24).toString("base64url");
  const key = randomBytes(24).toString("base64url");
  const deno = join(ROOT, "node_modules", ".bin", "deno");
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
      },
    });
    children.push(child);
    child.once("exit", (code) => {
      console.error(`node n${i} exited (${code})`);
      stopAll(1);
    });
  }
  console.log(`
A ${nodes}-node cluster on NATS 127.0.0.1:${natsPort}:
${
    Array.from({ length: nodes }, (_, k) => k + 1).map((i) =>
      `  n${i}: tcp://127.0.0.1:710${i}  ws://127.0.0.1:718${i}/tunnel  admin http://127.0.0.1:719${i}  tunnels on 127.0.0.${i}`
    ).join("\n")
  }

client token (TUNNELMUX_TOKEN): ${token}
admin token:                    ${adminToken}

Try: TUNNELMUX_TOKEN=${token} node_modules/.bin/deno run -A client/main.ts \\
       --server tcp://127.0.0.1:7101 --expose 9000=127.0.0.1:3000
then reach 127.0.0.2:9000 (node n2 relays to n1), and curl -H "Authorization: Bearer ${adminToken}"
http://127.0.0.1:7192/v1/cluster. Ctrl-C stops the cluster.`);
}

if (import.meta.main) {
  main().catch((error) => {
    console.error(`cluster: ${(error as Error).message}`);
    stopAll(1);
  });
}
