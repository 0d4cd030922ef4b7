import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { brotliCompressSync, deflateRawSync, deflateSync, gzipSync } from "node:zlib";
import { bodyView, harLog, hexDump, MAX_DECODED_BYTES } from "./views.ts";
import { type CapturedBody, emptyBody, type Exchange } from "./recorder.ts";

const text = new TextEncoder();

function body(bytes: Uint8Array, size = bytes.length): CapturedBody {
  return { size, chunks: [bytes], kept: bytes.length, truncated: size > bytes.length };
}

describe("bodyView", () => {
  it("decodes gzip, deflate (zlib and raw) and br for display", () => {
    const plain = text.encode("hello, inspector");
    for (
      const [encoding, bytes] of [
        ["gzip", gzipSync(plain)],
        ["deflate", deflateSync(plain)],
        ["deflate", deflateRawSync(plain)],
        ["br", brotliCompressSync(plain)],
      ] as const
    ) {
      const view = bodyView(body(bytes), [["Content-Encoding", encoding]]);
      assert.equal(view.text, "hello, inspector", encoding);
      assert.equal(view.encoding, encoding);
    }
  });

  it("bounds what a compressed body decodes to", () => {
    const bomb = gzipSync(new Uint8Array(MAX_DECODED_BYTES * 4));
    const view = bodyView(body(bomb), [["Content-Encoding", "gzip"]]);
    assert.match(view.note!, /decodes to more than 1048576 bytes: shown as it came/);
    assert.equal(view.kind, "hex");
  });

  it("says what it cannot decode, and shows binary as hex", () => {
    const broken = bodyView(body(text.encode("not gzip")), [["Content-Encoding", "gzip"]]);
    assert.match(broken.note!, /cannot decode gzip/);
    const binary = bodyView(body(new Uint8Array([0, 1, 2, 0xff])), []);
    assert.equal(binary.kind, "hex");
    assert.equal(hexDump(new Uint8Array([0x41, 0])), "00000000  41 00" + " ".repeat(42) + "  A.");
  });

  it("shows JSON pretty, and a cut text body as far as it goes", () => {
    const json = bodyView(body(text.encode('{"a":[1]}')), [["Content-Type", "application/json"]]);
    assert.equal(json.kind, "json");
    assert.equal(json.text, '{\n  "a": [\n    1\n  ]\n}');
    // "é" is two bytes; the cut falls inside it.
    const cut = bodyView(body(text.encode("caf\u00e9").subarray(0, 4), 10), []);
    assert.equal(cut.kind, "text");
    assert.equal(cut.text, "caf");
    assert.equal(cut.truncated, true);
  });
});

describe("harLog", () => {
  it("writes HAR 1.2 entries, a cut body saying so", () => {
    const exchange: Exchange = {
      id: 3,
      replayOf: 1,
      tunnel: "app",
      local: "127.0.0.1:1",
      remote: "203.0.113.1:9",
      connection: 1,
      method: "POST",
      target: "/a?b=c",
      version: "HTTP/1.1",
      requestHeaders: [["Host", "app.test"], ["Content-Type", "text/plain"]],
      requestBody: body(text.encode("abc"), 10),
      responseBody: emptyBody(),
      status: 204,
      reason: "No Content",
      responseHeaders: [],
      startedAt: Date.UTC(2026, 0, 1),
      firstByteMs: 2,
      endMs: 3,
      state: "done",
      bytes: 0,
      evicted: false,
    };
    // deno-lint-ignore no-explicit-any
    const log = (harLog([exchange]) as { log: Record<string, any> }).log;
    assert.equal(log.version, "1.2");
    const [entry] = log.entries;
    assert.equal(entry.startedDateTime, "2026-01-01T00:00:00.000Z");
    assert.equal(entry.request.url, "http://app.test/a?b=c");
    assert.deepEqual(entry.request.queryString, [{ name: "b", value: "c" }]);
    assert.equal(entry.request.postData.text, "abc");
    assert.match(entry.request.postData.comment, /cut at 3 of 10 bytes/);
    assert.deepEqual(entry.timings, { send: 0, wait: 2, receive: 1 });
    assert.match(entry.comment, /replay of #1/);
  });
});
