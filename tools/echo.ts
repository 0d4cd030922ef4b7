/**
 * `echo`: plain yamux over TCP with no auth and no tunnel layer, the interop and benchmark target.
 * As a server it echoes every inbound stream until the peer half-closes, then half-closes back; as a
 * client (`--connect`) it opens echo streams and verifies every byte, so foreign servers can be
 * checked too.
 *
 * @module
 */

import process from "node:process";
import { parseArgs } from "node:util";
import { Session } from "../protocol/mod.ts";
import { connectTcp, listenTcp, runtimeName } from "../transport/mod.ts";
import { checkEcho } from "./echo_check.ts";
import { echoStream } from "../tunnel/echo.ts";
import { formatHostPort, parseHostPort } from "../util/net/address.ts";

const HELP = `tunnelmux echo: a strict, fast yamux echo peer

Usage:
  echo [--listen HOST:PORT]          serve: echo every stream, half-close when the peer does
  echo --connect HOST:PORT [opts]    check a server: open streams, verify every echoed byte

Options:
  --listen HOST:PORT   address to serve on (default 127.0.0.1:7000; port 0 picks a free one).
                       Prints "listening on HOST:PORT" when ready.
  --connect HOST:PORT  act as the client against an echo server at HOST:PORT
  --streams N          client: streams to open (default 100)
  --max-size BYTES     client: largest payload per stream, sizes vary from 1 (default 65536)
  --concurrency N      client: streams in flight at once (default 16)
  --seed N             client: seed for sizes and contents (default 1)
  --window BYTES       largest receive window per stream (default 16777216)
  --quiet              server: do not log sessions
  -h, --help           show this help

The client prints one JSON line: {"ok":true,"streams":N,"bytes":N,"ms":N} and exits 0, or
prints the error and exits 1.`;

/**
 * Runs `tunnelmux echo` with `args`: resolves once a client run is done (a server runs until the
 * process ends). Run directly, this file passes its own arguments.
 */
export function main(args: string[] = process.argv.slice(2)): Promise<void> | void {
  args = [...args];
  if (args[0] === "--") args.shift(); // `deno task echo -- --listen …` passes the separator on
  const { values } = parseArgs({
    args,
    options: {
      listen: { type: "string" },
      connect: { type: "string" },
      streams: { type: "string", default: "100" },
      "max-size": { type: "string", default: "65536" },
      concurrency: { type: "string", default: "16" },
      seed: { type: "string", default: "1" },
      window: { type: "string", default: String(16 * 1024 * 1024) },
      quiet: { type: "boolean", default: false },
      help: { type: "boolean", short: "h", default: false },
    },
  });
  if (values.help) return console.log(HELP);
  const config = { maxStreamWindow: positive("window", values.window) };
  if (values.connect !== undefined) {
    return runClient(values.connect, config, {
      streams: positive("streams", values.streams),
      maxSize: positive("max-size", values["max-size"]),
      concurrency: positive("concurrency", values.concurrency),
      seed: positive("seed", values.seed),
    });
  }
  return runServer(values.listen ?? "127.0.0.1:7000", config, values.quiet);
}

async function runServer(address: string, config: { maxStreamWindow: number }, quiet: boolean) {
  const log = quiet ? () => {} : (line: string) => console.error(line);
  const listener = await listenTcp(parseHostPort(address), (transport) => {
    const session = new Session(transport, {
      client: false,
      config,
      onStream: echoStream,
      onError: (error, reason) =>
        log(`session ${transport.remoteAddress}: ${reason}: ${error.message}`),
    });
    log(`session ${transport.remoteAddress}: open`);
    session.closed.then((error) =>
      log(`session ${transport.remoteAddress}: closed${error ? `: ${error.message}` : ""}`)
    );
  });
  console.log(`listening on ${formatHostPort(listener.hostname, listener.port)}`);
  log(`echo server on ${runtimeName()}; Ctrl-C stops it`);
  const stop = () => {
    listener.close();
    process.exit(0);
  };
  process.on("SIGINT", stop);
  process.on("SIGTERM", stop);
}

async function runClient(
  address: string,
  config: { maxStreamWindow: number },
  options: Parameters<typeof checkEcho>[1],
) {
  const target = parseHostPort(address);
  let session: Session | undefined;
  try {
    session = new Session(await connectTcp(target), { client: true, config });
    const result = await checkEcho(session, options);
    console.log(JSON.stringify({ ok: true, ...result }));
    await session.close();
  } catch (error) {
    console.error(`echo check against ${address} failed: ${(error as Error).message}`);
    session?.destroy();
    process.exit(1);
  }
}

function positive(name: string, text: string): number {
  const value = Number(text);
  if (!Number.isInteger(value) || value < 1) {
    throw new Error(`--${name} must be a positive integer, got "${text}"`);
  }
  return value;
}

if (import.meta.main) {
  try {
    await main();
  } catch (error) {
    console.error(`echo: ${(error as Error).message}\n\n${HELP}`);
    process.exit(2);
  }
}
