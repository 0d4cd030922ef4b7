/**
 * M1 client worker: one tunnelmux session over native TCP to `memory_server.ts`, stepped through
 * the phases by `bench/memory.ts`:
 *
 * - `echo {count, size}`: that many echo streams (16 at a time), each verified, ended and closed;
 * - `open {count, size}`: that many streams that each echo `size` bytes and then stay open, idle;
 * - `stall {bytes, readFirst}`: one stream the server floods with `bytes`; we read `readFirst` of
 *   them, then `pause()`, and report the stream's buffered bytes and window once they settle;
 * - `resume`: reads the rest of the stalled stream, verified, to its end;
 * - `soak-start {rate, size, stallBytes}` / `soak-stop`: echo streams at a steady rate beside a
 *   stream whose reader never reads;
 * - `mem`: memory after a forced GC.
 *
 * Run by `bench/memory.ts`: `memory_client.ts --connect HOST:PORT`; prints `{"ready":true}`.
 *
 * @module
 */

import process from "node:process";
import { parseArgs } from "node:util";
import { Session, type Stream } from "../../protocol/mod.ts";
import { connectTcp } from "../../transport/mod.ts";
import { parseHostPort } from "../../util/net/address.ts";
import { BLOCK_LENGTH, segment, verify } from "../pattern.ts";
import { snapshot } from "./memory_probe.ts";
import { type Fields, serveCommands } from "./memory_rpc.ts";
import { FLOOD_BASE, floodRequest, M1_SESSION_CONFIG, MODE_ECHO } from "./memory_wire.ts";

const ECHO_HEADER = new Uint8Array([MODE_ECHO]);
/** Echo streams in flight at once (`echo`, `open`, and the soak's cap). */
const IN_FLIGHT = 16;
/** How often the stalled stream's buffer is read while it settles, and for how long at most. */
const SETTLE_POLL_MS = 50;
const SETTLE_LIMIT_MS = 20_000;
/** The buffer counts as settled after this many polls without change. */
const SETTLE_POLLS = 10;

const { values } = parseArgs({
  args: process.argv.slice(2),
  options: { connect: { type: "string" } },
});
if (!values.connect) throw new Error("--connect HOST:PORT is required");
const session = new Session(
  await connectTcp(parseHostPort(values.connect)),
  { client: true, config: M1_SESSION_CONFIG },
);

/** Idle streams kept open (referenced, as an application holding them would). */
const idle: Stream[] = [];
/** Stream offsets into the pattern: distinct per stream, so crossed streams cannot verify. */
let nextBase = 0;

function ignore(): void {}

/** Resolves when `stream` is closed cleanly, rejects if it is reset. */
function closedCleanly(stream: Stream): Promise<void> {
  return new Promise((resolve, reject) => {
    stream.onClose = (error) => error ? reject(error) : resolve();
  });
}

/**
 * Opens an echo stream, sends `size` pattern bytes and resolves once they came back verified; the
 * stream stays open (its data handler then ignores anything else).
 */
function openEcho(size: number): Promise<Stream> {
  const base = (nextBase += 977) % BLOCK_LENGTH;
  const stream = session.open();
  return new Promise((resolve, reject) => {
    let received = 0;
    stream.onClose = (error) => reject(error ?? new Error(`stream closed after ${received} bytes`));
    stream.onData = (chunk) => {
      if (received + chunk.length > size || !verify(base, received, chunk)) {
        stream.reset();
        return reject(new Error(`wrong echo at byte ${received}`));
      }
      received += chunk.length;
      if (received < size) return;
      stream.onData = ignore;
      stream.onClose = null;
      resolve(stream);
    };
    stream.write(ECHO_HEADER);
    for (let sent = 0; sent < size;) {
      const chunk = segment(base, sent, size - sent);
      sent += chunk.length;
      stream.write(chunk);
    }
  });
}

/** One echo stream from open to close. */
async function echoAndClose(size: number): Promise<void> {
  const stream = await openEcho(size);
  const closed = closedCleanly(stream);
  stream.end();
  await closed;
}

/** Runs `count` tasks, `IN_FLIGHT` at a time. */
async function pool(count: number, task: () => Promise<unknown>): Promise<void> {
  let next = 0;
  const worker = async () => {
    while (next++ < count) await task();
  };
  await Promise.all(Array.from({ length: Math.min(IN_FLIGHT, count) }, worker));
}

/** A flood stream we read verified; `pause()` holds it, `resume()` lets it run to its end. */
interface Flood {
  stream: Stream;
  offered: number;
  received: number;
  /** Resolves when all offered bytes arrived verified and the server ended. */
  done: Promise<void>;
}

/** Asks the server to flood a new stream; the reader pauses once `readFirst` bytes arrived. */
function openFlood(offered: number, readFirst: number): Flood {
  const stream = session.open();
  const flood: Flood = { stream, offered, received: 0, done: Promise.resolve() };
  if (readFirst === 0) stream.pause();
  flood.done = new Promise((resolve, reject) => {
    stream.onData = (chunk) => {
      if (!verify(FLOOD_BASE, flood.received, chunk)) {
        stream.reset();
        return reject(new Error(`flood differs at byte ${flood.received}`));
      }
      flood.received += chunk.length;
      if (flood.received >= readFirst && flood.received - chunk.length < readFirst) stream.pause();
    };
    stream.onEnd = () => {
      stream.end();
      if (flood.received === offered) resolve();
      else reject(new Error(`flood ended after ${flood.received} of ${offered} bytes`));
    };
    stream.onClose = (error) => error && reject(error);
  });
  flood.done.catch(ignore); // observed by `resume`; a soak's flood is reset on purpose
  stream.write(floodRequest(offered));
  return flood;
}

/** Waits until the paused stream's buffer stops growing; resolves with the polls it took. */
async function settle(stream: Stream): Promise<number> {
  let last = -1;
  let still = 0;
  const started = performance.now();
  while (still < SETTLE_POLLS && performance.now() - started < SETTLE_LIMIT_MS) {
    await new Promise((resolve) => setTimeout(resolve, SETTLE_POLL_MS));
    if (stream.bufferedBytes === last && last > 0) still++;
    else still = 0;
    last = stream.bufferedBytes;
  }
  if (still < SETTLE_POLLS) throw new Error(`buffer still changing after ${SETTLE_LIMIT_MS} ms`);
  return Math.round(performance.now() - started);
}

let stalled: Flood | undefined;

/** The soak's traffic: echo streams on a timer, one stalled reader. */
const soak = {
  timer: undefined as ReturnType<typeof setInterval> | undefined,
  inFlight: 0,
  completed: 0,
  failed: 0,
  skipped: 0,
  error: undefined as string | undefined,
  flood: undefined as Flood | undefined,
  running: new Set<Promise<void>>(),
};

function soakStream(size: number): void {
  soak.inFlight++;
  const run = echoAndClose(size).then(
    () => void soak.completed++,
    (error: Error) => {
      soak.failed++;
      soak.error ??= error.message;
    },
  ).finally(() => {
    soak.inFlight--;
    soak.running.delete(run);
  });
  soak.running.add(run);
}

const handlers: Record<string, (args: Fields) => Promise<Fields> | Fields> = {
  mem: async () => ({ ...(await snapshot()), streams: session.streamCount }),

  async echo(args) {
    const count = Number(args.count);
    const size = Number(args.size);
    const started = performance.now();
    await pool(count, () => echoAndClose(size));
    return { count, bytes: count * size, ms: Math.round(performance.now() - started) };
  },

  async open(args) {
    const count = Number(args.count);
    const size = Number(args.size);
    const started = performance.now();
    await pool(count, async () => idle.push(await openEcho(size)));
    return { opened: idle.length, ms: Math.round(performance.now() - started) };
  },

  async stall(args) {
    if (stalled) throw new Error("a stalled stream is already open");
    stalled = openFlood(Number(args.bytes), Number(args.readFirst));
    const settleMs = await settle(stalled.stream);
    return {
      offered: stalled.offered,
      readBeforePause: stalled.received,
      bufferedBytes: stalled.stream.bufferedBytes,
      receiveWindow: stalled.stream.receiveWindow,
      paused: stalled.stream.paused,
      settleMs,
    };
  },

  async resume() {
    if (!stalled) throw new Error("no stalled stream");
    const started = performance.now();
    stalled.stream.resume();
    await stalled.done;
    return { delivered: stalled.received, ms: Math.round(performance.now() - started) };
  },

  "soak-start"(args) {
    if (soak.timer) throw new Error("soak already running");
    const rate = Number(args.rate);
    const size = Number(args.size);
    soak.flood = openFlood(Number(args.stallBytes), 0);
    // Ten ticks a second; a tick is skipped rather than piling up when streams fall behind.
    soak.timer = setInterval(() => {
      for (let i = 0; i < rate / 10; i++) {
        if (soak.inFlight >= IN_FLIGHT * 4) {
          soak.skipped++;
          continue;
        }
        soakStream(size);
      }
    }, 100);
    return {};
  },

  async "soak-stop"() {
    clearInterval(soak.timer);
    soak.timer = undefined;
    await Promise.race([
      Promise.allSettled([...soak.running]),
      new Promise((resolve) => setTimeout(resolve, 10_000)),
    ]);
    const flood = soak.flood!;
    const result = {
      completed: soak.completed,
      failed: soak.failed,
      skipped: soak.skipped,
      stillRunning: soak.inFlight,
      stalledBuffered: flood.stream.bufferedBytes,
      stalledWindow: flood.stream.receiveWindow,
      ...(soak.error ? { error: soak.error } : {}),
    };
    flood.stream.reset();
    return result;
  },
};

serveCommands({}, handlers);
