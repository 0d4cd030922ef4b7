import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { tunnelmuxRate, yamuxJsRate } from "./engine.ts";

describe("bench:engine", () => {
  it("runs 1 KiB echo streams over tunnelmux and over yamux-js in memory, each to its end", async () => {
    // A stream whose echo never came back would hang the loop (the test's timeout reports it).
    for (const rate of [await tunnelmuxRate(300), await yamuxJsRate(300)]) {
      assert.ok(Number.isFinite(rate) && rate > 0, `a rate: ${rate}`);
    }
  });
});
