import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { parseJsonc, stripJsonc } from "./jsonc.ts";

describe("JSONC", () => {
  const cases: [string, string, unknown][] = [
    ["plain JSON", `{"a": 1}`, { a: 1 }],
    ["line comment", `{"a": 1 // one\n}`, { a: 1 }],
    ["block comment", `{/* x */"a": /* y */ 1}`, { a: 1 }],
    ["multi-line block comment", `{\n/*\n * doc\n */\n"a": 1}`, { a: 1 }],
    ["trailing comma in object", `{"a": 1,}`, { a: 1 }],
    ["trailing comma in array", `{"a": [1, 2, ]}`, { a: [1, 2] }],
    ["trailing comma before comment", `{"a": [1, // c\n]}`, { a: [1] }],
    ["trailing comma then block comment", `{"a": 1, /* c */ }`, { a: 1 }],
    ["// inside a string", `{"url": "http://x/y"}`, { url: "http://x/y" }],
    ["/* inside a string", `{"a": "/* not */"}`, { a: "/* not */" }],
    ["comma-brace inside a string", `{"a": ",}"}`, { a: ",}" }],
    ["escaped quote inside a string", `{"a": "say \\"//hi\\"", "b": 2}`, { a: 'say "//hi"', b: 2 }],
    ["escaped backslash before quote", `{"a": "c:\\\\", "b": "//"}`, { a: "c:\\", b: "//" }],
    ["comment at end of file", `{"a": 1}\n// end`, { a: 1 }],
    ["BOM", `\uFEFF{"a": 1}`, { a: 1 }],
    ["CRLF", `{\r\n"a": 1, // c\r\n}`, { a: 1 }],
    ["slash not starting a comment", `{"a": 1 }`, { a: 1 }],
  ];
  for (const [label, text, expected] of cases) {
    it(label, () => {
      const parsed = parseJsonc(text);
      assert.ok(parsed.ok, !parsed.ok ? parsed.error : "");
      assert.deepEqual(parsed.value, expected);
    });
  }

  const bad: [string, string][] = [
    ["lone comma is not a trailing comma", `{"a": [,]}`],
    ["double comma", `{"a": [1,,]}`],
    ["leading comma in object", `{,}`],
    ["single quotes", `{'a': 1}`],
    ["unterminated string", `{"a": "x}`],
    ["missing value", `{"a": }`],
    ["garbage", `nope`],
  ];
  for (const [label, text] of bad) {
    it(`refuses: ${label}`, () => assert.equal(parseJsonc(text).ok, false));
  }

  it("unterminated block comment names its line", () => {
    assert.throws(() => stripJsonc(`{\n"a": 1 /* open`), /unterminated \/\* comment at line 2/);
  });

  it("keeps line structure so parse positions stay right", () => {
    const text = `{\n  // c\n  "a": 1, /* x\n y */\n}`;
    assert.equal(stripJsonc(text).split("\n").length, text.split("\n").length);
    assert.equal(stripJsonc(text).length, text.length);
  });

  const located: [string, string, string][] = [
    [
      "a missing value",
      `{\n  "a": 1,\n  "b": }`,
      `unexpected "}": expected a value at line 3 column 8`,
    ],
    [
      "a missing colon",
      `{"a" 1}`,
      `unexpected "1": expected ':' after the property name at line 1 column 6`,
    ],
    [
      "a double comma",
      `{\n\n  "x": [1, 2,, 3]}`,
      `unexpected ",": expected a value at line 3 column 14`,
    ],
    [
      "single quotes",
      `{'a': 1}`,
      `unexpected "'": expected a property name in double quotes at line 1 column 2`,
    ],
    [
      "an unterminated string",
      `{"a": "b`,
      `unexpected end of input: expected '"' to end the string at line 1 column 9`,
    ],
    [
      "text after the value",
      `{"a": 1} x`,
      `unexpected "x": expected the end of the text after the top-level value at line 1 column 10`,
    ],
    ["an empty file", ``, `unexpected end of input: expected a value at line 1 column 1`],
    [
      "a missing brace after a comment",
      `{ // open\n  "a": 1\n`,
      `unexpected end of input: expected ',' or '}' at line 3 column 1`,
    ],
  ];
  for (const [label, text, message] of located) {
    it(`names line and column: ${label}`, () => {
      assert.deepEqual(parseJsonc(text), { ok: false, error: message });
    });
  }
});
