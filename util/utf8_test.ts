import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { decodeUtf8, encodeUtf8 } from "./utf8.ts";

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

describe("decodeUtf8", () => {
  it("gives what a fatal TextDecoder gives", () => {
    for (const text of texts) {
      const bytes = new TextEncoder().encode(text);
      assert.equal(decodeUtf8(bytes), new TextDecoder().decode(bytes));
    }
  });

  it("refuses bytes that are not UTF-8", () => {
    for (const bad of [[0xff], [0x61, 0xc3], [0xed, 0xa0, 0x80], [0x80, 0x61]]) {
      assert.throws(() => decodeUtf8(new Uint8Array(bad)), TypeError, String(bad));
    }
  });

  it("decodes every byte value below 0x80 as itself", () => {
    const bytes = new Uint8Array(128).map((_, i) => i);
    const text = decodeUtf8(bytes);
    assert.equal(text.length, 128);
    for (let i = 0; i < 128; i++) assert.equal(text.charCodeAt(i), i);
  });
});
