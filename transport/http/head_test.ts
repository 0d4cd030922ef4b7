// Unit tests for the HTTP/1.1 head helpers the raw servers share.
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { bareLineFeed, headEnd, notHttpRequest, parseRequestHead } from "./head.ts";

const bytes = (text: string) => new TextEncoder().encode(text);

describe("notHttpRequest", () => {
  for (const prefix of ["", "G", "GET", "GET ", "GET /", "OPTIONS /x", "POST /a HTTP/1.1\r\n"]) {
    it(`waits on ${JSON.stringify(prefix)}: it may still become a request`, () => {
      assert.equal(notHttpRequest(bytes(prefix)), false);
    });
  }
  const refused: [string, Uint8Array][] = [
    ["a yamux header", new Uint8Array([0, 1, 0, 1, 0, 0, 0, 1])],
    ["a TLS ClientHello", new Uint8Array([0x16, 0x03, 0x01])],
    ["a lower-case method", bytes("get /")],
    ["a leading space", bytes(" GET /")],
    ["an absolute-form target", bytes("GET http://x/ HTTP/1.1")],
    ["a method longer than any real one", bytes("A".repeat(20))],
  ];
  for (const [what, input] of refused) {
    it(`refuses ${what}`, () => assert.equal(notHttpRequest(input), true));
  }
});

describe("parseRequestHead", () => {
  it("parses method, target, version and fields", () => {
    const head = parseRequestHead(bytes("PUT /a?b HTTP/1.0\r\nHost: x\r\nX-A: 1 \r\n\r\n"));
    assert.deepEqual(
      [head?.method, head?.target, head?.version, head?.headers.get("x-a")],
      ["PUT", "/a?b", "1.0", "1"],
    );
  });
  for (
    const [what, text] of [
      ["obs-fold", "GET / HTTP/1.1\r\nA: 1\r\n folded\r\n\r\n"],
      ["space before the colon", "GET / HTTP/1.1\r\nA : 1\r\n\r\n"],
      ["HTTP/2 preface", "PRI * HTTP/2.0\r\n\r\n"],
    ]
  ) {
    it(`refuses ${what}`, () => assert.equal(parseRequestHead(bytes(text)), undefined));
  }
  it("headEnd finds the blank line, and -1 before it", () => {
    assert.equal(headEnd(bytes("GET / HTTP/1.1\r\n\r\nbody")), 18);
    assert.equal(headEnd(bytes("GET / HTTP/1.1\r\n")), -1);
  });
});

describe("bareLineFeed", () => {
  it("finds an LF without its CR, wherever it is, and nothing in a head of CRLFs", () => {
    assert.equal(bareLineFeed(bytes("GET / HTTP/1.1\n\n")), 14);
    assert.equal(bareLineFeed(bytes("\nGET")), 0);
    assert.equal(bareLineFeed(bytes("GET / HTTP/1.1\r\nHost: a\n\r\n")), 23);
    assert.equal(bareLineFeed(bytes("GET / HTTP/1.1\r\nHost: a\r\n\r\n")), -1);
    // A CR at the end of what has arrived: its LF may be next.
    assert.equal(bareLineFeed(bytes("GET / HTTP/1.1\r")), -1);
  });
});
