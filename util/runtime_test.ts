import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { currentRuntime, readEnv } from "./runtime.ts";

describe("currentRuntime", () => {
  it("names the runtime running the test, the same on every call", () => {
    const expected = "Deno" in globalThis ? "deno" : "Bun" in globalThis ? "bun" : "node";
    assert.equal(currentRuntime(), expected);
    assert.equal(currentRuntime(), currentRuntime());
  });
});

describe("readEnv", () => {
  it("reads a set variable and answers undefined for an unset one", () => {
    const path = readEnv("PATH");
    assert.equal(typeof path, "string");
    assert.equal(readEnv("TUNNELMUX_SURELY_UNSET_VARIABLE"), undefined);
  });
});
