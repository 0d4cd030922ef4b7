import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { bodyBytes, emptyBody, type Exchange, Recorder, type RecorderEvent } from "./recorder.ts";

function add(recorder: Recorder, target = "/"): Exchange {
  return recorder.add({
    tunnel: "app",
    local: "127.0.0.1:1",
    remote: "203.0.113.1:1",
    connection: recorder.connection(),
    method: "GET",
    target,
    version: "HTTP/1.1",
    requestHeaders: [["Host", "app"]],
    requestBody: emptyBody(),
    responseBody: emptyBody(),
    startedAt: Date.now(),
    state: "pending",
  });
}

describe("Recorder", () => {
  it("keeps at most maxExchanges, dropping the oldest and telling subscribers", () => {
    const recorder = new Recorder({ maxExchanges: 3 });
    const events: RecorderEvent["type"][] = [];
    const stop = recorder.subscribe((e) => events.push(e.type));
    for (let i = 1; i <= 5; i++) add(recorder, `/${i}`);
    assert.deepEqual(recorder.list().map((e) => e.target), ["/3", "/4", "/5"]);
    assert.equal(recorder.get(1), undefined);
    assert.equal(recorder.get(5)?.target, "/5");
    assert.equal(events.filter((t) => t === "evicted").length, 2);
    stop();
    assert.equal(recorder.subscribers, 0);
  });

  it("keeps at most maxBytes, and an evicted exchange captures nothing more", () => {
    const recorder = new Recorder({ bodyLimit: 1000, maxBytes: 4000 });
    const first = add(recorder);
    const chunk = new Uint8Array(1000).fill(1);
    recorder.capture(first, first.requestBody, chunk, 0, 1000);
    assert.equal(first.requestBody.kept, 1000);
    for (let i = 0; i < 4; i++) {
      const e = add(recorder);
      recorder.capture(e, e.responseBody, chunk, 0, 1000);
    }
    assert.ok(recorder.bytes <= recorder.maxBytes, `${recorder.bytes} > ${recorder.maxBytes}`);
    assert.equal(first.evicted, true);
    assert.equal(first.requestBody.kept, 0);
    recorder.capture(first, first.requestBody, chunk, 0, 1000);
    assert.equal(first.requestBody.kept, 0, "an evicted exchange keeps nothing");
    assert.equal(first.requestBody.size, 2000, "but still counts");
    const held = recorder.list().reduce((n, e) => n + e.bytes, 0);
    assert.equal(held, recorder.bytes);
  });

  it("cuts a body at the body limit, copying only what it keeps", () => {
    const recorder = new Recorder({ bodyLimit: 4, maxBytes: 1024 });
    const e = add(recorder);
    const source = new Uint8Array([1, 2, 3, 4, 5, 6]);
    recorder.capture(e, e.requestBody, source, 1, 6);
    source.fill(0);
    assert.deepEqual([...bodyBytes(e.requestBody)], [2, 3, 4, 5]);
    assert.equal(e.requestBody.size, 5);
    assert.equal(e.requestBody.truncated, true);
  });

  it("refuses limits that are not positive, or too small for one exchange", () => {
    assert.throws(() => new Recorder({ maxExchanges: 0 }), /maxExchanges/);
    assert.throws(() => new Recorder({ bodyLimit: 1.5 }), /bodyLimit/);
    assert.throws(() => new Recorder({ bodyLimit: 1000, maxBytes: 1500 }), /maxBytes/);
  });
});
