/**
 * The scale bench's streams curve: one yamux session over loopback TCP between two processes,
 * grown to many concurrent streams. The serving side answers each stream's first byte and holds
 * the stream open; the opening side grows the count on command, so the parent can read the
 * serving process's memory between steps and see whether opening and closing stay O(1).
 *
 * ```sh
 * deno run -A bench/scale/streams_worker.ts --serve          # prints "listening on HOST:PORT"
 * deno run -A bench/scale/streams_worker.ts --connect HOST:PORT
 * ```
 *
 * The opening side takes JSON lines on stdin: `{"op":"open","count":N}` opens streams until N are
 * open, each sending one byte and waiting for it back → `{"ok":true,"ms":…}`;
 * `{"op":"close"}` half-closes every stream and waits until all are gone → `{"ok":true,"ms":…}`.
 * The serving side exits when its stdin closes.
 *
 * @module
 */

import { parseArgs } from "node:util";
import process from "node:process";
import { createInterface } from "node:readline";
import { Session, type Stream } from "../../protocol/mod.ts";
import { connectTcp, listenTcp } from "../../transport/mod.ts";
import { parseHostPort } from "../../util/net/address.ts";

/** Room for the largest step (100,000) with every default but the stream count. */
const CONFIG = { maxStreams: 250_000, acceptBacklog: 4096 };
/** Streams opened without waiting for their echo, per wave. */
const WAVE = 256;

const { values } = parseArgs({
  options: { serve: { type: "boolean" }, connect: { type: "string" } },
});

if (values.serve) {
  const listener = await listenTcp({ hostname: "127.0.0.1", port: 0 }, (transport) => {
    new Session(transport, {
      client: false,
      config: CONFIG,
      onStream(stream) {
        stream.onData = (chunk) => stream.write(chunk);
        stream.onEnd = () => stream.end();
      },
    });
  });
  console.log(`listening on 127.0.0.1:${listener.port}`);
  process.stdin.resume();
  process.stdin.on("end", () => process.exit(0));
} else if (values.connect) {
  const session = new Session(await connectTcp(parseHostPort(values.connect)), {
    client: true,
    config: CONFIG,
  });
  const open: Stream[] = [];
  const one = new Uint8Array([1]);

  /** Opens one stream, sends a byte, resolves when it comes back. */
  const openOne = () =>
    new Promise<void>((resolve, reject) => {
      const stream = session.open();
      stream.onData = () => resolve();
      stream.onClose = (error) => error && reject(error);
      stream.write(one);
      open.push(stream);
    });

  const reply = (value: Record<string, unknown>) => console.log(JSON.stringify(value));
  console.log("connected");
  for await (const line of createInterface({ input: process.stdin })) {
    if (!line.trim()) continue;
    const command = JSON.parse(line) as { op: string; count?: number };
    const started = performance.now();
    try {
      if (command.op === "open") {
        while (open.length < command.count!) {
          const wave = Math.min(WAVE, command.count! - open.length);
          await Promise.all(Array.from({ length: wave }, openOne));
        }
        reply({ ok: true, ms: performance.now() - started });
      } else if (command.op === "close") {
        await Promise.all(open.map((stream) =>
          new Promise<void>((resolve) => {
            stream.onClose = () => resolve();
            stream.end();
          })
        ));
        open.length = 0;
        reply({ ok: true, ms: performance.now() - started });
      } else {
        reply({ ok: false, error: `unknown op ${command.op}` });
      }
    } catch (error) {
      reply({ ok: false, error: (error as Error).message });
    }
  }
  session.close();
  process.exit(0);
} else {
  console.error("usage: streams_worker.ts --serve | --connect HOST:PORT");
  process.exit(2);
}
