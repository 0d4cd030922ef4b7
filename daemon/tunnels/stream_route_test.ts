import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { Session } from "../../protocol/session.ts";
import type { Stream } from "../../protocol/stream.ts";
import { memoryPair } from "../../transport/memory.ts";
import { ResetReason } from "../../tunnel/stream/reset_reasons.ts";
import type { StreamHeader } from "../../tunnel/stream/stream_header.ts";
import { Logger } from "../../util/log.ts";
import type { Stream as YamuxStream } from "../../protocol/stream.ts";
import { StreamRoute } from "./stream_route.ts";
import { echoClient, QUIET, received } from "./_echo_client.ts";

/** A route that takes relayed visitors, as a client's own tunnel does. */
class Relaying extends StreamRoute {
  override relayed(stream: YamuxStream, remote: string, local: string, rest: Uint8Array): void {
    super.relayed(stream, remote, local, rest);
  }
}

const log = new Logger({ level: "error", format: "json", sink: () => {} });
/** Collects what `stream` receives until it ends. */
function streamText(stream: Stream): Promise<string> {
  const chunks: Uint8Array[] = [];
  return new Promise((resolve, reject) => {
    stream.onData = (c) => chunks.push(c.slice());
    stream.onEnd = () => resolve(Buffer.concat(chunks).toString());
    stream.onClose = (error) => error && reject(error);
  });
}

describe("StreamRoute", () => {
  it("sends a visitor as a stream with its header, pipes both ways and counts it", async () => {
    const { near: daemon, far: client, headers } = echoClient();
    const visitors = new StreamRoute("t-1", daemon, true, log);
    const [outside, inside] = memoryPair();
    const echoed = received(outside);
    visitors.visitor(inside);
    outside.write(new TextEncoder().encode("hello"));
    outside.end();
    assert.equal(await echoed, "hello");
    assert.equal(headers.length, 1);
    assert.equal(headers[0].kind, "visitor");
    const header = headers[0] as Extract<StreamHeader, { kind: "visitor" }>;
    assert.equal(header.tunnel, "t-1");
    assert.equal(header.remote, inside.remoteAddress);
    assert.equal(header.local, inside.localAddress);
    for (let i = 0; i < 100 && visitors.stats.active > 0; i++) {
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    assert.deepEqual(visitors.stats, { connections: 1, active: 0, errors: 0, aToB: 5, bToA: 5 });
    daemon.close();
    client.close();
  });

  it("open() gives the caller a stream to pipe itself, counted as a connection", async () => {
    const { near: daemon, far: client, headers } = echoClient();
    const visitors = new StreamRoute("t-2", daemon, true, log);
    const stream = visitors.open("192.0.2.1:5000", "127.0.0.1:80");
    assert.ok(stream);
    const text = streamText(stream);
    stream.write(new TextEncoder().encode("GET / HTTP/1.1\r\n\r\n"));
    stream.end();
    assert.equal(await text, "GET / HTTP/1.1\r\n\r\n");
    assert.deepEqual(headers.map((h) => h.kind === "visitor" && h.remote), ["192.0.2.1:5000"]);
    assert.equal(visitors.stats.connections, 1);
    daemon.close();
    client.close();
  });

  it("takes no visitors once stopped, and close() disconnects the connected ones", async () => {
    const { near: daemon, far: client } = echoClient();
    const visitors = new StreamRoute("t-3", daemon, true, log);
    const [outside, inside] = memoryPair();
    const ended = received(outside);
    visitors.visitor(inside);
    visitors.stopAccepting();
    assert.equal(visitors.healthy, false);
    assert.equal(visitors.open("a", "b"), undefined);
    const [late, lateInside] = memoryPair();
    const refused = received(late);
    visitors.visitor(lateInside);
    assert.equal(await refused, "");
    visitors.close();
    assert.equal(await ended, "");
    assert.equal(visitors.stats.connections, 1);
    daemon.close();
    client.close();
  });

  it("counts an error and refuses the visitor when the client's session cannot open a stream", async () => {
    const broken = {
      open(): Stream {
        throw new Error("session closed");
      },
    };
    const visitors = new StreamRoute("t-4", broken, true, log);
    const [outside, inside] = memoryPair();
    const closed = received(outside);
    visitors.visitor(inside);
    assert.equal(await closed, "");
    assert.equal(visitors.open("a", "b"), undefined);
    assert.deepEqual(visitors.stats, { connections: 0, active: 0, errors: 2, aToB: 0, bToA: 0 });
  });

  it("passes a relayed stream on to the client with the bytes read with its header", async () => {
    const { near: daemon, far: client, headers } = echoClient();
    const visitors = new Relaying("t-5", daemon, true, log);
    // The relayed stream comes from another node's session: a second pair stands for it.
    const [x, y] = memoryPair();
    const otherNode = new Session(x, { client: true, config: QUIET });
    const relayed: Promise<Stream> = new Promise((resolve) => {
      new Session(y, { client: false, config: QUIET, onStream: resolve });
    });
    const fromOtherNode = otherNode.open();
    fromOtherNode.write(new TextEncoder().encode("second"));
    const text = streamText(fromOtherNode);
    const stream = await relayed;
    visitors.relayed(
      stream,
      "198.51.100.7:4000",
      "127.0.0.1:8080",
      new TextEncoder().encode("first "),
    );
    fromOtherNode.end();
    assert.equal(await text, "first second");
    assert.deepEqual(headers.map((h) => h.kind === "visitor" && h.remote), ["198.51.100.7:4000"]);
    daemon.close();
    client.close();
    otherNode.close();
  });

  it("resets a relayed stream once it takes no visitors", async () => {
    const [x, y] = memoryPair();
    const otherNode = new Session(x, { client: true, config: QUIET });
    const relayed: Promise<Stream> = new Promise((resolve) => {
      new Session(y, { client: false, config: QUIET, onStream: resolve });
    });
    const fromOtherNode = otherNode.open();
    fromOtherNode.write(new Uint8Array([1]));
    const reset = new Promise<Error | undefined>((resolve) => fromOtherNode.onClose = resolve);
    const visitors = new Relaying("t-6", { open: () => assert.fail("not opened") }, true, log);
    visitors.stopAccepting();
    visitors.relayed(await relayed, "a", "b", new Uint8Array(0));
    const error = await reset as Error & { resetCode?: number };
    assert.equal(error?.resetCode, ResetReason.UnknownTunnel);
    otherNode.close();
  });
});
