import { describe, it } from "node:test";
import assert from "node:assert/strict";
import fc from "fast-check";
import { findJsonSyntaxError } from "./json_syntax_error.ts";

describe("findJsonSyntaxError", () => {
  it("finds nothing wrong in valid JSON of every kind", () => {
    for (
      const text of [
        `{}`,
        `[]`,
        `0`,
        `-1.5e+3`,
        `"a\\u00e9\\n"`,
        `true`,
        ` null `,
        `{"a":[1,{"b":false}]}`,
      ]
    ) {
      assert.equal(findJsonSyntaxError(text), undefined, text);
    }
  });

  it("agrees with JSON.parse on whether arbitrary JSON and its truncations are valid", () => {
    fc.assert(
      fc.property(fc.json(), fc.nat(), (json, cut) => {
        const text = json.slice(0, cut % (json.length + 1));
        let valid = true;
        try {
          JSON.parse(text);
        } catch {
          valid = false;
        }
        assert.equal(findJsonSyntaxError(text) === undefined, valid, text);
      }),
      { numRuns: 500 },
    );
  });

  it("points at the offending character", () => {
    assert.deepEqual(findJsonSyntaxError(`[1 2]`), {
      index: 3,
      message: `unexpected "2": expected ',' or ']'`,
    });
    assert.deepEqual(findJsonSyntaxError(`{"a":"\u0001"}`), {
      index: 6,
      message: "control character in a string: escape it",
    });
    assert.deepEqual(findJsonSyntaxError(`["\\x"]`), {
      index: 2,
      message: "invalid escape in a string",
    });
    assert.deepEqual(findJsonSyntaxError(`01`), {
      index: 1,
      message: `unexpected "1": expected the end of the text after the top-level value`,
    });
  });

  it("stops at a bounded depth instead of overflowing the stack", () => {
    assert.equal(findJsonSyntaxError("[".repeat(100_000))?.message, "nested too deeply");
  });
});
