import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { LARGE_MESSAGE_SIZE, messageSizeFor } from "./message_size.ts";
import { MESSAGE_SIZE } from "./transport.ts";

describe("messageSizeFor", () => {
  it("sends large messages to a peer that accepts them, and no larger than it accepts", () => {
    assert.equal(messageSizeFor("1048576"), LARGE_MESSAGE_SIZE);
    assert.equal(messageSizeFor(" 300000 "), LARGE_MESSAGE_SIZE);
    assert.equal(messageSizeFor("100000"), 100_000);
    assert.equal(messageSizeFor("1024"), 1024);
  });

  it("keeps to 64 KiB toward a peer that said nothing usable", () => {
    for (const limit of [null, undefined, "", "abc", "0", "-5", "1e6", "12345678901", "1.5"]) {
      assert.equal(messageSizeFor(limit), MESSAGE_SIZE, String(limit));
    }
  });
});
