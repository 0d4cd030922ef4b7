/**
 * The host process (arguments, environment, signals, exit, stderr, working directory) without
 * `node:process` on Deno. Importing `node:process`, or touching the `process` global, makes Deno
 * load its Node compatibility layer: about 12 ms of every start of the daemon and of the client,
 * paid before the first tunnel opens (the start target is 100 ms for both). On Bun and
 * Node the `process` global costs nothing and is used directly.
 *
 * @example
 * ```ts
 * import { hostArgs, hostEnv } from "./host.ts";
 * console.assert(Array.isArray(hostArgs()));
 * console.assert(typeof hostEnv() === "object");
 * ```
 *
 * @module
 */

/** The part of Node's `process` this module uses on Bun and Node. */
interface NodeProcess {
  argv: string[];
  env: Record<string, string | undefined>;
  exit(code?: number): never;
  on(signal: string, listener: () => void): void;
  cwd(): string;
  stderr: { isTTY?: boolean; write(text: string): boolean };
}

/** A signal the daemon and the client handle. */
export type HostSignal = "SIGINT" | "SIGTERM" | "SIGHUP";

const deno = (globalThis as { Deno?: typeof Deno }).Deno;

function node(): NodeProcess {
  return (globalThis as unknown as { process: NodeProcess }).process;
}

/** The command-line arguments after the script, as `process.argv.slice(2)` gives them. */
export function hostArgs(): string[] {
  return deno ? [...deno.args] : node().argv.slice(2);
}

/**
 * The environment as a plain object. On Deno without `--allow-env` it is empty rather than an
 * error: every setting that could come from it has a default or a flag.
 */
export function hostEnv(): Record<string, string | undefined> {
  if (!deno) return node().env;
  try {
    return deno.env.toObject();
  } catch {
    return {};
  }
}

/** Ends the process with `code`. */
export function exitHost(code: number): never {
  return deno ? deno.exit(code) : node().exit(code);
}

/**
 * Repeats of one stop signal closer together than this are one delivery. Ctrl-C in a terminal sends
 * SIGINT to every process of the foreground group, and a launcher in it (npm, the Node wrapper of
 * bin/tunnelmux.mjs) passes its own copy on as well: the program gets two or three within a few
 * milliseconds for one key press. A deliberate second Ctrl-C comes later than this.
 */
export const SIGNAL_REPEAT_MS = 200;

/**
 * Calls `listener` on each `signal`, except for a SIGINT or SIGTERM within
 * {@linkcode SIGNAL_REPEAT_MS} of the last one it was called for (a second stop signal means
 * "stop now"); every SIGHUP is passed, since a reload is idempotent and a dropped one could miss
 * an edit of the config. It does not keep the process alive on its own.
 */
export function onHostSignal(signal: HostSignal, listener: () => void): void {
  let last = -Infinity;
  const once = () => {
    const now = performance.now();
    if (signal !== "SIGHUP" && now - last < SIGNAL_REPEAT_MS) return;
    last = now;
    listener();
  };
  if (deno) deno.addSignalListener(signal, once);
  else node().on(signal, once);
}

/**
 * The variable through which a launcher (npm's start script, bin/tunnelmux.mjs) gives the program
 * its own pid: the program then stops when that process is gone.
 */
export const LAUNCHER_PID_ENV = "TUNNELMUX_LAUNCHER_PID";

/** How often the program looks whether its launcher is still its parent. */
export const LAUNCHER_POLL_MS = 250;

/**
 * Calls `gone` once when the launcher named by {@linkcode LAUNCHER_PID_ENV} is no longer this
 * process's parent (it died: SIGKILL, or npm ended by a SIGHUP it does not pass on), so the
 * program does not stay behind, listening, under init; does nothing when no launcher is named (a
 * program started in the background on purpose keeps running when its shell exits). The variable
 * is removed, so the program's own children do not inherit it.
 */
export function watchLauncher(gone: () => void): void {
  const env = hostEnv();
  const value = env[LAUNCHER_PID_ENV];
  if (value === undefined) return;
  try {
    if (deno) deno.env.delete(LAUNCHER_PID_ENV);
    else delete node().env[LAUNCHER_PID_ENV];
  } catch { /* without --allow-env the variable could not have been read either */ }
  const launcher = Number(value);
  if (!Number.isInteger(launcher) || launcher <= 0) return;
  const parent = () => deno ? deno.ppid : (node() as unknown as { ppid: number }).ppid;
  const check = () => {
    if (parent() === launcher) return false;
    clearInterval(timer);
    gone();
    return true;
  };
  const timer = setInterval(check, LAUNCHER_POLL_MS);
  if (deno) deno.unrefTimer(timer);
  else (timer as unknown as { unref(): void }).unref();
  check();
}

/** The working directory. */
export function hostCwd(): string {
  return deno ? deno.cwd() : node().cwd();
}

/** Whether stderr is a terminal (pretty logs by default). */
export function stderrIsTerminal(): boolean {
  return deno ? deno.stderr.isTerminal() : node().stderr.isTTY === true;
}

const encoder = new TextEncoder();

/**
 * Writes `text` to stderr whole before returning (a log line must not interleave with the next
 * or be lost at exit).
 */
export function writeStderr(text: string): void {
  if (!deno) {
    node().stderr.write(text);
    return;
  }
  let bytes = encoder.encode(text);
  while (bytes.length > 0) bytes = bytes.subarray(deno.stderr.writeSync(bytes));
}

/** The Node built-in modules reached through {@linkcode nodeBuiltin}. */
interface NodeBuiltins {
  "node:crypto": typeof import("node:crypto");
  "node:fs": typeof import("node:fs");
  "node:net": typeof import("node:net");
  "node:os": typeof import("node:os");
  "node:path": typeof import("node:path");
  "node:url": typeof import("node:url");
  "node:v8": typeof import("node:v8");
  "node:vm": typeof import("node:vm");
}

/**
 * A Node built-in module, loaded synchronously when first asked for (`process.getBuiltinModule`):
 * for code off the start path (certificates, a WebSocket handshake, a config file), so that on
 * Deno the compatibility layer loads only when that code runs.
 */
export function nodeBuiltin<K extends keyof NodeBuiltins>(name: K): NodeBuiltins[K] {
  const proc = (globalThis as unknown as { process: { getBuiltinModule(n: string): unknown } })
    .process;
  return proc.getBuiltinModule(name) as NodeBuiltins[K];
}

/**
 * Whether the module whose `import.meta` is `meta` is the program this process was started with:
 * `import.meta.main` where the runtime has it (Deno, Bun, Node from 24.2), else, on older Node
 * running the package's built JavaScript, whether `process.argv[1]` is that module's file.
 */
export function isMainModule(meta: ImportMeta): boolean {
  const main = (meta as { main?: boolean }).main;
  if (main !== undefined) return main;
  const script = node().argv[1];
  if (!script) return false;
  try {
    const real = nodeBuiltin("node:fs").realpathSync(script);
    return nodeBuiltin("node:url").pathToFileURL(real).href === meta.url;
  } catch {
    return false;
  }
}

/**
 * A file's text as UTF-8 (Deno's own API on Deno, `node:fs` elsewhere). A failure carries Node's
 * `code` on every runtime (`ENOENT` for a missing file).
 */
export function readHostTextFile(path: string): Promise<string> {
  return deno ? deno.readTextFile(path) : nodeBuiltin("node:fs").promises.readFile(path, "utf8");
}

/** This machine's host name. */
export function hostName(): string {
  return deno ? deno.hostname() : nodeBuiltin("node:os").hostname();
}

/** `dir` and `name` joined with the platform's separator, as `node:path`'s `join` would. */
export function joinHostPath(dir: string, name: string): string {
  if (!deno) return nodeBuiltin("node:path").join(dir, name);
  const separator = deno.build.os === "windows" ? "\\" : "/";
  if (dir === "") return name;
  return /[\\/]$/.test(dir) ? dir + name : dir + separator + name;
}

/**
 * Loads the runtime's timer machinery now. On Deno a process's first `setTimeout` loads part of
 * its Node layer (about 10 ms on a small VM); the daemon calls this once its listeners are up, in
 * the idle moment before the first client arrives, so that load does not fall into that client's
 * handshake. Elsewhere it costs one empty timer.
 */
export function warmTimers(): void {
  clearTimeout(setTimeout(() => {}, 0));
}
