// Reading a stream's header over a real yamux session pair (in memory): the callback form hands
// the header on in the turn its last bytes arrive, and the stream carries on from there in order.
import { afterEach, describe, it } from "node:test";
import assert from "node:assert/strict";
import { Session } from "../../protocol/session.ts";
import type { Stream } from "../../protocol/stream.ts";
import { memoryPair } from "../../transport/memory.ts";
import { cleanup, register } from "../../testing/cleanup.ts";
import { waitFor } from "../../testing/wait.ts";
import { concat } from "../../util/bytes/bytes.ts";
import { onStreamHeader, readStreamHeader } from "./read_stream_header.ts";
import { encodeStreamHeader, type StreamHeader, StreamHeaderError } from "./stream_header.ts";

const QUIET = { enableKeepAlive: false };
const text = (s: string) => new TextEncoder().encode(s);

/** A session pair; streams the far end accepts go to `onStream`. */
function pair(onStream: (stream: Stream) => void): Session {
  const [a, b] = memoryPair();
  const far = new Session(b, { client: false, config: QUIET, onStream });
  const near = new Session(a, { client: true, config: QUIET });
  register(() => {
    near.destroy();
    far.destroy();
  });
  return near;
}

describe("onStreamHeader", () => {
  afterEach(cleanup);

  it("hands on the header before a microtask queued by the same delivery runs", async () => {
    let read: { header: StreamHeader; rest: Uint8Array } | undefined;
    let microtaskRan = false;
    let ranBeforeCallback: boolean | undefined;
    const near = pair((stream) => {
      let queued = false;
      const onData = (chunk: Uint8Array) => {
        // Queued as the header's last bytes arrive: the callback must not wait for it.
        if (!queued) queueMicrotask(() => microtaskRan = true);
        queued = true;
        headerHandler!(chunk);
      };
      onStreamHeader(stream, 5_000, (error, result) => {
        assert.equal(error, undefined);
        read = result;
        ranBeforeCallback = microtaskRan;
      });
      // Wrap the handler it installed, to queue the microtask just before it runs.
      const headerHandler = stream.onData;
      stream.onData = onData;
    });
    const stream = near.open();
    const header: StreamHeader = { kind: "service", service: "box" };
    stream.write(concat([encodeStreamHeader(header), text("after")]));
    await waitFor(() => read !== undefined, "the header");
    assert.deepEqual(read!.header, header);
    assert.equal(new TextDecoder().decode(read!.rest), "after");
    assert.equal(ranBeforeCallback, false);
  });

  it("leaves the stream paused, its later bytes kept in order for the next handler", async () => {
    const got: Uint8Array[] = [];
    let ended = false;
    const near = pair((stream) => {
      onStreamHeader(stream, 5_000, (_error, result) => {
        got.push(result!.rest.slice());
        stream.onData = (chunk) => got.push(chunk.slice());
        stream.onEnd = () => ended = true;
        stream.resume();
      });
    });
    const stream = near.open();
    const encoded = encodeStreamHeader({ kind: "echo" });
    // The header in two pieces, then more bytes and the end in the same turn.
    stream.write(encoded.subarray(0, 3));
    await new Promise((resolve) => setTimeout(resolve, 0));
    stream.write(concat([encoded.subarray(3), text("ab")]));
    stream.write(text("cd"));
    stream.end();
    await waitFor(() => ended, "the end");
    assert.equal(new TextDecoder().decode(concat(got)), "abcd");
  });

  it("reports a bad header once, as a StreamHeaderError", async () => {
    const errors: unknown[] = [];
    const near = pair((stream) => {
      onStreamHeader(stream, 5_000, (error) => errors.push(error));
    });
    const stream = near.open();
    stream.write(new Uint8Array([0x7f, 1, 0, 2, 0x7b, 0x7d]));
    stream.end();
    await waitFor(() => errors.length > 0, "the error");
    assert.equal(errors.length, 1);
    assert.ok(errors[0] instanceof StreamHeaderError, String(errors[0]));
  });

  it("is what readStreamHeader resolves with, or rejects with", async () => {
    const settled: { value?: unknown; error?: unknown }[] = [];
    const near = pair((stream) => {
      readStreamHeader(stream, 5_000).then(
        (value) => settled.push({ value }),
        (error) => settled.push({ error }),
      );
    });
    const good = near.open();
    good.write(encodeStreamHeader({ kind: "control" }));
    await waitFor(() => settled.length === 1, "the first stream's header");
    const cut = near.open();
    cut.write(encodeStreamHeader({ kind: "control" }).subarray(0, 2));
    cut.end();
    await waitFor(() => settled.length === 2, "the second stream's end");
    const first = settled[0].value as { header: StreamHeader; rest: Uint8Array };
    assert.deepEqual(first.header, { kind: "control" });
    assert.equal(first.rest.length, 0);
    assert.ok(settled[1].error instanceof StreamHeaderError, String(settled[1].error));
  });
});
