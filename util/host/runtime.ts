/**
 * Which JavaScript runtime this process runs on: the repository's one runtime detector. Decided
 * on first use and kept.
 *
 * @example
 * ```ts
 * import { currentRuntime } from "./runtime.ts";
 * console.assert(["deno", "bun", "node"].includes(currentRuntime()));
 * ```
 *
 * @module
 */

/** A runtime tunnelmux runs on. */
export type RuntimeName = "deno" | "bun" | "node";

let detected: RuntimeName | undefined;

/**
 * The runtime of this process. Bun also defines a node-style `process` but never `Deno`, and Deno
 * never defines `Bun`; anything else is taken for Node.
 */
export function currentRuntime(): RuntimeName {
  detected ??= "Deno" in globalThis ? "deno" : "Bun" in globalThis ? "bun" : "node";
  return detected;
}

/**
 * The runtime of this process and its version (`deno 2.9.6`, `bun 1.4.4`), read from the runtime's
 * own global: on Deno, `process.versions` would load the Node compatibility layer.
 */
export function runtimeVersion(): { name: RuntimeName; version: string } {
  const name = currentRuntime();
  const g = globalThis as {
    Deno?: { version: { deno: string } };
    Bun?: { version: string };
    process?: { versions?: { node?: string } };
  };
  const version = name === "deno"
    ? g.Deno!.version.deno
    : name === "bun"
    ? g.Bun!.version
    : g.process?.versions?.node ?? "unknown";
  return { name, version };
}

/**
 * Reads an environment variable without side effects on any runtime: undefined when it is unset
 * or, on Deno, when reading it was not granted (asking first, since reading an ungranted variable
 * would prompt on a terminal or throw).
 */
export function readEnv(name: string): string | undefined {
  try {
    const deno = (globalThis as { Deno?: typeof Deno }).Deno;
    if (deno) {
      const state = deno.permissions.querySync({ name: "env", variable: name }).state;
      return state === "granted" ? deno.env.get(name) : undefined;
    }
    const proc = (globalThis as { process?: { env: Record<string, string | undefined> } }).process;
    return proc?.env[name];
  } catch {
    return undefined;
  }
}
