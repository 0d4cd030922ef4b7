import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { EventSink } from "./event_sink.ts";
import type { TransportHandlers } from "../../protocol/transport.ts";

const hooks = { endDelivered() {}, handlerFailed() {} };

function handlers(wish: number): TransportHandlers {
  return { readLimit: () => wish, data() {}, drain() {}, end() {}, close() {} };
}

describe("EventSink.readLimit", () => {
  it("passes the handler's wish on, and 0 when it has none", () => {
    const sink = new EventSink(hooks);
    assert.equal(sink.readLimit(500, 1000), 0, "not started");
    sink.start(handlers(700));
    assert.equal(sink.readLimit(500, 1000), 700);
    const plain = new EventSink(hooks);
    plain.start({ data() {}, drain() {}, end() {}, close() {} });
    assert.equal(plain.readLimit(500, 1000), 0);
  });

  it("has none while data waits undelivered: the handler's framing has not seen it", () => {
    const sink = new EventSink(hooks);
    sink.start(handlers(700));
    sink.pause();
    sink.data(new Uint8Array(10));
    assert.equal(sink.readLimit(500, 1000), 0);
    sink.resume();
    assert.equal(sink.readLimit(500, 1000), 700);
  });
});
