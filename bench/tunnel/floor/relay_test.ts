/**
 * The floor relays (`relay_deno.ts`, `relay_bun.ts`) on each runtime found in node_modules/.bin:
 * two chained relays between a visitor and a backend carry a few hundred KiB each way and a
 * half-close in each direction, every byte checked; a relay exits once its stdin closes or on
 * SIGTERM; and the tunnel suite lists them.
 */

import { type ChildProcess, spawn } from "node:child_process";
import { Buffer } from "node:buffer";
import { existsSync } from "node:fs";
import { connect, createServer, type Server, type Socket } from "node:net";
import { join } from "node:path";
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { ROOT } from "../../../testing/mod.ts";
import { tunnelImpls } from "../impls.ts";

const RUNTIMES = (["deno", "bun"] as const).filter((r) =>
  existsSync(join(ROOT, "node_modules", ".bin", r))
);
const BOUND_MS = 20_000;

/** A relay process and the address it listens on. */
interface Relay {
  child: ChildProcess;
  address: string;
  exited: Promise<number | null>;
}

/** Starts `runtime`'s relay from a free port to `target`; resolves with its address. */
function startRelay(runtime: "deno" | "bun", target: string): Promise<Relay> {
  const bin = join(ROOT, "node_modules", ".bin", runtime);
  const file = join(ROOT, "bench", "tunnel", "floor", `relay_${runtime}.ts`);
  const args = runtime === "deno" ? ["run", "-A", file] : [file];
  const child = spawn(bin, [...args, "127.0.0.1:0", target], { stdio: ["pipe", "pipe", "pipe"] });
  const exited = new Promise<number | null>((done) => child.on("close", (code) => done(code)));
  return new Promise((resolve, reject) => {
    let out = "";
    const timer = setTimeout(() => {
      child.kill("SIGKILL");
      reject(new Error(`${runtime} relay not ready: ${out}`));
    }, BOUND_MS);
    const onData = (data: string) => {
      out += data;
      const ready = /relay on (\S+) -> /.exec(out);
      if (!ready) return;
      clearTimeout(timer);
      resolve({ child, address: ready[1], exited });
    };
    child.stdout!.setEncoding("utf8").on("data", onData);
    child.stderr!.setEncoding("utf8").on("data", onData);
    void exited.then((code) => reject(new Error(`${runtime} relay exited (${code}): ${out}`)));
  });
}

/** A pattern of `n` bytes that no shift of itself matches. */
function pattern(n: number, seed: number): Uint8Array {
  const bytes = new Uint8Array(n);
  for (let i = 0; i < n; i++) bytes[i] = (i * 31 + seed + (i >> 8)) & 0xff;
  return bytes;
}

/**
 * A backend that reads until the visitor's FIN, then sends back what it got followed by
 * `extra` and its own FIN: the answer crosses the relays only if the half-close left the way
 * back open.
 */
function backend(extra: Uint8Array): Promise<Server> {
  const server = createServer({ allowHalfOpen: true }, (socket: Socket) => {
    const got: Uint8Array[] = [];
    socket.on("error", () => {}); // a broken relay shows as the visitor's wrong answer
    socket.on("data", (chunk: Uint8Array) => got.push(chunk));
    socket.on("end", () => {
      for (const chunk of got) socket.write(chunk);
      socket.end(extra);
    });
  });
  return new Promise((resolve) => server.listen(0, "127.0.0.1", () => resolve(server)));
}

/** Sends `data` then FIN to `address`; resolves with all it read until the other side's FIN. */
function visit(address: string, data: Uint8Array): Promise<Uint8Array> {
  const colon = address.lastIndexOf(":");
  return new Promise((resolve, reject) => {
    const socket = connect({
      host: address.slice(0, colon),
      port: Number(address.slice(colon + 1)),
      allowHalfOpen: true,
    });
    const got: Uint8Array[] = [];
    socket.on("connect", () => socket.end(data));
    socket.on("data", (chunk: Uint8Array) => got.push(chunk));
    socket.on("end", () => {
      socket.destroy();
      resolve(new Uint8Array(Buffer.concat(got)));
    });
    socket.on("error", reject);
  });
}

function bounded<T>(promise: Promise<T>, what: string): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: not done in ${BOUND_MS} ms`)), BOUND_MS);
  });
  return Promise.race([promise, late]).finally(() => clearTimeout(timer));
}

describe("floor relays", () => {
  it("are the tunnel suite's jsrelay rows, in quick runs too, both picked by `jsrelay`", () => {
    const ids = tunnelImpls(["deno", "bun"], undefined, false).map((impl) => impl.id);
    assert.deepEqual(ids.filter((id) => id.startsWith("jsrelay")), ["jsrelay-deno", "jsrelay-bun"]);
  });

  for (const runtime of RUNTIMES) {
    it(`two chained ${runtime} relays carry every byte and the half-close`, async () => {
      const extra = pattern(200 * 1024, 7);
      const server = await backend(extra);
      const { port } = server.address() as { port: number };
      const relays: Relay[] = [];
      try {
        relays.push(await startRelay(runtime, `127.0.0.1:${port}`));
        relays.push(await startRelay(runtime, relays[0].address));
        const sent = pattern(300 * 1024, 3);
        // Two visitors at once, so the relays keep their connections apart.
        const answers = await bounded(
          Promise.all([visit(relays[1].address, sent), visit(relays[1].address, sent)]),
          "the visits",
        );
        const expected = new Uint8Array(sent.length + extra.length);
        expected.set(sent);
        expected.set(extra, sent.length);
        for (const answer of answers) {
          assert.equal(answer.length, expected.length);
          assert.ok(Buffer.from(answer).equals(Buffer.from(expected)), "the bytes differ");
        }
        // A relay exits once its stdin closes, or on SIGTERM.
        relays[0].child.stdin!.end();
        relays[1].child.kill("SIGTERM");
        const codes = await bounded(Promise.all(relays.map((r) => r.exited)), "the exits");
        // Only the first code: Deno's node:child_process reports any child it signalled as
        // killed by the signal, whatever the child's exit code.
        assert.equal(codes[0], 0);
      } finally {
        for (const relay of relays) relay.child.kill("SIGKILL");
        await new Promise((done) => server.close(done));
      }
    });
  }
});
