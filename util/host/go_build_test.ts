import { execFileSync } from "node:child_process";
import { mkdtempSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { buildGoProgram, type GoProgram } from "./go_build.ts";

function program(dir: string, message: string, name = "hello"): GoProgram {
  writeFileSync(join(dir, "go.mod"), "module example.com/hello\n\ngo 1.23\n");
  writeFileSync(
    join(dir, "main.go"),
    `package main\n\nimport "fmt"\n\nfunc main() { fmt.Print(${JSON.stringify(message)}) }\n`,
  );
  return { name, packageDir: dir, sourceDirs: [dir], cacheDir: join(dir, "cache") };
}

describe("buildGoProgram", () => {
  it("builds once per binary and keeps programs apart by name", async () => {
    const dir = mkdtempSync(join(tmpdir(), "go-build-"));
    try {
      const bin = await buildGoProgram(program(dir, "one"));
      assert.equal(execFileSync(bin, { encoding: "utf8" }), "one");
      const built = statSync(bin).mtimeMs;

      assert.equal(await buildGoProgram(program(dir, "one")), bin);
      assert.equal(statSync(bin).mtimeMs, built, "asked again: no rebuild");

      const other = await buildGoProgram(program(dir, "two", "hello2"));
      assert.equal(execFileSync(other, { encoding: "utf8" }), "two");
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("rejects with go's message when the program does not compile, and retries later", async () => {
    const dir = mkdtempSync(join(tmpdir(), "go-build-"));
    try {
      const broken = program(dir, "x", "broken");
      writeFileSync(join(dir, "main.go"), "package main\n\nfunc main() { undefinedThing() }\n");
      await assert.rejects(buildGoProgram(broken), /undefined: undefinedThing/);
      const fixed = program(dir, "fixed", "broken");
      const bin = await buildGoProgram(fixed);
      assert.equal(execFileSync(bin, { encoding: "utf8" }), "fixed");
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
