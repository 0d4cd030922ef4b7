import { describe, it } from "node:test";
import assert from "node:assert/strict";
import * as yamux from "./mod.ts";

describe("protocol/mod.ts", () => {
  it("exports the engine's surface by name and keeps the codec and decoder inside", () => {
    assert.deepEqual(Object.keys(yamux).sort(), [
      "DEFAULT_SESSION_CONFIG",
      "GoAwayCode",
      "INITIAL_STREAM_WINDOW",
      "PROTOCOL_VERSION",
      "SESSION_TRANSITIONS",
      "STREAM_TRANSITIONS",
      "Session",
      "Stream",
      "YamuxError",
      "goAwayCodeName",
      "streamWindowConfig",
      "toReadable",
      "toWritable",
    ]);
  });
});
