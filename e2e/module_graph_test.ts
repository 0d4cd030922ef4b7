// The module graph as Deno resolves it (`deno info --json`): what loads at start, and the floors.
// The start path of the daemon and of the client must not load the admin API, the cluster, the
// bench or `node:process` (on Deno the last makes every start pay for Node's compatibility layer;
// util/host.ts stands in), and a folder never imports one above it
// (util → protocol → transport → tunnel → daemon / client, which do not import each other).
import { describe, it } from "node:test";
import assert from "node:assert/strict";
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
};

describe("module graph", () => {
  for (const entry of ["daemon/main.ts", "client/main.ts"]) {
    it(`${entry} starts without node:process, the admin API, the cluster, NATS or the bench`, async () => {
      const loaded = [...startPath(await graphOf(entry), entry)];
      assert.ok(loaded.includes("protocol/session.ts"), "the walk follows imports");
      const unwanted = loaded.filter((m) =>
        m === "node:process" || m.startsWith("daemon/admin/") ||
        m.startsWith("daemon/cluster/") || m.startsWith("bench/") ||
        /^npm:(hono|@nats-io|acme-client)/.test(m)
      );
      assert.deepEqual(unwanted, []);
    });
  }

  it("no folder imports one above it, and daemon/ and client/ do not import each other", async () => {
    const wrong: string[] = [];
    for (const entry of ["daemon/main.ts", "client/main.ts", "client/mod.ts"]) {
      for (const module of (await graphOf(entry)).modules) {
        const from = name(module.specifier);
        const fromFolder = from.split("/")[0];
        for (const dependency of module.dependencies ?? []) {
          if (!dependency.code) continue;
          const to = name(dependency.code.specifier);
          const toFolder = to.split("/")[0];
          if (!(fromFolder in FLOOR) || !(toFolder in FLOOR) || fromFolder === toFolder) continue;
          if (FLOOR[toFolder] >= FLOOR[fromFolder]) wrong.push(`${from} -> ${to}`);
        }
      }
    }
    assert.deepEqual([...new Set(wrong)], []);
  });
});
