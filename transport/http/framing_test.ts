/**
 * HTTP/1.1 message framing for a pass-through proxy: heads parsed strictly with fields as they
 * came, request framing that refuses every ambiguity a smuggler needs, response framing by
 * method and status, and the chunked scanner fed in every split.
 */

import { describe, it } from "node:test";
import assert from "node:assert/strict";
import {
  ChunkedScanner,
  FramingError,
  parseMessageHead,
  requestFraming,
  responseFraming,
} from "./framing.ts";

const bytes = (text: string) => new TextEncoder().encode(text);

function refused(run: () => unknown, status: 400 | 501): void {
  assert.throws(run, (error) => error instanceof FramingError && error.status === status);
}

describe("http/framing: heads", () => {
  it("keeps field order, case and repeats, trimming values", () => {
    const head = parseMessageHead(
      bytes("POST /x HTTP/1.1\r\nHost: a\r\nX-A:  1 \r\nx-a: 2\r\nEmpty:\r\n\r\n"),
    );
    assert.deepEqual(head, {
      startLine: "POST /x HTTP/1.1",
      fields: [["Host", "a"], ["X-A", "1"], ["x-a", "2"], ["Empty", ""]],
    });
  });

  it("refuses obs-fold, a missing colon, space before the colon and control characters", () => {
    for (
      const bad of [
        "GET / HTTP/1.1\r\nA: 1\r\n folded\r\n\r\n",
        "GET / HTTP/1.1\r\nA: 1\r\n\tfolded\r\n\r\n",
        "GET / HTTP/1.1\r\nNoColon\r\n\r\n",
        "GET / HTTP/1.1\r\nContent-Length : 5\r\n\r\n",
        "GET / HTTP/1.1\r\n: empty name\r\n\r\n",
        "GET / HTTP/1.1\r\nBad Name: 1\r\n\r\n",
        "GET / HTTP/1.1\r\nA: 1\x002\r\n\r\n",
        "GET / HTTP/1.1\r\nA: 1\n2\r\n\r\n",
      ]
    ) {
      assert.equal(parseMessageHead(bytes(bad)), undefined, JSON.stringify(bad));
    }
  });
});

describe("http/framing: requests", () => {
  it("frames by Content-Length or chunked, none without either", () => {
    assert.deepEqual(requestFraming("1.1", [["Content-Length", "42"]]), {
      kind: "length",
      length: 42,
    });
    assert.deepEqual(requestFraming("1.1", [["Content-Length", "0"]]), { kind: "none" });
    assert.deepEqual(requestFraming("1.1", [["Transfer-Encoding", "chunked"]]), {
      kind: "chunked",
    });
    assert.deepEqual(requestFraming("1.1", [["transfer-encoding", "gzip, Chunked"]]), {
      kind: "chunked",
    });
    assert.deepEqual(requestFraming("1.0", []), { kind: "none" });
  });

  it("refuses what request smuggling needs", () => {
    // CL.TE and TE.CL: both framings at once.
    refused(
      () => requestFraming("1.1", [["Content-Length", "5"], ["Transfer-Encoding", "chunked"]]),
      400,
    );
    // Two lengths, equal or not, in two fields or one list.
    refused(() => requestFraming("1.1", [["Content-Length", "5"], ["Content-Length", "5"]]), 400);
    refused(() => requestFraming("1.1", [["Content-Length", "5, 6"]]), 400);
    // Lengths that are not plain digits.
    for (const bad of ["+5", "-1", "0x10", "5 ", "", "1e3", "99999999999999999"]) {
      refused(() => requestFraming("1.1", [["Content-Length", bad]]), 400);
    }
    // Chunked twice, an empty coding, chunked not last, TE in HTTP/1.0.
    refused(() => requestFraming("1.1", [["Transfer-Encoding", "chunked, chunked"]]), 400);
    refused(() =>
      requestFraming("1.1", [["Transfer-Encoding", "chunked"], ["TE2", "x"], [
        "Transfer-Encoding",
        "chunked",
      ]]), 400);
    refused(() => requestFraming("1.1", [["Transfer-Encoding", ",chunked"]]), 400);
    refused(() => requestFraming("1.1", [["Transfer-Encoding", "chunked, gzip"]]), 501);
    refused(() => requestFraming("1.1", [["Transfer-Encoding", "xchunked"]]), 501);
    refused(() => requestFraming("1.0", [["Transfer-Encoding", "chunked"]]), 400);
  });
});

describe("http/framing: responses", () => {
  it("has no body for HEAD, 1xx, 204 and 304, a tunnel after 101 or CONNECT's 2xx", () => {
    const cl: [string, string][] = [["Content-Length", "10"]];
    assert.deepEqual(responseFraming("HEAD", 200, cl), { kind: "none" });
    assert.deepEqual(responseFraming("GET", 204, cl), { kind: "none" });
    assert.deepEqual(responseFraming("GET", 304, cl), { kind: "none" });
    assert.deepEqual(responseFraming("GET", 103, []), { kind: "none" });
    assert.deepEqual(responseFraming("GET", 101, []), { kind: "tunnel" });
    assert.deepEqual(responseFraming("CONNECT", 200, []), { kind: "tunnel" });
    assert.deepEqual(responseFraming("CONNECT", 407, cl), { kind: "length", length: 10 });
  });

  it("is chunked, a length, or until close", () => {
    assert.deepEqual(responseFraming("GET", 200, [["Transfer-Encoding", "chunked"]]), {
      kind: "chunked",
    });
    assert.deepEqual(responseFraming("GET", 200, [["Transfer-Encoding", "gzip"]]), {
      kind: "close",
    });
    assert.deepEqual(responseFraming("GET", 200, [["Content-Length", "7"]]), {
      kind: "length",
      length: 7,
    });
    assert.deepEqual(responseFraming("GET", 200, []), { kind: "close" });
    refused(
      () =>
        responseFraming("GET", 200, [["Content-Length", "7"], ["Transfer-Encoding", "chunked"]]),
      400,
    );
  });
});

describe("http/framing: ChunkedScanner", () => {
  const body = "5\r\nhello\r\n1a;name=value;x\r\n" + "z".repeat(26) +
    "\r\n0\r\nTrailer: t\r\nOther: u\r\n\r\n";

  it("finds the end of a chunked body however the bytes are split", () => {
    const all = bytes(body + "GET /next");
    for (let cut = 0; cut <= all.length; cut++) {
      const scanner = new ChunkedScanner();
      const first = scanner.push(all.subarray(0, cut));
      const end = first >= 0 ? first : cut + scanner.push(all.subarray(cut));
      assert.equal(end, body.length, `split at ${cut}`);
      assert.ok(scanner.done);
    }
  });

  it("scans byte by byte, with BWS before extensions and upper-case hex", () => {
    const text = "A \t;ext\r\n0123456789\r\n0\r\n\r\n";
    const scanner = new ChunkedScanner();
    let end = -1;
    const all = bytes(text);
    for (let i = 0; i < all.length && end < 0; i++) {
      const at = scanner.push(all.subarray(i, i + 1));
      if (at >= 0) end = i + at;
    }
    assert.equal(end, text.length);
  });

  it("refuses malformed framing", () => {
    for (
      const bad of [
        "\r\n", // no size
        "g\r\n", // not hex
        "5 5\r\nhello\r\n0\r\n\r\n", // junk after BWS
        ";ext\r\n", // extension without a size
        "5\nhello", // bare LF
        "5\r\nhelloX\r\n", // more data than the size
        "5\r\nhello\r\r", // no LF after data
        "12345678901234\r\n", // more than 13 hex digits
        "0\r\nTrailer: t\n\r\n", // trailer line with a bare LF
        "0\r\n\rX", // final CR without LF
      ]
    ) {
      assert.throws(
        () => new ChunkedScanner().push(bytes(bad)),
        (error) => error instanceof FramingError && error.status === 400,
        JSON.stringify(bad),
      );
    }
  });

  it("bounds the size line and the trailers", () => {
    assert.throws(
      () => new ChunkedScanner().push(bytes("1;" + "x".repeat(5000) + "\r\n")),
      /chunk size line too long/,
    );
    assert.throws(
      () => new ChunkedScanner().push(bytes("0\r\n" + "T: x\r\n".repeat(4000))),
      /trailers too long/,
    );
  });

  it("returns where the body ended once done, and -1 while it goes on", () => {
    const scanner = new ChunkedScanner();
    assert.equal(scanner.push(bytes("4\r\nab")), -1);
    assert.equal(scanner.done, false);
    assert.equal(scanner.push(bytes("cd\r\n0\r\n\r\nrest")), 9);
    assert.equal(scanner.push(bytes("more"), 2), 2);
  });
});
