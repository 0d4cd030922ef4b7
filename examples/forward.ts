/**
 * Reach a target through a tunnelmux daemon from a script: one raw stream, with the callback API,
 * then the same through Web Streams. The daemon only dials targets on this client's allowlist; a
 * refusal arrives as a reset whose reason `describeStreamError` puts in words.
 *
 *   TUNNELMUX_TOKEN=… deno run -A examples/forward.ts tcp://127.0.0.1:7000 10.0.0.5:5432
 *
 * @module
 */

import process from "node:process";
import { connect, describeStreamError } from "../client/mod.ts";

const [server = "tcp://127.0.0.1:7000", target = "127.0.0.1:5432"] = process.argv.slice(2);
const client = await connect(server, {
  token: process.env.TUNNELMUX_TOKEN ?? "",
  reconnect: false,
});

// Callback API: the fast path.
const stream = client.open(target);
stream.onData = (chunk) => console.log(`${chunk.length} bytes from ${target}`);
stream.onEnd = () => console.log("the target closed its side");
stream.onClose = (error) => error && console.error(`stream failed: ${describeStreamError(error)}`);
stream.write(new TextEncoder().encode("hello\n"));
stream.end();

// Web Streams: built on demand on top of the same stream API.
const second = client.open(target);
const writer = second.writable.getWriter();
await writer.write(new TextEncoder().encode("hello again\n"));
await writer.close();
try {
  for await (const chunk of second) console.log(`${chunk.length} bytes (Web Streams)`);
} catch (error) {
  console.error(`stream failed: ${describeStreamError(error as Error)}`);
}
await client.close();
