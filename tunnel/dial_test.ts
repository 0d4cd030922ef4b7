import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { DialError, dialFailureOf, dialTcp, resetReasonForDial } from "./dial.ts";
import { ResetReason } from "./stream/reset_reasons.ts";
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
    await listener.close(); // resolves once nothing listens there
    await assert.rejects(
      dialTcp("127.0.0.1", port, 5_000),
      (error: unknown) => error instanceof DialError && error.reason === "refused",
    );
  });

  it("times out, and closes a connection that completes after the deadline", async () => {
    let finishConnect!: (t: Transport) => void;
    const late = new Promise<Transport>((resolve) => finishConnect = resolve);
    // A pending connect keeps the process alive, and the deadline's timer counts on it: so does
    // this stand-in.
    const pending = setTimeout(() => {}, 5_000);
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
    clearTimeout(pending);
    assert.equal(closed, true, "the late connection was closed");
  });
});

describe("resetReasonForDial", () => {
  it("maps each dial failure to its reset reason", () => {
    assert.equal(resetReasonForDial(new DialError("refused", "x")), ResetReason.DialRefused);
    assert.equal(resetReasonForDial(new DialError("timeout", "x")), ResetReason.DialTimeout);
    assert.equal(resetReasonForDial(new DialError("failed", "x")), ResetReason.DialFailed);
    assert.equal(
      resetReasonForDial(new DialError("unreachable", "x")),
      ResetReason.NetworkUnreachable,
    );
  });

  it("tells an unreachable network from other failures, in each runtime's words", async () => {
    const failures: [Error, string][] = [
      [Object.assign(new Error("connect ENETUNREACH"), { code: "ENETUNREACH" }), "unreachable"],
      [
        Object.assign(new Error("Network is unreachable"), { name: "NetworkUnreachable" }),
        "unreachable",
      ],
      [Object.assign(new Error("connect EHOSTUNREACH"), { code: "EHOSTUNREACH" }), "failed"],
    ];
    for (const [cause, reason] of failures) {
      await assert.rejects(
        dialTcp("10.0.0.1", 80, 5_000, () => Promise.reject(cause)),
        (error: unknown) => error instanceof DialError && error.reason === reason,
      );
    }
  });

  it("counts anything that is not a DialError as failed", () => {
    const notFound = Object.assign(new Error("getaddrinfo ENOTFOUND"), { code: "ENOTFOUND" });
    for (const error of [notFound, new TypeError("bad"), "a string", undefined]) {
      assert.equal(dialFailureOf(error), "failed");
      assert.equal(resetReasonForDial(error), ResetReason.DialFailed);
    }
  });

  it("names what dialTcp reports: a name that is not found is DialFailed, a refusal DialRefused", async () => {
    const notFound = () =>
      Promise.reject(Object.assign(new Error("getaddrinfo ENOTFOUND"), { code: "ENOTFOUND" }));
    const refused = () =>
      Promise.reject(Object.assign(new Error("connect ECONNREFUSED"), { code: "ECONNREFUSED" }));
    const denoRefused = () =>
      Promise.reject(Object.assign(new Error("refused"), { name: "ConnectionRefused" }));
    const reasons: number[] = [];
    const messages: string[] = [];
    for (const connect of [notFound, refused, denoRefused]) {
      const error = await dialTcp("host.invalid", 1, 5_000, connect).catch((e: Error) => e);
      reasons.push(resetReasonForDial(error));
      messages.push((error as Error).message);
    }
    // A refusal in words, the address once, whichever runtime said it.
    assert.deepEqual(messages, [
      "host.invalid:1: getaddrinfo ENOTFOUND",
      "host.invalid:1 refused the connection",
      "host.invalid:1 refused the connection",
    ]);
    assert.deepEqual(reasons, [
      ResetReason.DialFailed,
      ResetReason.DialRefused,
      ResetReason.DialRefused,
    ]);
  });
});
