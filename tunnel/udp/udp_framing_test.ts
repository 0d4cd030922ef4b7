import { describe, it } from "node:test";
import assert from "node:assert/strict";
import {
  DatagramDecoder,
  DatagramSender,
  encodeDatagram,
  MAX_UDP_DATAGRAM,
  UdpFramingError,
} from "./udp_framing.ts";
import { Session } from "../../protocol/session.ts";
import type { Stream } from "../../protocol/stream.ts";
import { memoryPair } from "../../transport/memory.ts";
import { waitFor } from "../../testing/wait.ts";
import { pattern } from "../../util/bytes/bytes.ts";

const SIZES = [0, 1, 2, 255, 256, 1200, 1472, 9000, 65_535 - 28, MAX_UDP_DATAGRAM];

function sessions(): { client: Session; server: Session; done: () => void } {
  const [a, b] = memoryPair();
  const client = new Session(a, { client: true, config: { enableKeepAlive: false } });
  const server = new Session(b, { client: false, config: { enableKeepAlive: false } });
  return { client, server, done: () => (client.destroy(), server.destroy()) };
}

/** Decodes every datagram arriving on `stream` into `into`. */
function receive(stream: Stream, into: Uint8Array[]): void {
  const decoder = new DatagramDecoder();
  stream.onData = (chunk) => into.push(...decoder.push(chunk));
}

describe("udp_framing", () => {
  it("keeps every datagram's boundaries whatever the chunking", () => {
    const framed = SIZES.map((size) => encodeDatagram(pattern(size, size)));
    const whole = new Uint8Array(framed.reduce((n, f) => n + f.length, 0));
    let at = 0;
    for (const f of framed) whole.set(f, (at += f.length) - f.length);
    for (const step of [1, 3, 1000, 70_000]) {
      const decoder = new DatagramDecoder();
      const out: Uint8Array[] = [];
      for (let i = 0; i < whole.length; i += step) {
        out.push(...decoder.push(whole.subarray(i, i + step)));
      }
      assert.deepEqual(out.map((d) => d.length), SIZES, `chunks of ${step}`);
      SIZES.forEach((size, i) => assert.deepEqual(out[i], pattern(size, size)));
      assert.equal(decoder.pendingBytes, 0);
    }
  });

  it("refuses a length above the largest datagram", () => {
    assert.throws(() => encodeDatagram(new Uint8Array(MAX_UDP_DATAGRAM + 1)), UdpFramingError);
    assert.throws(() => new DatagramDecoder().push(new Uint8Array([0xff, 0xff])), UdpFramingError);
    const sender = new DatagramSender({ write: () => true });
    assert.equal(sender.send(new Uint8Array(MAX_UDP_DATAGRAM + 1)), "too_large");
    assert.equal(sender.stats.dropped.too_large, 1);
    assert.equal(sender.stats.sent, 0);
  });

  it("carries datagrams of many sizes over a yamux stream", async () => {
    const { client, server, done } = sessions();
    try {
      const stream = client.open();
      const sender = new DatagramSender(stream);
      stream.onDrain = () => sender.drained();
      const accepted = await server.accept();
      const got: Uint8Array[] = [];
      receive(accepted, got);
      for (const size of SIZES) assert.notEqual(sender.send(pattern(size, size)), "queue_full");
      await waitFor(() => got.length === SIZES.length, "all datagrams");
      assert.deepEqual(got.map((d) => d.length), SIZES);
      SIZES.forEach((size, i) => assert.deepEqual(got[i], pattern(size, size)));
    } finally {
      done();
    }
  });

  it("a stalled flow drops and counts without blocking another flow", async () => {
    const { client, server, done } = sessions();
    try {
      const slow = client.open();
      const slowSender = new DatagramSender(slow);
      slow.onDrain = () => slowSender.drained();
      const slowAccepted = await server.accept();
      slowAccepted.pause(); // its reader never keeps up: the window runs out
      const fast = client.open();
      const fastSender = new DatagramSender(fast);
      fast.onDrain = () => fastSender.drained();
      const fastAccepted = await server.accept();
      const got: Uint8Array[] = [];
      receive(fastAccepted, got);

      const outcomes = new Map<string, number>();
      for (let i = 0; i < 400; i++) {
        const outcome = slowSender.send(pattern(60_000, i));
        outcomes.set(outcome, (outcomes.get(outcome) ?? 0) + 1);
      }
      assert.ok((outcomes.get("queue_full") ?? 0) > 0, `drops: ${JSON.stringify([...outcomes])}`);
      assert.equal(slowSender.stats.dropped.queue_full, outcomes.get("queue_full"));
      assert.ok(slowSender.queuedDatagrams > 0);

      for (let i = 0; i < 50; i++) assert.equal(fastSender.send(pattern(1000, i)), "sent");
      await waitFor(() => got.length === 50, "the other flow's datagrams");
      got.forEach((d, i) => assert.deepEqual(d, pattern(1000, i)));
      assert.equal(fastSender.stats.dropped.queue_full, 0);
    } finally {
      done();
    }
  });

  it("sends what was queued once the sink drains, in order", () => {
    const written: Uint8Array[] = [];
    let room = 1;
    const sender = new DatagramSender({ write: (c) => (written.push(c), --room > 0) }, {
      datagrams: 2,
    });
    assert.equal(sender.send(new Uint8Array([1])), "sent");
    assert.equal(sender.send(new Uint8Array([2])), "queued");
    assert.equal(sender.send(new Uint8Array([3])), "queued");
    assert.equal(sender.send(new Uint8Array([4])), "queue_full");
    room = 10;
    sender.drained();
    const decoder = new DatagramDecoder();
    assert.deepEqual(written.flatMap((c) => decoder.push(c)).map((d) => d[0]), [1, 2, 3]);
    assert.deepEqual(sender.stats, {
      sent: 3,
      sentBytes: 3,
      dropped: { queue_full: 1, too_large: 0 },
    });
  });
});
