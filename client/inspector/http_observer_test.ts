import { describe, it } from "node:test";
import fc from "fast-check";
import assert from "node:assert/strict";
import { HttpObserver, REDACTED } from "./http_observer.ts";
import { bodyBytes, type Exchange, Recorder } from "./recorder.ts";
import {
  BufferPool,
  POISON,
  poisonReleasedBuffers,
  releaseBytes,
} from "../../util/bytes/buffer_pool.ts";

const text = new TextEncoder();
const decode = (bytes: Uint8Array) => new TextDecoder().decode(bytes);

const INFO = { tunnel: "app", local: "127.0.0.1:3000", remote: "203.0.113.7:50000" };

function observer(recorder = new Recorder(), options = {}) {
  return { recorder, observer: new HttpObserver(recorder, INFO, options) };
}

/** Feeds `message` in pieces of `size` bytes (1: byte by byte). */
function feed(into: (chunk: Uint8Array) => void, message: string | Uint8Array, size = 1) {
  const bytes = typeof message === "string" ? text.encode(message) : message;
  for (let at = 0; at < bytes.length; at += size) into(bytes.slice(at, at + size));
}

const only = (recorder: Recorder): Exchange => {
  assert.equal(recorder.size, 1);
  return recorder.list()[0];
};

describe("HttpObserver", () => {
  for (const size of [1, 3, 7, 1000]) {
    it(`follows a request and its response fed in pieces of ${size} bytes`, () => {
      const { recorder, observer: o } = observer();
      feed(
        (c) => o.request(c),
        "POST /items?x=1 HTTP/1.1\r\nHost: app.test\r\nContent-Length: 11\r\n" +
          'Content-Type: application/json\r\n\r\n{"a":[1,2]}',
        size,
      );
      const exchange = only(recorder);
      assert.equal(exchange.method, "POST");
      assert.equal(exchange.target, "/items?x=1");
      assert.equal(exchange.state, "pending");
      assert.equal(decode(bodyBytes(exchange.requestBody)), '{"a":[1,2]}');
      feed(
        (c) => o.response(c),
        "HTTP/1.1 201 Created\r\nContent-Length: 2\r\nX-Id: 7\r\n\r\nok",
        size,
      );
      assert.equal(exchange.status, 201);
      assert.equal(exchange.reason, "Created");
      assert.equal(exchange.state, "done");
      assert.deepEqual(exchange.responseHeaders, [["Content-Length", "2"], ["X-Id", "7"]]);
      assert.equal(decode(bodyBytes(exchange.responseBody)), "ok");
      assert.equal(exchange.remote, INFO.remote);
      assert.ok(exchange.firstByteMs! >= 0 && exchange.endMs! >= exchange.firstByteMs!);
    });
  }

  it("removes the chunked coding from what it captures, extensions and trailers too", () => {
    const { recorder, observer: o } = observer();
    feed((c) => o.request(c), "GET / HTTP/1.1\r\nHost: a\r\n\r\n", 5);
    feed(
      (c) => o.response(c),
      "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" +
        "5;ext=1\r\nhello\r\n1\r\n \r\nA\r\n0123456789\r\n0\r\nX-Trailer: t\r\n\r\n",
      2,
    );
    const exchange = only(recorder);
    assert.equal(exchange.state, "done");
    assert.equal(decode(bodyBytes(exchange.responseBody)), "hello 0123456789");
    assert.equal(exchange.responseBody.size, 16);
  });

  it("matches pipelined requests to their responses in order, on one connection", () => {
    const { recorder, observer: o } = observer();
    feed(
      (c) => o.request(c),
      "GET /one HTTP/1.1\r\nHost: a\r\n\r\n" +
        "POST /two HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n" +
        "GET /three HTTP/1.1\r\nHost: a\r\n\r\n",
      1000,
    );
    assert.deepEqual(recorder.list().map((e) => e.target), ["/one", "/two", "/three"]);
    assert.equal(decode(bodyBytes(recorder.list()[1].requestBody)), "abc");
    feed(
      (c) => o.response(c),
      "HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\n1" +
        "HTTP/1.1 100 Continue\r\n\r\n" +
        "HTTP/1.1 404 Not Found\r\nContent-Length: 1\r\n\r\n2" +
        "HTTP/1.1 204 No Content\r\n\r\n",
      4,
    );
    assert.deepEqual(recorder.list().map((e) => [e.status, e.state]), [
      [200, "done"],
      [404, "done"],
      [204, "done"],
    ]);
    const connections = new Set(recorder.list().map((e) => e.connection));
    assert.equal(connections.size, 1);
  });

  it("a HEAD's response has no body, whatever its Content-Length says", () => {
    const { recorder, observer: o } = observer();
    feed((c) => o.request(c), "HEAD / HTTP/1.1\r\nHost: a\r\n\r\nGET /b HTTP/1.1\r\n\r\n", 9);
    feed(
      (c) => o.response(c),
      "HTTP/1.1 200 OK\r\nContent-Length: 99\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nx",
      9,
    );
    assert.deepEqual(recorder.list().map((e) => e.state), ["done", "done"]);
    assert.equal(decode(bodyBytes(recorder.list()[1].responseBody)), "x");
  });

  it("a response delimited by the close ends with it; one cut short failed", () => {
    const { recorder, observer: o } = observer();
    feed((c) => o.request(c), "GET / HTTP/1.1\r\n\r\n", 100);
    feed((c) => o.response(c), "HTTP/1.1 200 OK\r\n\r\nuntil the end", 3);
    assert.equal(only(recorder).state, "responding");
    o.close();
    assert.equal(only(recorder).state, "done");
    assert.equal(decode(bodyBytes(only(recorder).responseBody)), "until the end");

    const second = observer();
    feed((c) => second.observer.request(c), "GET / HTTP/1.1\r\n\r\n", 100);
    feed((c) => second.observer.response(c), "HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\nabc", 3);
    second.observer.close();
    assert.equal(only(second.recorder).state, "failed");
    assert.match(only(second.recorder).error!, /before the response ended/);
  });

  it("records a body over the limit cut, with its real size", () => {
    const { recorder, observer: o } = observer(new Recorder({ bodyLimit: 10, maxBytes: 4096 }));
    const body = "0123456789ABCDEFGHIJ";
    feed(
      (c) => o.request(c),
      `PUT /f HTTP/1.1\r\nContent-Length: ${body.length}\r\n\r\n${body}`,
      6,
    );
    const exchange = only(recorder);
    assert.equal(exchange.requestBody.size, 20);
    assert.equal(exchange.requestBody.truncated, true);
    assert.equal(decode(bodyBytes(exchange.requestBody)), "0123456789");
  });

  it("redacts Authorization, Cookie and Set-Cookie unless told not to", () => {
    const head = "GET / HTTP/1.1\r\nAuthorization: Bearer s3cret\r\nCookie: id=s3cret\r\n\r\n";
    const response = "HTTP/1.1 200 OK\r\nSet-Cookie: id=s3cret\r\nContent-Length: 0\r\n\r\n";
    const redacted = observer();
    feed((c) => redacted.observer.request(c), head, 100);
    feed((c) => redacted.observer.response(c), response, 100);
    const e = only(redacted.recorder);
    assert.deepEqual(e.requestHeaders, [["Authorization", REDACTED], ["Cookie", REDACTED]]);
    assert.deepEqual(e.responseHeaders, [["Set-Cookie", REDACTED], ["Content-Length", "0"]]);
    assert.doesNotMatch(JSON.stringify(e), /s3cret/);

    const plain = observer(new Recorder(), { unredacted: true });
    feed((c) => plain.observer.request(c), head, 100);
    feed((c) => plain.observer.response(c), response, 100);
    assert.equal(only(plain.recorder).requestHeaders[0][1], "Bearer s3cret");
  });

  it("after a 101 counts WebSocket frames per direction, split anywhere", () => {
    const { recorder, observer: o } = observer();
    feed(
      (c) => o.request(c),
      "GET /ws HTTP/1.1\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n",
      100,
    );
    feed(
      (c) => o.response(c),
      "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n",
      100,
    );
    const exchange = only(recorder);
    assert.equal(exchange.state, "websocket");
    // Masked client frames: a 5-byte text, a 200-byte binary (16-bit length); unmasked: one
    // 3-byte frame and one of 70000 bytes (64-bit length).
    const masked = (payload: number, extended: number[]) =>
      new Uint8Array([
        0x82,
        0x80 | (extended.length ? (extended.length === 2 ? 126 : 127) : payload),
        ...extended,
        1,
        2,
        3,
        4,
        ...new Uint8Array(payload),
      ]);
    const clientFrames = new Uint8Array([...masked(5, []), ...masked(200, [0, 200])]);
    const told: number[] = [];
    recorder.subscribe((e) => e.type === "updated" && told.push(e.exchange.upgrade!.framesIn));
    feed((c) => o.request(c), clientFrames, 3);
    assert.ok(told.length > 0 && told[0] >= 0, "the live list hears of the counts before the end");
    const big = new Uint8Array(2 + 8 + 70000);
    big.set([0x82, 127, 0, 0, 0, 0, 0, 1, 0x11, 0x70]);
    feed((c) => o.response(c), new Uint8Array([0x81, 3, 97, 98, 99, ...big]), 4096);
    assert.deepEqual(exchange.upgrade, {
      framesIn: 2,
      framesOut: 2,
      bytesIn: clientFrames.length,
      bytesOut: 5 + big.length,
    });
    o.close();
    assert.equal(exchange.state, "done");
  });

  it("stops following bytes that are not HTTP, says so, and never throws", () => {
    const { recorder, observer: o } = observer();
    feed((c) => o.request(c), "GET / HTTP/1.1\r\n\r\n", 100);
    feed((c) => o.response(c), "SSH-2.0-OpenSSH\r\n\r\nmore", 100);
    feed((c) => o.response(c), "HTTP/1.1 200 OK\r\n\r\n", 100);
    const exchange = only(recorder);
    assert.match(exchange.error!, /stopped following.*status line/);
    o.close();
    assert.equal(exchange.state, "failed");
  });

  it("bounds a head it follows: a longer one stops the observation", () => {
    const { recorder, observer: o } = observer();
    feed((c) => o.request(c), "GET / HTTP/1.1\r\nX: " + "a".repeat(70_000), 8192);
    assert.equal(recorder.size, 0);
    feed((c) => o.request(c), "\r\n\r\n", 100);
    assert.equal(recorder.size, 0);
  });

  it("copies what it keeps: a pooled chunk reused after the call leaves the capture intact", () => {
    const was = poisonReleasedBuffers(true);
    try {
      const pool = new BufferPool(256, 2);
      const { recorder, observer: o } = observer();
      const send = (message: string, into: (c: Uint8Array) => void) => {
        const bytes = text.encode(message);
        const chunk = pool.acquire().subarray(0, bytes.length);
        chunk.set(bytes);
        into(chunk);
        releaseBytes(chunk); // back in the pool, filled with POISON
      };
      send("POST / HTTP/1.1\r\nContent-Le", (c) => o.request(c));
      send("ngth: 4\r\n\r\nbody", (c) => o.request(c));
      send("HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nyes", (c) => o.response(c));
      const exchange = only(recorder);
      assert.equal(decode(bodyBytes(exchange.requestBody)), "body");
      assert.equal(decode(bodyBytes(exchange.responseBody)), "yes");
      assert.ok(!JSON.stringify(exchange.requestHeaders).includes(String.fromCharCode(POISON)));
      assert.equal(pool.free, 1);
    } finally {
      poisonReleasedBuffers(was);
    }
  });
});

/** One exchange as generated: a request (length-framed or chunked body) and its response. */
const exchangeSpec = fc.record({
  method: fc.constantFrom("GET", "POST", "PUT"),
  path: fc.stringMatching(/^\/[a-z0-9/]{0,12}$/),
  body: fc.string({ maxLength: 40 }),
  chunked: fc.boolean(),
  status: fc.constantFrom(200, 201, 404, 500),
  response: fc.string({ maxLength: 40 }),
  responseChunked: fc.boolean(),
});

/** A body framed by its length, or chunked. */
function wire(chunked: boolean, body: string) {
  const bytes = text.encode(body);
  if (!chunked) return `Content-Length: ${bytes.length}\r\n\r\n${body}`;
  // Two chunks (the second may be empty and is then left out), then the last chunk.
  const half = Math.floor(body.length / 2);
  const parts = [body.slice(0, half), body.slice(half)].filter((p) => p.length > 0);
  const chunks = parts.map((p) => `${text.encode(p).length.toString(16)}\r\n${p}\r\n`).join("");
  return `Transfer-Encoding: chunked\r\n\r\n${chunks}0\r\n\r\n`;
}

describe("HttpObserver: properties", () => {
  it("any split of pipelined exchanges records the same requests, responses and bodies", () => {
    fc.assert(
      fc.property(
        fc.array(exchangeSpec, { minLength: 1, maxLength: 4 }),
        fc.array(fc.integer({ min: 1, max: 64 }), { minLength: 1, maxLength: 8 }),
        (specs, sizes) => {
          const requestTexts = specs.map((s) =>
            `${s.method} ${s.path} HTTP/1.1\r\nHost: a\r\n` + wire(s.chunked, s.body)
          );
          const responseTexts = specs.map((s) =>
            `HTTP/1.1 ${s.status} X\r\n` + wire(s.responseChunked, s.response)
          );
          const { recorder, observer: o } = observer();
          const req = text.encode(requestTexts.join(""));
          const res = text.encode(responseTexts.join(""));
          // Where each request ends and each response starts: a service answers a request once it
          // has it, so response i may flow only after request i's last byte (later requests,
          // pipelined, still interleave with it).
          const offsets = (texts: string[]) =>
            texts.map((_, i) => text.encode(texts.slice(0, i).join("")).length);
          const requestEnds = requestTexts.map((_, i) =>
            text.encode(requestTexts.slice(0, i + 1).join("")).length
          );
          const responseStarts = offsets(responseTexts);
          const responseLimit = (sent: number) => {
            let limit = 0;
            for (let i = 0; i < specs.length; i++) {
              if (requestEnds[i] <= sent) {
                limit = i + 1 < specs.length ? responseStarts[i + 1] : res.length;
              }
            }
            return limit;
          };
          // Pieces of varying sizes, the two directions interleaved as they come.
          let a = 0;
          let b = 0;
          for (let turn = 0; a < req.length || b < res.length; turn++) {
            const size = sizes[turn % sizes.length];
            if (a < req.length) o.request(req.slice(a, a += size));
            const limit = responseLimit(a);
            if (b < limit) o.response(res.slice(b, b = Math.min(limit, b + size)));
          }
          o.close();
          assert.deepEqual(
            recorder.list().map((e) => [
              e.method,
              e.target,
              e.status,
              e.state,
              decode(bodyBytes(e.requestBody)),
              decode(bodyBytes(e.responseBody)),
              e.error,
            ]),
            specs.map((s) => [s.method, s.path, s.status, "done", s.body, s.response, undefined]),
          );
        },
      ),
      { numRuns: 300 },
    );
  });
});
