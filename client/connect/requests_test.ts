import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { PendingRequests } from "./requests.ts";
import { ClientError } from "../errors.ts";
import type { DaemonMessage } from "../../tunnel/control/control.ts";

/** A control channel that keeps what is sent. */
function fakeChannel() {
  const sent: Record<string, unknown>[] = [];
  return { sent, send: (message: unknown) => void sent.push(message as Record<string, unknown>) };
}

const LONG = 60_000;

describe("PendingRequests", () => {
  it("numbers each request and resolves it with the answer that carries its number", async () => {
    const requests = new PendingRequests();
    const channel = fakeChannel();
    const first = requests.send(channel, { type: "withdraw", service: "a" }, LONG);
    const second = requests.send(channel, { type: "unexpose", tunnel: "t1" }, LONG);
    assert.deepEqual(channel.sent, [
      { type: "withdraw", service: "a", id: 1 },
      { type: "unexpose", tunnel: "t1", id: 2 },
    ]);
    // Answered out of order: each goes to its own request.
    assert.equal(requests.answer({ type: "ok", id: 2 }), true);
    const exposed: DaemonMessage = {
      type: "exposed",
      id: 1,
      tunnel: "t9",
      bindHost: "0.0.0.0",
      port: 8080,
    };
    assert.equal(requests.answer(exposed), true);
    assert.deepEqual(await first, exposed);
    assert.deepEqual(await second, { type: "ok", id: 2 });
    assert.equal(requests.size, 0);
  });

  it("rejects with the daemon's error as a ClientError of its code", async () => {
    const requests = new PendingRequests();
    const reply = requests.send(fakeChannel(), { type: "offer", service: "box" }, LONG);
    requests.answer({ type: "error", id: 1, code: "not_allowed", message: "no offers for you" });
    await assert.rejects(reply, (error: unknown) => {
      assert.ok(error instanceof ClientError);
      assert.equal(error.code, "not_allowed");
      assert.match(error.message, /no offers for you/);
      return true;
    });
  });

  it("ignores answers to no waiting request: unknown numbers and notices", async () => {
    const requests = new PendingRequests();
    const reply = requests.send(fakeChannel(), { type: "withdraw", service: "a" }, LONG);
    assert.equal(requests.answer({ type: "ok", id: 7 }), false);
    assert.equal(requests.answer({ type: "tunnel_closed", tunnel: "t1", reason: "x" }), false);
    assert.equal(requests.size, 1);
    requests.answer({ type: "ok", id: 1 });
    await reply;
    assert.equal(requests.answer({ type: "ok", id: 1 }), false, "answered only once");
  });

  it("times out a request nobody answers, and forgets it", async () => {
    const requests = new PendingRequests();
    const reply = requests.send(fakeChannel(), { type: "withdraw", service: "a" }, 1);
    await assert.rejects(reply, (error: unknown) => {
      assert.ok(error instanceof ClientError);
      assert.equal(error.code, "timeout");
      assert.equal(error.message, "withdraw got no answer");
      return true;
    });
    assert.equal(requests.size, 0);
    assert.equal(requests.answer({ type: "ok", id: 1 }), false, "a late answer is dropped");
  });

  it("failAll rejects every waiting request with the given error", async () => {
    const requests = new PendingRequests();
    const channel = fakeChannel();
    const replies = [
      requests.send(channel, { type: "withdraw", service: "a" }, LONG),
      requests.send(channel, { type: "withdraw", service: "b" }, LONG),
    ];
    const lost = new ClientError("session_lost", "connection lost");
    requests.failAll(lost);
    for (const reply of replies) await assert.rejects(reply, (error) => error === lost);
    assert.equal(requests.size, 0);
  });
});
