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

/** Calls `listener` on each `signal`; it does not keep the process alive on its own. */
export function onHostSignal(signal: HostSignal, listener: () => void): void {
  if (deno) deno.addSignalListener(signal, listener);
  else node().on(signal, listener);
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
  "node:url": typeof import("node:url");
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
