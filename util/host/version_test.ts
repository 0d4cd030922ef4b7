import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { VERSION } from "./version.ts";

describe("VERSION", () => {
  it("is the version package.json and deno.json give", () => {
    for (const file of ["package.json", "deno.json"]) {
      const manifest = JSON.parse(readFileSync(new URL(`../../${file}`, import.meta.url), "utf8"));
      assert.equal(VERSION, manifest.version, file);
    }
  });
});
