import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { ControlChannel, MAX_CONTROL_MESSAGE } from "./control_channel.ts";
import { readStreamHeader } from "../stream/read_stream_header.ts";
import { encodeStreamHeader, StreamHeaderError } from "../stream/stream_header.ts";
import { Session } from "../../protocol/session.ts";
import type { Stream } from "../../protocol/stream.ts";
import { memoryPair } from "../../transport/memory.ts";

function sessions(onStream: (stream: Stream) => void) {
  const [a, b] = memoryPair({ split: { seed: 3, maxChunk: 5 } });
  const config = { enableKeepAlive: false };
  const client = new Session(a, { client: true, config });
  const server = new Session(b, { client: false, config, onStream });
  return { client, done: () => (client.destroy(), server.destroy()) };
}

/** A length-prefixed control message, as ControlChannel frames it. */
function framed(message: unknown): Uint8Array {
  const body = new TextEncoder().encode(JSON.stringify(message));
  const out = new Uint8Array(4 + body.length);
  new DataView(out.buffer).setUint32(0, body.length);
  out.set(body, 4);
  return out;
}

describe("ControlChannel", () => {
  it("delivers data read with the header, then what the paused stream buffered, in order, only once started", async () => {
    const got: unknown[] = [];
    let server: Stream | undefined;
    const { client, done } = sessions((stream) => {
      server = stream;
      stream.pause(); // as readStreamHeader leaves it
    });
    try {
      const stream = client.open();
      stream.write(framed({ n: 2 }));
      stream.write(framed({ n: 3 }));
      stream.end();
      // Let everything arrive and wait, buffered, in the paused server stream.
      for (let i = 0; i < 50 && (server?.bufferedBytes ?? 0) < 2 * framed({ n: 2 }).length; i++) {
        await new Promise((r) => setTimeout(r, 1));
      }
      assert.ok(server, "the server saw the stream");
      const channel = new ControlChannel(server, framed({ n: 1 }));
      const closed = new Promise<Error | undefined>((resolve) => channel.onClose = resolve);
      channel.onMessage = (value) => got.push(value);
      assert.deepEqual(got, [], "nothing is read before start()");
      channel.start();
      assert.deepEqual(got, [{ n: 1 }, { n: 2 }, { n: 3 }], "delivered in order, at once");
      assert.equal(await closed, undefined, "the end is reported to the handler set before");
    } finally {
      done();
    }
  });

  it("carries messages both ways, across arbitrary chunk splits", async () => {
    const got: unknown[] = [];
    let serverChannel: ControlChannel | undefined;
    const { client, done } = sessions((stream) => {
      serverChannel = new ControlChannel(stream);
      serverChannel.onMessage = (value) => serverChannel!.send({ echo: value });
      serverChannel.start();
    });
    try {
      const channel = new ControlChannel(client.open());
      const all = new Promise<void>((resolve) => {
        channel.onMessage = (value) => {
          got.push(value);
          if (got.length === 3) resolve();
        };
      });
      channel.start();
      channel.send({ type: "hello", n: 1 });
      channel.send({ text: "ü".repeat(1000) });
      channel.send([1, 2, 3]);
      await all;
      assert.deepEqual(got, [{ echo: { type: "hello", n: 1 } }, {
        echo: { text: "ü".repeat(1000) },
      }, {
        echo: [1, 2, 3],
      }]);
    } finally {
      done();
    }
  });

  it("a declared length above the limit ends the channel and resets the stream", async () => {
    let closed: Promise<Error | undefined> | undefined;
    const { client, done } = sessions((stream) => {
      const channel = new ControlChannel(stream);
      closed = new Promise((resolve) => channel.onClose = resolve);
      channel.start();
    });
    try {
      const stream = client.open();
      const reset = new Promise<Error | undefined>((resolve) => stream.onClose = resolve);
      const frame = new Uint8Array(4);
      new DataView(frame.buffer).setUint32(0, MAX_CONTROL_MESSAGE + 1);
      stream.write(frame);
      stream.onData = () => {};
      assert.match(String(await reset), /reset/);
      assert.match(String(await closed), /too large/);
    } finally {
      done();
    }
  });
});

describe("readStreamHeader", () => {
  it("returns the header and the payload that came with it, leaving the rest in the stream", async () => {
    let result: Promise<{ header: unknown; rest: Uint8Array; stream: Stream }> | undefined;
    const { client, done } = sessions((stream) => {
      result = readStreamHeader(stream, 5_000).then((r) => ({ ...r, stream }));
    });
    try {
      const stream = client.open();
      const header = encodeStreamHeader({ kind: "forward", target: "db:5432" });
      const first = new Uint8Array([...header, 1, 2, 3]);
      stream.write(first);
      stream.write(new Uint8Array([4, 5]));
      stream.end();
      await new Promise((r) => setTimeout(r, 10));
      const { header: got, rest, stream: serverStream } = await result!;
      assert.deepEqual(got, { kind: "forward", target: "db:5432" });
      const tail: number[] = [...rest];
      await new Promise<void>((resolve) => {
        serverStream.onData = (chunk) => tail.push(...chunk);
        serverStream.onEnd = resolve;
        serverStream.resume();
      });
      assert.deepEqual(tail, [1, 2, 3, 4, 5]);
    } finally {
      done();
    }
  });

  it("rejects a bad header, an early end, and a silent stream after the timeout", async () => {
    const results = new Map<number, Promise<unknown>>();
    const { client, done } = sessions((stream) => {
      results.set(stream.id, readStreamHeader(stream, 50).catch((error) => error));
    });
    try {
      client.open().write(new Uint8Array([9, 9, 9, 9]));
      client.open().end();
      client.open().write(new Uint8Array([1])); // a first byte, then silence
      await new Promise((r) => setTimeout(r, 20));
      const [bad, ended, silent] = await Promise.all([1, 3, 5].map((id) => results.get(id)));
      assert.ok(bad instanceof StreamHeaderError && /version/.test(bad.message));
      assert.ok(ended instanceof StreamHeaderError && /ended/.test(ended.message));
      assert.ok(silent instanceof StreamHeaderError && /within 50 ms/.test(silent.message));
    } finally {
      done();
    }
  });
});
