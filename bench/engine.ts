/**
 * `bench:engine`: the yamux engine alone, tunnelmux beside yamux-js 0.2.0 in one process over an
 * in-memory pair (no sockets, no other process): 1 KiB echo streams opened one at a time (open,
 * write 1 KiB, read the echo, close), the shape of yamux.ts's published comparison. Rounds
 * alternate between the two, so a machine that drifts moves both; the report gives each round's
 * ratio and the median. yamux-js never reports a stream's FIN (its flag check compares against
 * SYN), so a stream's echo is taken as done when its 1 KiB came back, on both sides alike, and
 * each yamux-js stream is closed twice to leave its table.
 *
 * Usage: `deno run -A bench/engine.ts [--streams N] [--rounds N]` (or `bun bench/engine.ts`).
 *
 * @module
 */

import { PassThrough } from "node:stream";
import type { Duplex as NodeDuplex } from "node:stream";
// @ts-types="npm:yamux-js@0.2.0"
import { Client, Server } from "yamux-js";
import { Session } from "../protocol/mod.ts";
import { memoryPair } from "../transport/memory.ts";
import { echoStream } from "../tunnel/echo.ts";
import { parseArgs } from "../util/parse/parse_args.ts";
import { hostArgs } from "../util/host/host.ts";
import { currentRuntime } from "../util/host/runtime.ts";

const PAYLOAD = new Uint8Array(1024).fill(7);

/** Runs `once` 200 times to warm up, then `count` times one after another: runs per second. */
async function streamsPerSecond(once: () => Promise<void>, count: number): Promise<number> {
  for (let i = 0; i < 200; i++) await once();
  const start = performance.now();
  for (let i = 0; i < count; i++) await once();
  return count / ((performance.now() - start) / 1000);
}

/** Streams per second of `count` sequential 1 KiB echo streams over tunnelmux in memory. */
export async function tunnelmuxRate(count: number): Promise<number> {
  const [a, b] = memoryPair();
  const quiet = { enableKeepAlive: false };
  const server = new Session(b, { client: false, config: quiet, onStream: echoStream });
  const client = new Session(a, { client: true, config: quiet });
  const once = () =>
    new Promise<void>((resolve, reject) => {
      const stream = client.open();
      let got = 0;
      stream.onData = (chunk) => {
        got += chunk.length;
        if (got >= PAYLOAD.length) {
          stream.end();
          resolve();
        }
      };
      stream.onClose = (error) => error && reject(error);
      stream.write(PAYLOAD);
    });
  const rate = await streamsPerSecond(once, count);
  client.destroy();
  server.destroy();
  return rate;
}

/** Streams per second of `count` sequential 1 KiB echo streams over yamux-js in memory. */
export async function yamuxJsRate(count: number): Promise<number> {
  // Each side closes its stream twice: yamux-js takes a FIN for nothing, so a stream leaves its
  // session's table only when closed twice locally (else the server refuses new streams past
  // its backlog of 256).
  type YamuxJsStream = NodeDuplex & { close(): void };
  const server = new Server((duplex: NodeDuplex) => {
    const stream = duplex as YamuxJsStream;
    stream.on("data", (chunk: Uint8Array) => {
      stream.write(chunk);
      stream.close();
      stream.close();
    });
  }, { enableKeepAlive: false });
  const client = new Client({ enableKeepAlive: false });
  // Two pass-throughs stand for the wire, as the memory pair does for tunnelmux.
  const up = new PassThrough();
  const down = new PassThrough();
  client.pipe(up).pipe(server);
  server.pipe(down).pipe(client);
  const once = () =>
    new Promise<void>((resolve, reject) => {
      const stream = client.open() as YamuxJsStream;
      let got = 0;
      stream.on("data", (chunk: Uint8Array) => {
        got += chunk.length;
        if (got >= PAYLOAD.length) {
          stream.close();
          stream.close();
          resolve();
        }
      });
      stream.on("error", reject);
      stream.write(PAYLOAD);
    });
  const rate = await streamsPerSecond(once, count);
  client.destroy();
  server.destroy();
  return rate;
}

const median = (xs: number[]) => [...xs].sort((x, y) => x - y)[Math.floor(xs.length / 2)];

if (import.meta.main) {
  const { values } = parseArgs({
    args: hostArgs(),
    options: { streams: { type: "string" }, rounds: { type: "string" } },
  });
  const streams = Number(values.streams ?? 5000);
  const rounds = Number(values.rounds ?? 5);
  const ratios: number[] = [];
  const ours: number[] = [];
  const theirs: number[] = [];
  for (let round = 1; round <= rounds; round++) {
    const t = await tunnelmuxRate(streams);
    const y = await yamuxJsRate(streams);
    ours.push(t);
    theirs.push(y);
    ratios.push(t / y);
    console.log(
      `round ${round}: tunnelmux ${t.toFixed(0)}/s, yamux-js ${y.toFixed(0)}/s, ${
        (t / y).toFixed(2)
      }×`,
    );
  }
  console.log(
    `${currentRuntime()}: 1 KiB sequential echo streams in memory, median of ${rounds}: ` +
      `tunnelmux ${median(ours).toFixed(0)}/s, yamux-js ${median(theirs).toFixed(0)}/s, ` +
      `paired ratio ${median(ratios).toFixed(2)}×`,
  );
}
