import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { serverUrlProblem } from "./server_url.ts";

describe("serverUrlProblem", () => {
  for (
    const ok of [
      "tcp://127.0.0.1:7000",
      "tls://example.com:7000",
      "ws://127.0.0.1:7080/tunnel",
      "wss://example.com/tunnel",
      "tcp://[::1]:7000",
    ]
  ) {
    it(`accepts ${ok}`, () => assert.equal(serverUrlProblem(ok), undefined));
  }
  const bad: [string, RegExp][] = [
    ["", /empty/],
    ["127.0.0.1:7000", /no scheme: write tcp:\/\/127\.0\.0\.1:7000/],
    ["localhost:7080", /ws:\/\/localhost:7080\/tunnel/],
    ["http://127.0.0.1:7080", /WebSocket listener is ws:\/\/127\.0\.0\.1:7080\/tunnel/],
    ["https://t.example.com/tunnel", /wss:\/\/t\.example\.com\/tunnel/],
    ["ftp://x:1", /unsupported scheme ftp:/],
    ["tcp://127.0.0.1", /no port/],
    ["not a url", /not a URL/],
  ];
  for (const [url, message] of bad) {
    it(`refuses ${JSON.stringify(url)}, saying what to write`, () => {
      assert.match(serverUrlProblem(url) ?? "", message);
    });
  }
});
