import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { Lifecycle } from "./lifecycle.ts";

describe("Lifecycle", () => {
  it("moves only along the table and tells listeners", () => {
    const seen: string[] = [];
    const machine = new Lifecycle<"a" | "b" | "c", "next" | "reset">(
      { a: { next: "b" }, b: { next: "c", reset: "a" }, c: {} },
      "a",
    );
    machine.onTransition((to, from, event) => seen.push(`${from}-${event}->${to}`));
    assert.equal(machine.can("reset"), false);
    assert.equal(machine.fire("reset"), false);
    assert.equal(machine.state, "a");
    assert.equal(machine.fire("next"), true);
    assert.equal(machine.fire("reset"), true);
    assert.deepEqual(seen, ["a-next->b", "b-reset->a"]);
  });
});
