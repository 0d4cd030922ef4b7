import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { isObject } from "./is_object.ts";

describe("isObject", () => {
  it("is true for the objects of a parsed document, empty or not", () => {
    assert.ok(isObject({}));
    assert.ok(isObject(JSON.parse('{"a":{"b":[1]}}')));
    assert.ok(isObject(Object.create(null)));
  });

  it("is false for arrays, null and the other JSON values", () => {
    for (const value of [[], [{}], null, undefined, "text", "", 0, 1.5, true, false]) {
      assert.equal(isObject(value), false, JSON.stringify(value) ?? String(value));
    }
  });
});
