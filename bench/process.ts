/**
 * Runs one measurement: a fresh server process, then a fresh client process against it, each
 * bounded in time. Nothing is shared between measurements but the machine.
 *
 * @module
 */

import { spawn } from "node:child_process";

/** What one client run produced. */
export type RunOutcome =
  | { ok: true; line: Record<string, unknown> }
  | { ok: false; error: string; timedOut?: boolean };

/** A started server process. */
interface Server {
  address: string;
  stop(): Promise<void>;
}

function startServer(argv: string[], timeoutMs: number): Promise<Server> {
  return new Promise((resolve, reject) => {
    const child = spawn(argv[0], argv.slice(1), { stdio: ["pipe", "pipe", "pipe"] });
    let out = "";
    let err = "";
    let settled = false;
    const exited = new Promise<void>((done) => child.on("close", () => done()));
    const fail = (why: string) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      child.kill("SIGKILL");
      reject(new Error(`server ${why}: ${err.trim().split("\n").slice(-3).join(" | ")}`));
    };
    const timer = setTimeout(() => fail(`not listening after ${timeoutMs} ms`), timeoutMs);
    child.on("error", (e) => fail(e.message));
    child.on("close", (code) => fail(`exited (${code}) before listening`));
    child.stderr!.setEncoding("utf8").on("data", (d: string) => (err = (err + d).slice(-4000)));
    child.stdout!.setEncoding("utf8").on("data", (d: string) => {
      out += d;
      const m = /listening on (\S+)/.exec(out);
      if (!m || settled) return;
      settled = true;
      clearTimeout(timer);
      resolve({
        address: m[1],
        async stop() {
          // The server exits on stdin EOF; SIGKILL if it does not within 2 s.
          child.stdin!.end();
          const kill = setTimeout(() => child.kill("SIGKILL"), 2000);
          await exited;
          clearTimeout(kill);
        },
      });
    });
  });
}

function runClient(argv: string[], timeoutMs: number): Promise<RunOutcome> {
  return new Promise((resolve) => {
    const child = spawn(argv[0], argv.slice(1), { stdio: ["ignore", "pipe", "pipe"] });
    let out = "";
    let err = "";
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      child.kill("SIGKILL");
    }, timeoutMs);
    child.stdout!.setEncoding("utf8").on("data", (d: string) => (out += d));
    child.stderr!.setEncoding("utf8").on("data", (d: string) => (err = (err + d).slice(-4000)));
    child.on("error", (e) => {
      clearTimeout(timer);
      resolve({ ok: false, error: e.message });
    });
    child.on("close", (code) => {
      clearTimeout(timer);
      const last = out.trim().split("\n").pop() ?? "";
      let line: Record<string, unknown> | undefined;
      try {
        line = JSON.parse(last);
      } catch { /* reported below */ }
      if (timedOut) {
        return resolve({ ok: false, error: `timeout after ${timeoutMs} ms`, timedOut: true });
      }
      if (code === 0 && line?.ok === true) return resolve({ ok: true, line });
      const why = typeof line?.error === "string"
        ? line.error
        : `exit ${code}: ${crashLine(err, last)}`;
      resolve({ ok: false, error: why.slice(0, 300) });
    });
  });
}

/** The most telling line of a crashed worker's stderr: its `error:` line, without colors. */
function crashLine(stderr: string, fallback: string): string {
  // deno-lint-ignore no-control-regex
  const lines = stderr.replace(/\x1b\[[0-9;]*m/g, "").split("\n").map((l) => l.trim());
  return lines.find((l) => /^(error|\w*Error)\b/.test(l)) ?? lines.filter(Boolean).pop() ??
    fallback;
}

/** Starts the server, runs the client against it, stops the server. Never throws. */
export async function measureOnce(
  serverArgv: string[],
  clientArgv: (address: string) => Promise<string[]>,
  timeoutMs: number,
): Promise<RunOutcome> {
  let server: Server;
  try {
    server = await startServer(serverArgv, 30_000);
  } catch (error) {
    return { ok: false, error: (error as Error).message.slice(0, 300) };
  }
  try {
    return await runClient(await clientArgv(server.address), timeoutMs);
  } catch (error) {
    return { ok: false, error: (error as Error).message.slice(0, 300) };
  } finally {
    await server.stop();
  }
}
