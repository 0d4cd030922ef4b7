import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { encodeUtf8 } from "./utf8.ts";

const texts = [
  "",
  "a",
  '{"tunnel":"t-1","remote":"127.0.0.1:5000","local":"[::1]:80"}',
  "café",
  "日本語のテキスト",
  "emoji 😀 and more",
  "lone \ud800 surrogate",
  "x".repeat(10_000),
  "é".repeat(5000),
];

describe("encodeUtf8", () => {
  it("gives what TextEncoder gives, after the room asked for", () => {
    for (const text of texts) {
      for (const room of [0, 4]) {
        const bytes = encodeUtf8(text, room);
        assert.deepEqual(
          Array.from(bytes.subarray(room)),
          Array.from(new TextEncoder().encode(text)),
          JSON.stringify(text.slice(0, 20)),
        );
        assert.equal(bytes.length, room + new TextEncoder().encode(text).length);
      }
    }
  });

  it("hands out arrays that do not overlap", () => {
    const a = encodeUtf8("aaaa");
    const b = encodeUtf8("bbbb");
    a.fill(0x41);
    assert.equal(new TextDecoder().decode(b), "bbbb");
  });
});
