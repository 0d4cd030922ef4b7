/**
 * The command channel between `bench/memory.ts` and its two worker processes, both ends: JSON
 * lines, requests on the worker's stdin, replies on its stdout. The measurement needs the runner
 * to step both processes through phases (open streams, then read memory on both sides, ...),
 * which a worker that runs one scenario and exits cannot do.
 *
 * A worker first prints `{"ready":true,...}`; then each request `{"id":1,"cmd":"mem",...}` gets
 * one reply `{"id":1,"ok":true,...}` or `{"id":1,"ok":false,"error":"..."}`. A worker exits when
 * its stdin closes, so the runner owns its lifetime.
 *
 * @module
 */

import { spawn } from "node:child_process";
import process from "node:process";
import { createInterface } from "node:readline";

/** Fields of a request or a reply. */
export type Fields = Record<string, unknown>;

/** Runs one command in a worker and resolves with the reply's fields. */
export type CommandHandler = (args: Fields) => Promise<Fields> | Fields;

/**
 * Worker side: announces `ready` and answers commands from stdin until it closes, then exits.
 * Handlers may run concurrently (a soak keeps running while its memory is read).
 */
export function serveCommands(ready: Fields, handlers: Record<string, CommandHandler>): void {
  const reply = (fields: Fields) => process.stdout.write(JSON.stringify(fields) + "\n");
  reply({ ready: true, ...ready });
  const lines = createInterface({ input: process.stdin });
  lines.on("line", async (line) => {
    let id: unknown;
    try {
      const { id: requestId, cmd, ...args } = JSON.parse(line) as Fields;
      id = requestId;
      const handler = handlers[String(cmd)];
      if (!handler) throw new Error(`unknown command ${JSON.stringify(cmd)}`);
      reply({ id, ok: true, ...(await handler(args)) });
    } catch (error) {
      reply({ id, ok: false, error: (error as Error)?.message ?? String(error) });
    }
  });
  lines.on("close", () => process.exit(0));
}

/** Runner side: a started worker. */
export interface Peer {
  /** The fields of the worker's ready line (the server's `address`). */
  readonly ready: Fields;
  /** Sends a command; rejects on `ok:false`, on exit, or after `timeoutMs`. */
  request(cmd: string, args?: Fields, timeoutMs?: number): Promise<Fields>;
  /** Closes the worker's stdin and waits for it to exit (SIGKILL after 2 s). */
  stop(): Promise<void>;
}

/** Starts a worker and resolves once it printed its ready line (killed after `readyTimeoutMs`). */
export function spawnPeer(argv: string[], readyTimeoutMs: number): Promise<Peer> {
  const child = spawn(argv[0], argv.slice(1), { stdio: ["pipe", "pipe", "pipe"] });
  let stderr = "";
  let exited = false;
  child.stderr!.setEncoding("utf8").on("data", (d: string) => (stderr = (stderr + d).slice(-4000)));
  const closed = new Promise<void>((resolve) => child.on("close", () => resolve()));
  const waiting = new Map<number, { resolve(f: Fields): void; reject(e: Error): void }>();
  let nextId = 1;
  const why = (what: string) =>
    new Error(`${what}: ${stderr.trim().split("\n").slice(-3).join(" | ")}`);

  return new Promise((resolve, reject) => {
    let ready: Fields | undefined;
    const timer = setTimeout(() => {
      child.kill("SIGKILL");
      reject(why(`worker not ready after ${readyTimeoutMs} ms`));
    }, readyTimeoutMs);
    child.on("error", (error) => {
      clearTimeout(timer);
      reject(error);
    });
    closed.then(() => {
      exited = true;
      clearTimeout(timer);
      if (!ready) reject(why("worker exited before it was ready"));
      for (const pending of waiting.values()) pending.reject(why("worker exited"));
      waiting.clear();
    });
    createInterface({ input: child.stdout! }).on("line", (line) => {
      let fields: Fields;
      try {
        fields = JSON.parse(line);
      } catch {
        return; // not ours: a stray log line
      }
      if (!ready) {
        if (fields.ready !== true) return;
        ready = fields;
        clearTimeout(timer);
        resolve({ ready, request, stop });
        return;
      }
      const pending = waiting.get(Number(fields.id));
      if (!pending) return;
      waiting.delete(Number(fields.id));
      if (fields.ok === true) pending.resolve(fields);
      else pending.reject(new Error(String(fields.error)));
    });
  });

  function request(cmd: string, args: Fields = {}, timeoutMs = 60_000): Promise<Fields> {
    if (exited) return Promise.reject(why("worker exited"));
    const id = nextId++;
    return new Promise<Fields>((resolve, reject) => {
      const timer = setTimeout(() => {
        waiting.delete(id);
        reject(new Error(`${cmd}: no reply after ${timeoutMs} ms`));
      }, timeoutMs);
      waiting.set(id, {
        resolve: (fields) => {
          clearTimeout(timer);
          resolve(fields);
        },
        reject: (error) => {
          clearTimeout(timer);
          reject(new Error(`${cmd}: ${error.message}`));
        },
      });
      child.stdin!.write(JSON.stringify({ id, cmd, ...args }) + "\n");
    });
  }

  async function stop(): Promise<void> {
    child.stdin!.end();
    const kill = setTimeout(() => child.kill("SIGKILL"), 2000);
    await closed;
    clearTimeout(kill);
  }
}
