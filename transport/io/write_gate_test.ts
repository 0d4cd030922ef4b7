import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { WriteGate } from "./write_gate.ts";

describe("WriteGate", () => {
  it("is open until closed or ended", () => {
    const gate = new WriteGate(100);
    assert.equal(gate.open(false), true);
    assert.equal(gate.open(true), false);
    assert.equal(gate.end(false), true);
    assert.equal(gate.ending, true);
    assert.equal(gate.open(false), false);
  });

  it("says end() only once, and never after close", () => {
    const gate = new WriteGate(100);
    assert.equal(gate.end(true), false);
    assert.equal(gate.ending, false);
    assert.equal(gate.end(false), true);
    assert.equal(gate.end(false), false);
  });

  it("answers false at the mark and owes one drain once under it again", () => {
    const gate = new WriteGate(100);
    assert.equal(gate.underMark(99), true);
    assert.equal(gate.drainDue(0), false, "no drain without a refused write");
    assert.equal(gate.underMark(100), false);
    assert.equal(gate.drainDue(100), false, "still at the mark");
    assert.equal(gate.drainDue(99), true);
    assert.equal(gate.drainDue(0), false, "only once");
  });
});
