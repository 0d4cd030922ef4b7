import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { DialError, dialTcp } from "./dial.ts";
import { listenTcp, memoryPair } from "../transport/mod.ts";
import type { Transport } from "../protocol/transport.ts";

describe("dialTcp", () => {
  it("connects to a listening port", async () => {
    const listener = await listenTcp({ hostname: "127.0.0.1", port: 0 }, (t) => t.close());
    try {
      const transport = await dialTcp("127.0.0.1", listener.port, 5_000);
      assert.match(transport.remoteAddress, /^127\.0\.0\.1:\d+$/);
      transport.close();
    } finally {
      listener.close();
    }
  });

  it("reports a refused connection as refused", async () => {
    const listener = await listenTcp({ hostname: "127.0.0.1", port: 0 }, () => {});
    const port = listener.port;
    listener.close(); // nothing listens there now
    await new Promise((r) => setTimeout(r, 20));
    await assert.rejects(
      dialTcp("127.0.0.1", port, 5_000),
      (error: unknown) => error instanceof DialError && error.reason === "refused",
    );
  });

  it("times out, and closes a connection that completes after the deadline", async () => {
    let finishConnect!: (t: Transport) => void;
    const late = new Promise<Transport>((resolve) => finishConnect = resolve);
    await assert.rejects(
      dialTcp("127.0.0.1", 9, 10, () => late),
      (error: unknown) => error instanceof DialError && error.reason === "timeout",
    );
    const [a] = memoryPair();
    let closed = false;
    a.close = () => closed = true;
    finishConnect(a);
    await late;
    await new Promise((r) => setTimeout(r, 0));
    assert.equal(closed, true, "the late connection was closed");
  });
});
