// The failover bench runs and reports (numbers, not speed: the figures belong to the bench run).
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { runFailover } from "./failover.ts";
import type { JsRuntime } from "./impls.ts";
import { RUNTIME } from "../testing/mod.ts";

describe("bench:failover", () => {
  it(`runs a node's death under --ha 2 on ${RUNTIME} and reports what visitors saw`, async () => {
    const result = await runFailover({
      runtime: RUNTIME as JsRuntime, // the tests run on Deno or Bun
      ha: 2,
      ratePerSecond: 20,
      ttlMs: 2_000,
      beforeMs: 300,
      afterMs: 1_500,
    });
    assert.equal(result.ha, 2);
    assert.ok(result.visitors > 10, `visitors: ${result.visitors}`);
    assert.ok(result.failed < result.visitors, "the second route served");
    assert.ok(Number.isFinite(result.longestGapMs) && Number.isFinite(result.wholeAfterMs));
  });
});
