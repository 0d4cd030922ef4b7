/**
 * Builds the npm package's `dist/`: every shipped module as ESM JavaScript beside its `.d.ts`, so
 * `tunnelmux/client` imports in Node, in Deno (which will not strip types under node_modules) and
 * in Bun alike, and the `tunnelmux` command runs on plain Node. `npm pack` runs it (prepack).
 *
 *   node_modules/.bin/deno run -A tools/build_package.ts [OUT_DIR]   (default: dist)
 *
 * One output file per source module, not a bundle: the runtime picks its TCP adapter with a
 * dynamic import (transport/tcp.ts) and the CLI loads each command when asked, so Deno never
 * loads node:net and `tunnelmux client` never loads the daemon; a bundle would lose that, and the
 * `.d.ts` files follow the same tree. esbuild strips the types and rewrites each relative `.ts`
 * import to `.js`; the dashboard's text imports are inlined (Node has no text imports); tsc
 * writes the declarations.
 *
 * @module
 */

import { spawnSync } from "node:child_process";
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join, relative, resolve, sep } from "node:path";
import { fileURLToPath } from "node:url";
import * as esbuild from "esbuild";

/** The checkout this tool belongs to. */
const ROOT = fileURLToPath(new URL("..", import.meta.url));

/** The directories whose every module ships (their tests and `_`-prefixed test helpers do not). */
export const SOURCE_DIRS = [
  "cli",
  "client",
  "daemon",
  "protocol",
  "transport",
  "tunnel",
  "util",
  "examples",
];

/** Single modules that ship from directories that otherwise do not. */
export const SOURCE_FILES = ["tools/echo.ts", "tools/echo_check.ts"];

/**
 * Relative imports allowed to be missing from the package: the CLI imports the bench in a
 * `.catch` and says it runs from a checkout.
 */
const OPTIONAL_IMPORTS = new Set(["bench/main.ts"]);

/** Whether `path` (relative to the root, `/`-separated) is a shipped module. */
export function isShippedModule(path: string): boolean {
  const name = path.slice(path.lastIndexOf("/") + 1);
  return name.endsWith(".ts") && !name.endsWith("_test.ts") && !name.startsWith("_") &&
    !name.endsWith(".d.ts");
}

/** Every shipped module under `root`, as `/`-separated paths relative to it, sorted. */
export function shippedModules(root: string = ROOT): string[] {
  const found: string[] = [];
  const walk = (dir: string) => {
    for (const entry of readdirSync(join(root, dir), { withFileTypes: true })) {
      const path = `${dir}/${entry.name}`;
      if (entry.isDirectory()) walk(path);
      else if (isShippedModule(path)) found.push(path);
    }
  };
  for (const dir of SOURCE_DIRS) walk(dir);
  return [...found, ...SOURCE_FILES].sort();
}

/** Rewrites relative `.ts` module specifiers in a declaration file's text to `.js`. */
export function rewriteDeclarationImports(text: string): string {
  return text.replace(
    /(\bfrom\s+|\bimport\s*\(\s*|\bimport\s+)(["'])(\.{1,2}\/[^"']*?)\.ts\2/g,
    (_all, lead: string, quote: string, path: string) => `${lead}${quote}${path}.js${quote}`,
  );
}

/**
 * Builds JavaScript and declarations for every shipped module into `outDir` (emptied first).
 * Throws when a shipped module imports a relative module that does not ship, or tsc fails.
 */
export async function buildPackage(outDir: string, root: string = ROOT): Promise<string[]> {
  const modules = shippedModules(root);
  const shipped = new Set(modules);
  const missing: string[] = [];
  rmSync(outDir, { recursive: true, force: true });
  mkdirSync(outDir, { recursive: true });

  const externals: esbuild.Plugin = {
    name: "one-file-per-module",
    setup(build) {
      build.onResolve({ filter: /.*/ }, (args) => {
        if (args.kind === "entry-point") return undefined;
        const spec = args.path;
        if (!spec.startsWith(".")) return { path: spec, external: true }; // npm and node: modules
        if (!spec.endsWith(".ts")) return undefined; // a text import, inlined
        const target = relative(root, resolve(args.resolveDir, spec)).split(sep).join("/");
        if (!shipped.has(target) && !OPTIONAL_IMPORTS.has(target)) {
          missing.push(`${relative(root, args.importer)} imports ${target}`);
        }
        return { path: spec.replace(/\.ts$/, ".js"), external: true };
      });
    },
  };
  await esbuild.build({
    absWorkingDir: root,
    entryPoints: modules,
    outdir: outDir,
    outbase: root,
    bundle: true,
    format: "esm",
    platform: "neutral",
    target: "node20",
    plugins: [externals],
    logLevel: "warning",
  });
  if (missing.length > 0) {
    throw new Error(`shipped modules import modules that do not ship:\n${missing.join("\n")}`);
  }

  // Declarations. --noCheck: `deno check` is the type check; tsc only writes the shapes. It also
  // writes them for what the modules reach and does not ship (the bench), so it writes elsewhere.
  const declarations = mkdtempSync(join(tmpdir(), "tunnelmux-dts-"));
  const tsc = join(root, "node_modules", "typescript", "bin", "tsc");
  const declared = spawnSync("node", [
    tsc,
    "--declaration",
    "--emitDeclarationOnly",
    "--noCheck",
    "--allowImportingTsExtensions",
    "--skipLibCheck",
    "--strict",
    "--target",
    "es2022",
    "--module",
    "nodenext",
    "--moduleResolution",
    "nodenext",
    "--types",
    "node",
    "--rootDir",
    root,
    "--outDir",
    declarations,
    ...modules.filter((m) => !m.startsWith("examples/")).map((m) => join(root, m)),
  ], { cwd: root, encoding: "utf8" });
  try {
    if (declared.status !== 0) {
      throw new Error(`tsc failed (${declared.status}):\n${declared.stdout}${declared.stderr}`);
    }
    for (const module of modules) {
      const name = module.replace(/\.ts$/, ".d.ts");
      if (!existsSync(join(declarations, name))) continue; // the examples have none
      const text = readFileSync(join(declarations, name), "utf8");
      writeFileSync(join(outDir, name), rewriteDeclarationImports(text));
    }
  } finally {
    rmSync(declarations, { recursive: true, force: true });
  }
  return modules;
}

if (import.meta.main) {
  const out = resolve(Deno.args[0] ?? join(ROOT, "dist"));
  const modules = await buildPackage(out);
  await esbuild.stop();
  console.log(`built ${modules.length} modules into ${relative(Deno.cwd(), out) || "."}`);
}
