/**
 * Expose a local service through a tunnelmux daemon: visitors of the daemon's port reach
 * `LOCAL` on this machine, and the tunnel comes back by itself after a reconnect.
 *
 *   TUNNELMUX_TOKEN=… deno run -A examples/expose.ts ws://127.0.0.1:7080/tunnel 127.0.0.1:3000
 *   TUNNELMUX_TOKEN=… bun examples/expose.ts tcp://127.0.0.1:7000 127.0.0.1:3000
 *
 * @module
 */

import process from "node:process";
import { connect } from "../client/mod.ts";

const [server = "ws://127.0.0.1:7080/tunnel", local = "127.0.0.1:3000", port = "0"] = process.argv
  .slice(2);
const client = await connect(server, { token: process.env.TUNNELMUX_TOKEN ?? "" });
client.on("error", (error) => console.error(error.message));
client.on(
  "tunnel",
  (t) => console.log(`visitors of ${t.remoteHost}:${t.remotePort} reach ${t.local}`),
);
process.on("SIGINT", () => client.close().then(() => process.exit(0)));
await client.expose({ local, remotePort: Number(port) });
