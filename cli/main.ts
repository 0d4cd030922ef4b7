/**
 * `tunnelmux`: the one command. It only dispatches: each subcommand is its own module, loaded when
 * it is asked for (so `tunnelmux client` never loads the daemon, nor the daemon NATS).
 *
 * ```sh
 * tunnelmux daemon --help
 * tunnelmux token
 * ```
 *
 * @module
 */

import { concat } from "../util/bytes/bytes.ts";
import { exitHost, hostArgs, isMainModule, watchLauncher } from "../util/host/host.ts";
import { runtimeVersion } from "../util/host/runtime.ts";
import { VERSION } from "../util/host/version.ts";

/** The top-level help. */
export const HELP =
  `tunnelmux ${VERSION}: a multiplexed tunnel daemon (Deno, Bun) and client (Deno, Bun, Node)

Usage:
  tunnelmux COMMAND [options]

Commands:
  daemon        run the daemon (embedded defaults: tunnels on 127.0.0.1:7000 over TCP and
                ws://127.0.0.1:7080/tunnel, the admin API on 127.0.0.1:7081)
  client        connect to a daemon: expose local services, forward (also as a SOCKS5 proxy),
                offer and use services
  check         validate the daemon's configuration and report every error (daemon check)
  healthcheck   exit 0 if the daemon's admin API is ready (daemon healthcheck)
  token         print a new client token and the "sha256:…" form the daemon's config takes;
                "token hash" reads a token on stdin and prints its form
  hash-password read a password on stdin and print its "scrypt:…" hash, for a basic-auth user
                of an HTTP tunnel (--basic-auth USER:scrypt:…, or httpPolicy in a config)
  echo          a plain yamux echo peer, for interop and benchmarks
  bench         the benchmark suites (tunnelmux beside raw TCP and other tunnels)
  version       print the version and the runtime

Each command has its own --help: tunnelmux daemon --help.`;

/** Reads all of stdin as text (`node:process` is loaded only here, off the start path). */
async function readStdin(): Promise<string> {
  const { default: process } = await import("node:process");
  const chunks: Uint8Array[] = [];
  for await (const chunk of process.stdin) chunks.push(chunk as Uint8Array);
  return new TextDecoder().decode(concat(chunks));
}

/** `tunnelmux token [hash]`. */
async function token(args: string[]): Promise<number> {
  const { generateToken, hashToken } = await import("../daemon/config/token_hash.ts");
  if (args[0] === "-h" || args[0] === "--help") {
    console.log(`tunnelmux token: make a client token

Usage:
  tunnelmux token         a new token (256 random bits) and its "sha256:…" form
  tunnelmux token hash    the "sha256:…" form of the token given on stdin

Give the token to the client (TUNNELMUX_TOKEN, or a secret file) and put the sha256 form in the
daemon's config ("token": "sha256:…"): the daemon never needs the token itself.`);
    return 0;
  }
  if (args[0] === "hash" && args.length === 1) {
    const secret = (await readStdin()).trim();
    if (secret === "") {
      console.error("tunnelmux token hash: no token on stdin");
      return 2;
    }
    console.log(hashToken(secret));
    return 0;
  }
  if (args.length > 0) {
    console.error(`tunnelmux token: unexpected "${args[0]}" (see tunnelmux token --help)`);
    return 2;
  }
  const secret = generateToken();
  console.log(`token   ${secret}`);
  console.log(`config  ${hashToken(secret)}`);
  return 0;
}

/** `tunnelmux hash-password`. */
async function hashPasswordCommand(args: string[]): Promise<number> {
  if (args[0] === "-h" || args[0] === "--help") {
    console.log(`tunnelmux hash-password: hash a password for an HTTP tunnel's basic auth

Usage:
  tunnelmux hash-password < file     the "scrypt:…" hash of the password on stdin

Give it as --basic-auth USER:scrypt:… or in a client config's basicAuth list
("USER:scrypt:…"): the client sends only the hash, and the daemon keeps only the hash.`);
    return 0;
  }
  if (args.length > 0) {
    console.error(`tunnelmux hash-password: unexpected "${args[0]}" (see --help)`);
    return 2;
  }
  // One line: a trailing newline (echo, a heredoc) is not part of the password.
  const password = (await readStdin()).replace(/\r?\n$/, "");
  if (password === "") {
    console.error("tunnelmux hash-password: no password on stdin");
    return 2;
  }
  const { hashPassword } = await import("../tunnel/policy/password_hash.ts");
  console.log(await hashPassword(password));
  return 0;
}

/**
 * Runs `tunnelmux` with `args` (the words after the command name) and resolves with the exit
 * code, once the command is over (the daemon and a client when they stop), or with undefined when
 * the process should end by itself (an echo server runs until a signal; the bench sets
 * `process.exitCode` and lets its output drain).
 */
export async function main(args: string[]): Promise<number | undefined> {
  const [command, ...rest] = args;
  switch (command) {
    case undefined:
      console.error(HELP);
      return 2;
    case "help":
    case "-h":
    case "--help":
      console.log(HELP);
      return 0;
    case "version":
    case "--version":
    case "-V": {
      const runtime = runtimeVersion();
      console.log(`tunnelmux ${VERSION} (${runtime.name} ${runtime.version})`);
      return 0;
    }
    case "daemon":
      return await (await import("../daemon/main.ts")).main(rest);
    case "check":
    case "healthcheck":
      return await (await import("../daemon/main.ts")).main([command, ...rest]);
    case "client":
      return await (await import("../client/main.ts")).main(rest);
    case "token":
      return await token(rest);
    case "hash-password":
      return await hashPasswordCommand(rest);
    case "echo":
      // The daemon and the client watch their launcher themselves; these two end with it (and
      // so take its pid out of the environment their own children would inherit).
      watchLauncher(() => exitHost(1));
      await (await import("../tools/echo.ts")).main(rest);
      return undefined;
    case "bench": {
      watchLauncher(() => exitHost(1));
      // The bench (its Go load generator, its peers) is in a checkout, not in the package.
      const bench = await import("../bench/main.ts").catch(() => undefined);
      if (!bench) {
        console.error(
          "tunnelmux bench: the bench runs from a checkout of tunnelmux, not a package",
        );
        return 2;
      }
      const { default: process } = await import("node:process");
      process.exitCode = await bench.main(rest);
      return undefined;
    }
    default:
      console.error(`tunnelmux: unknown command "${command}"\n\n${HELP}`);
      return 2;
  }
}

/**
 * Runs the command line `args` and ends the process as the command says: with its code once the
 * daemon or a client stopped; by itself for an echo server or the bench.
 */
export async function run(args: string[]): Promise<void> {
  try {
    const code = await main(args);
    // The daemon or a client that resolved has stopped: exit, whatever handles are left.
    if (code !== undefined) exitHost(code);
  } catch (error) {
    console.error(`tunnelmux: ${(error as Error).message}`);
    exitHost(1);
  }
}

// isMainModule, not import.meta.main: Node 20 runs the package's dist/cli/main.js too.
if (isMainModule(import.meta)) await run(hostArgs());
