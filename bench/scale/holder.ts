/**
 * The scale bench's client side for tunnelmux: one process that holds many client sessions (the
 * sessions curve) or many reverse tunnels on one session (the tunnels curve), grown step by step
 * on command so the daemon can be measured between steps. It uses the client SDK, as an
 * application embedding tunnelmux would.
 *
 * Commands are JSON lines on stdin; each gets one JSON line on stdout:
 * - `{"op":"sessions","count":N}` opens sessions until N are up → `{"ok":true,"ms":…}`;
 * - `{"op":"tunnels","count":N,"local":"HOST:PORT"}` exposes `local` on the first session until N
 *   tunnels are up → `{"ok":true,"ms":…,"ports":[…every remote port…]}`;
 * - `{"op":"rss"}` → `{"ok":true,"rssMiB":…}` (this process);
 * - end of stdin closes everything and exits.
 *
 * ```sh
 * bun bench/scale/holder.ts --server tcp://127.0.0.1:7070 --token TOKEN [--keepalive-ms 1000]
 * ```
 *
 * @module
 */

import { parseArgs } from "node:util";
import process from "node:process";
import { createInterface } from "node:readline";
import { type Client, connect, type Tunnel } from "../../client/mod.ts";

const { values } = parseArgs({
  options: {
    server: { type: "string" },
    token: { type: "string" },
    "keepalive-ms": { type: "string", default: "30000" },
  },
});
if (!values.server || !values.token) {
  console.error("usage: holder.ts --server URL --token TOKEN [--keepalive-ms MS]");
  process.exit(2);
}
const server = values.server;
const token = values.token;
const keepAliveInterval = Number(values["keepalive-ms"]);

/** Sessions opened at once while growing: enough to be quick, few enough for the admission limits. */
const PARALLEL = 64;

const clients: Client[] = [];
const tunnels: Tunnel[] = [];

function openOne(): Promise<Client> {
  return connect(server, {
    token,
    reconnect: false,
    readyTimeoutMs: 60_000,
    session: { keepAliveInterval },
  });
}

async function growSessions(count: number): Promise<void> {
  while (clients.length < count) {
    const batch = Math.min(PARALLEL, count - clients.length);
    clients.push(...await Promise.all(Array.from({ length: batch }, openOne)));
  }
}

async function growTunnels(count: number, local: string): Promise<void> {
  if (clients.length === 0) clients.push(await openOne());
  while (tunnels.length < count) {
    const batch = Math.min(PARALLEL, count - tunnels.length);
    tunnels.push(
      ...await Promise.all(Array.from({ length: batch }, () => clients[0].expose({ local }))),
    );
  }
}

function rssMiB(): number {
  return process.memoryUsage().rss / (1024 * 1024);
}

const reply = (value: Record<string, unknown>) => console.log(JSON.stringify(value));

const lines = createInterface({ input: process.stdin });
console.log("holder ready");
for await (const line of lines) {
  if (!line.trim()) continue;
  const command = JSON.parse(line) as { op: string; count?: number; local?: string };
  const started = performance.now();
  try {
    if (command.op === "sessions") {
      await growSessions(command.count!);
      reply({ ok: true, ms: performance.now() - started });
    } else if (command.op === "tunnels") {
      await growTunnels(command.count!, command.local!);
      reply({ ok: true, ms: performance.now() - started, ports: tunnels.map((t) => t.remotePort) });
    } else if (command.op === "rss") {
      reply({ ok: true, rssMiB: rssMiB() });
    } else {
      reply({ ok: false, error: `unknown op ${command.op}` });
    }
  } catch (error) {
    reply({ ok: false, error: (error as Error).message });
  }
}
await Promise.all(clients.map((client) => client.close()));
process.exit(0);
