import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  buildPackage,
  isShippedModule,
  rewriteDeclarationImports,
  shippedModules,
} from "./build_package.ts";

describe("build_package", () => {
  it("ships modules, not tests, test helpers or declarations", () => {
    assert.equal(isShippedModule("client/mod.ts"), true);
    assert.equal(isShippedModule("client/client_test.ts"), false);
    assert.equal(isShippedModule("transport/_contract.ts"), false);
    assert.equal(isShippedModule("dist/client/mod.d.ts"), false);
    const modules = shippedModules();
    for (const module of ["cli/main.ts", "transport/node/tcp.ts", "examples/expose.ts"]) {
      assert.ok(modules.includes(module), module);
    }
    assert.ok(!modules.some((m) => m.startsWith("testing/") || m.startsWith("bench/")));
  });

  it("rewrites relative .ts specifiers of declarations to .js, and nothing else", () => {
    const text = 'import type { A } from "./a.ts";\nexport * from "../b/c.ts";\n' +
      'type T = import("./d.ts").D;\nimport "hono/x.ts";\n// see "./e.ts"\n';
    assert.equal(
      rewriteDeclarationImports(text),
      'import type { A } from "./a.js";\nexport * from "../b/c.js";\n' +
        'type T = import("./d.js").D;\nimport "hono/x.ts";\n// see "./e.ts"\n',
    );
  });

  it("builds one JavaScript file and one declaration per module, runnable without TypeScript", async () => {
    const out = mkdtempSync(join(tmpdir(), "tunnelmux-dist-"));
    try {
      await buildPackage(out);
      const tcp = readFileSync(join(out, "transport/tcp.js"), "utf8");
      // The adapters stay separate modules, loaded by the runtime that needs one.
      assert.match(tcp, /import\("\.\/node\/tcp\.js"\)/);
      assert.doesNotMatch(tcp, /\.ts"/);
      assert.match(readFileSync(join(out, "transport/node/tcp.js"), "utf8"), /node:net/);
      // Node has no text imports: the dashboard's page is inside the module.
      const pages = readFileSync(join(out, "daemon/admin/dashboard/pages.js"), "utf8");
      assert.match(pages, /<!doctype html>/i);
      assert.doesNotMatch(pages, /from "\.\/index\.html"/);
      const declarations = readFileSync(join(out, "client/mod.d.ts"), "utf8");
      assert.match(
        declarations,
        /export \{ Client, CLIENT_TRANSITIONS, connect \} from "\.\/client\.js"/,
      );
    } finally {
      rmSync(out, { recursive: true, force: true });
    }
  });
});
