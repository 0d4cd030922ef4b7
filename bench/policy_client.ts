/**
 * The client process of `bench:policy`'s paired part (P6): one SDK session exposing the same local
 * service twice, once without a visitor policy and once with one whose every check runs and refuses
 * nobody, so both variants share one daemon process and one client process. Prints
 * `ready {"none":PORT,"allowAll":PORT}` once both tunnels are up, then serves until it is ended.
 *
 * Usage: policy_client.ts SERVER_URL TOKEN LOCAL_HOST:PORT
 *
 * @module
 */

import process from "node:process";
import { connect } from "../client/mod.ts";
import type { VisitorPolicy } from "../tunnel/policy/visitor_policy.ts";

/** Every rule set, none refusing anyone: the addresses of the world, limits far past the load. */
export const ALLOW_ALL: VisitorPolicy = {
  allow: ["0.0.0.0/0", "::/0"],
  connectionsPerSecond: 1_000_000,
  tunnelConnectionsPerSecond: 1_000_000,
  connectionsPerVisitor: 1_000_000,
  bandwidth: { in: 1_000_000_000_000, out: 1_000_000_000_000 },
};

async function main(): Promise<void> {
  const [server, token, local] = process.argv.slice(2);
  if (!server || !token || !local) {
    console.error("usage: policy_client.ts SERVER_URL TOKEN LOCAL_HOST:PORT");
    process.exit(2);
  }
  const client = await connect(server, { token, reconnect: false });
  const none = await client.expose({ local });
  const allowAll = await client.expose({ local, policy: ALLOW_ALL });
  console.log(`ready ${JSON.stringify({ none: none.remotePort, allowAll: allowAll.remotePort })}`);
  // Ended by the bench (stdin closed, then SIGTERM); the session keeps the process alive.
  process.stdin.on("end", () => void client.close().finally(() => process.exit(0)));
  process.stdin.resume();
}

if (import.meta.main) await main();
