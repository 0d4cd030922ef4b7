import assert from "node:assert/strict";
import { describe, it } from "node:test";
import process from "node:process";
import { currentRuntime, readEnv, runtimeVersion } from "./runtime.ts";

describe("currentRuntime", () => {
  it("names the runtime running the test, the same on every call", () => {
    const expected = "Deno" in globalThis ? "deno" : "Bun" in globalThis ? "bun" : "node";
    assert.equal(currentRuntime(), expected);
    assert.equal(currentRuntime(), currentRuntime());
  });
});

describe("runtimeVersion", () => {
  it("names the runtime and the version process.versions gives for it", () => {
    const { name, version } = runtimeVersion();
    assert.equal(name, currentRuntime());
    const versions = process.versions as Record<string, string | undefined>;
    assert.equal(version, versions[name]);
  });
});

describe("readEnv", () => {
  it("reads a set variable and answers undefined for an unset one", () => {
    const path = readEnv("PATH");
    assert.equal(typeof path, "string");
    assert.equal(readEnv("TUNNELMUX_SURELY_UNSET_VARIABLE"), undefined);
  });
});
