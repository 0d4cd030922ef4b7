// What the packages ship: the JSR package (deno.json: the client SDK at its root,
// the engine, transports and tunnel protocol as subpaths) passes `deno publish --dry-run` and
// `deno doc --lint` and ships no tests, Go sources or results. The npm package (built JavaScript,
// packed and installed): e2e/package_test.ts.
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { ROOT, runCommand } from "../testing/mod.ts";

const DENO = join(ROOT, "node_modules", ".bin", "deno");
const deno = JSON.parse(readFileSync(join(ROOT, "deno.json"), "utf8"));

/** Paths no package may ship: tests, test support, Go sources, results, bench and e2e. */
const NOT_SHIPPED =
  /(_test\.ts|\/_[^/]*\.ts|\.go|docs\/results|^bench\/|^e2e\/|^testing\/)$|^(bench|e2e|testing|chaos|interop)\//;

describe("packages", () => {
  it("JSR: the root export is the client SDK; deno doc --lint is clean on every export", async () => {
    assert.equal(deno.exports["."], "./client/mod.ts");
    const exports = [...new Set(Object.values(deno.exports) as string[])];
    const lint = await runCommand(DENO, ["doc", "--lint", ...exports], { timeoutMs: 120_000 });
    assert.equal(lint.code, 0, lint.stdout + lint.stderr);
  });

  it("JSR: deno publish --dry-run passes and ships none of the tests, Go sources or results", async () => {
    const dry = await runCommand(DENO, ["publish", "--dry-run", "--allow-dirty"], {
      timeoutMs: 180_000,
      env: { ...process.env, NO_COLOR: "1" } as Record<string, string>,
    });
    const output = dry.stdout + dry.stderr;
    assert.equal(dry.code, 0, output);
    assert.match(output, /Dry run complete/);
    const files = [...output.matchAll(/file:\/\/\/\S+/g)].map((m) =>
      m[0].slice(`file://${ROOT}`.length).replace(/^\//, "")
    );
    assert.ok(files.includes("client/mod.ts"), "the SDK ships");
    const wrong = files.filter((f) => NOT_SHIPPED.test(f));
    assert.deepEqual(wrong, [], "nothing of the tests ships");
    console.log(`package-figure ${JSON.stringify({ registry: "jsr", files: files.length })}`);
  });
});
