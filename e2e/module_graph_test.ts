// The module graph as Deno resolves it (`deno info --json`): what loads at start, and the floors.
// The start path of the daemon, of the client and of the one `tunnelmux` command (which is also
// the single binary's entry) must not load the admin API (hono), the client's request inspector,
// the cluster (NATS), the bench, an npm package or any `node:` module (on Deno the first `node:`
// import makes every start pay about 40 ms for Node's compatibility layer; util/host/host.ts and
// small util/ modules stand in, and code off the start path loads `node:` modules where it runs),
// and a folder never imports one above it (util → protocol → transport → tunnel → daemon / client
// → cli; daemon/ and client/ do not import each other; inside util/, host ← bytes ← crypto ←
// files).
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { ROOT, runCommand } from "../testing/mod.ts";

const DENO = join(ROOT, "node_modules/.bin/deno");
const ROOT_URL = pathToFileURL(ROOT).href.replace(/\/?$/, "/");

interface Dependency {
  /** Present for a value import; a type-only import has only `type`. */
  code?: { specifier: string };
  isDynamic?: boolean;
}

interface Graph {
  modules: { specifier: string; dependencies?: Dependency[] }[];
}

/** `deno info --json` of `entry` (a path from the repository root). */
async function graphOf(entry: string): Promise<Graph> {
  const { code, stdout, stderr } = await runCommand(DENO, ["info", "--json", join(ROOT, entry)], {
    cwd: ROOT,
    timeoutMs: 60_000,
  });
  assert.equal(code, 0, stderr);
  return JSON.parse(stdout) as Graph;
}

/** A project file as a path from the root, or the specifier as it is (`node:…`, `npm:…`). */
function name(specifier: string): string {
  return specifier.startsWith(ROOT_URL) ? specifier.slice(ROOT_URL.length) : specifier;
}

/** What `entry` loads before its first line runs: its static imports, transitively. */
function startPath(graph: Graph, entry: string): Set<string> {
  const edges = new Map(graph.modules.map((m) => [
    name(m.specifier),
    (m.dependencies ?? []).filter((d) => d.code && !d.isDynamic).map((d) =>
      name(d.code!.specifier)
    ),
  ]));
  const seen = new Set<string>();
  const visit = (module: string) => {
    if (seen.has(module)) return;
    seen.add(module);
    for (const next of edges.get(module) ?? []) visit(next);
  };
  visit(entry);
  return seen;
}

const FLOOR: Record<string, number> = {
  util: 0,
  protocol: 1,
  transport: 2,
  tunnel: 3,
  daemon: 4,
  client: 4,
  cli: 5,
};

/**
 * util/'s sub-folders by floor: a folder imports only from lower ones; those on the same floor
 * import nothing of each other. A module at util/'s root (log, lifecycle) imports none of them.
 */
const UTIL_FLOOR: Record<string, number> = {
  host: 0,
  net: 0,
  parse: 0,
  timing: 0,
  bytes: 1,
  crypto: 2,
  files: 3,
};

/** The util/ sub-folder a module lies in (`""` for util/'s root), or undefined outside util/. */
function utilFolder(module: string): string | undefined {
  const parts = module.split("/");
  if (parts[0] !== "util") return undefined;
  return parts.length > 2 ? parts[1] : "";
}

/**
 * The single binary's entry: the `.ts` file that deno.json's `compile` task builds, so that a
 * change of entry there is followed here.
 */
function compiledEntry(): string {
  const tasks = JSON.parse(readFileSync(join(ROOT, "deno.json"), "utf8")).tasks;
  const entry = String(tasks.compile).split(/\s+/).find((word) => word.endsWith(".ts"));
  assert.ok(entry, `deno.json's compile task names no .ts entry: ${tasks.compile}`);
  return entry;
}

/**
 * Every import in the graphs of the shipped entries, as `[from, to]` module names, each pair once.
 */
async function importsOfEntries(): Promise<[string, string][]> {
  const pairs = new Map<string, [string, string]>();
  for (const entry of ["cli/main.ts", "daemon/main.ts", "client/main.ts", "client/mod.ts"]) {
    for (const module of (await graphOf(entry)).modules) {
      const from = name(module.specifier);
      for (const dependency of module.dependencies ?? []) {
        if (!dependency.code) continue;
        const to = name(dependency.code.specifier);
        pairs.set(`${from} -> ${to}`, [from, to]);
      }
    }
  }
  return [...pairs.values()];
}

describe("module graph", () => {
  const entries = [
    ...new Set(["daemon/main.ts", "client/main.ts", "cli/main.ts", compiledEntry()]),
  ];
  for (const entry of entries) {
    it(`${entry} starts without node: modules, npm packages, the admin API, the inspector, the cluster or the bench`, async () => {
      const loaded = [...startPath(await graphOf(entry), entry)];
      assert.ok(loaded.some((m) => m.startsWith("util/")), "the walk follows imports");
      const unwanted = loaded.filter((m) =>
        m.startsWith("node:") || m.startsWith("npm:") || m.includes("node_modules/") ||
        m.startsWith("daemon/admin/") || m.startsWith("daemon/cluster/") ||
        m.startsWith("bench/") ||
        // The transports' barrel brings the WebSocket code, which loads when a ws:// URL or a
        // WebSocket listener asks for it.
        m === "transport/mod.ts" ||
        // The request inspector loads only when asked for (--inspect).
        m.startsWith("client/inspector/")
      );
      assert.deepEqual(unwanted, []);
    });
  }

  it("util/'s sub-folders import only the ones below them", async () => {
    const wrong = (await importsOfEntries()).filter(([from, to]) => {
      const fromFolder = utilFolder(from);
      const toFolder = utilFolder(to);
      if (fromFolder === undefined || toFolder === undefined || fromFolder === toFolder) {
        return false;
      }
      return !(UTIL_FLOOR[toFolder] < UTIL_FLOOR[fromFolder]);
    });
    assert.deepEqual(wrong.map(([from, to]) => `${from} -> ${to}`), []);
  });

  it("no folder imports one above it, and daemon/ and client/ do not import each other", async () => {
    const wrong = (await importsOfEntries()).filter(([from, to]) => {
      const fromFolder = from.split("/")[0];
      const toFolder = to.split("/")[0];
      if (!(fromFolder in FLOOR) || !(toFolder in FLOOR) || fromFolder === toFolder) return false;
      return FLOOR[toFolder] >= FLOOR[fromFolder];
    });
    assert.deepEqual(wrong.map(([from, to]) => `${from} -> ${to}`), []);
  });
});
