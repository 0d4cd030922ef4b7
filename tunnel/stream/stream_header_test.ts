import { describe, it } from "node:test";
import assert from "node:assert/strict";
import {
  decodeStreamHeader,
  encodeStreamHeader,
  MAX_STREAM_HEADER_BODY,
  type StreamHeader,
  StreamHeaderError,
} from "./stream_header.ts";

const HEADERS: StreamHeader[] = [
  { kind: "control" },
  { kind: "forward", target: "db.internal:5432" },
  { kind: "forward", target: "db.internal:5432", confirm: "1" },
  { kind: "visitor", tunnel: "t-1", remote: "203.0.113.9:50123", local: "127.0.0.1:8080" },
  { kind: "service", service: "ssh-box" },
  { kind: "service", service: "ssh-box", from: "laptop" },
  { kind: "echo" },
  { kind: "udpVisitor", tunnel: "t-2", remote: "203.0.113.9:5353", local: "0.0.0.0:53" },
  { kind: "udpForward", target: "10.0.0.2:53" },
];

describe("stream header", () => {
  for (const header of HEADERS) {
    it(`round-trips ${JSON.stringify(header)} and leaves the payload after it`, () => {
      const encoded = encodeStreamHeader(header);
      const bytes = new Uint8Array(encoded.length + 3);
      bytes.set(encoded);
      bytes.set([7, 8, 9], encoded.length);
      const decoded = decodeStreamHeader(bytes)!;
      assert.deepEqual(decoded.header, header);
      assert.deepEqual(decoded.rest, new Uint8Array([7, 8, 9]));
    });
  }

  it("has the documented layout: version, kind, big-endian length, JSON", () => {
    const bytes = encodeStreamHeader({ kind: "forward", target: "a:1" });
    const body = new TextEncoder().encode('{"target":"a:1"}');
    assert.deepEqual(Array.from(bytes), [1, 2, 0, body.length, ...body]);
  });

  it("needs more bytes until the body is complete, at every split point", () => {
    const bytes = encodeStreamHeader({ kind: "visitor", tunnel: "t", remote: "r:1", local: "l:2" });
    for (let cut = 0; cut < bytes.length; cut++) {
      assert.equal(decodeStreamHeader(bytes.subarray(0, cut)), null, `cut at ${cut}`);
    }
  });

  /** A header of `kind` whose body is `json`, as it is, unchecked. */
  const withBody = (kind: "visitor", json: string): number[] => {
    const body = new TextEncoder().encode(json);
    const head = encodeStreamHeader({ kind, tunnel: "t", remote: "r", local: "l" });
    return [head[0], head[1], body.length >>> 8, body.length & 0xff, ...body];
  };
  const bad: [string, number[] | Uint8Array, RegExp][] = [
    ["a wrong version, from its first byte", [2], /version/],
    ["an unknown kind", [1, 99, 0, 0], /kind/],
    ["a body above the limit, from the length alone", [1, 2, 0x10, 0x01], /too large/],
    ["a body that is not JSON", [1, 2, 0, 1, 0x7b], /JSON/],
    ["a body that is not an object", [1, 5, 0, 2, 0x5b, 0x5d], /object/],
    ["a missing field", [1, 2, 0, 2, 0x7b, 0x7d], /needs "target"/],
    ["an unexpected field", [
      ...encodeStreamHeader({ kind: "echo" }).subarray(0, 2),
      0,
      7,
      ...new TextEncoder().encode('{"x":1}'),
    ], /unexpected/],
    // The fields are checked where JSON.parse put them: neither may slip in as another key.
    [
      "a body naming its own kind",
      withBody(
        "visitor",
        '{"kind":"forward","tunnel":"t","remote":"r","local":"l"}',
      ),
      /unexpected field "kind"/,
    ],
    [
      "a body with a __proto__ key",
      withBody(
        "visitor",
        '{"__proto__":"x","tunnel":"t","remote":"r","local":"l"}',
      ),
      /unexpected field "__proto__"/,
    ],
    ["invalid UTF-8", [1, 2, 0, 2, 0xff, 0xfe], /UTF-8/],
    ["a flag with another value", [
      1,
      2,
      0,
      32,
      ...new TextEncoder().encode('{"target":"a:1","confirm":"yes"}'),
    ], /must be "1"/],
  ];
  for (const [name, bytes, message] of bad) {
    it(`rejects ${name}`, () => {
      assert.throws(
        () => decodeStreamHeader(Uint8Array.from(bytes)),
        (error: unknown) => error instanceof StreamHeaderError && message.test(error.message),
      );
    });
  }

  it("refuses to encode a header above the limit", () => {
    assert.throws(
      () => encodeStreamHeader({ kind: "forward", target: "x".repeat(MAX_STREAM_HEADER_BODY) }),
      StreamHeaderError,
    );
  });
});
