import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { Lifecycle } from "./lifecycle.ts";
import { SESSION_TRANSITIONS } from "../protocol/session.ts";
import { nextStreamState, STREAM_TRANSITIONS, StreamState } from "../protocol/stream_state.ts";

describe("Lifecycle", () => {
  it("moves only along the table and tells listeners", () => {
    const seen: string[] = [];
    const machine = new Lifecycle<"a" | "b" | "c", "next" | "reset">(
      { a: { next: "b" }, b: { next: "c", reset: "a" }, c: {} },
      "a",
    );
    machine.onTransition((to, from, event) => seen.push(`${from}-${event}->${to}`));
    assert.equal(machine.can("reset"), false);
    assert.equal(machine.fire("reset"), false);
    assert.equal(machine.state, "a");
    assert.equal(machine.fire("next"), true);
    assert.equal(machine.fire("reset"), true);
    assert.deepEqual(seen, ["a-next->b", "b-reset->a"]);
  });

  it("session lifecycle: open → draining → closed, and closed is final", () => {
    const session = new Lifecycle(SESSION_TRANSITIONS, "open");
    assert.equal(session.fire("go_away"), true);
    assert.equal(session.state, "draining");
    assert.equal(session.fire("go_away"), false);
    assert.equal(session.fire("close"), true);
    assert.equal(session.fire("close"), false);
    assert.equal(session.state, "closed");
  });
});

describe("stream states", () => {
  it("has hashicorp's eight states", () => {
    assert.equal(Object.keys(STREAM_TRANSITIONS).length, 8);
  });

  it("opener: SYN, ACK, FIN both ways → closed", () => {
    let state = StreamState.Init;
    for (const event of ["send_syn", "recv_ack", "send_fin", "recv_fin"] as const) {
      state = nextStreamState(state, event)!;
    }
    assert.equal(state, StreamState.Closed);
  });

  it("acceptor: peer SYN+FIN in one frame, then our ACK and FIN", () => {
    let state = nextStreamState(StreamState.Init, "recv_syn")!;
    state = nextStreamState(state, "recv_fin")!;
    assert.equal(state, StreamState.RemoteClose);
    state = nextStreamState(state, "send_ack")!;
    state = nextStreamState(state, "send_fin")!;
    assert.equal(state, StreamState.Closed);
  });

  it("reset is reachable from every live state and final", () => {
    for (const state of Object.values(StreamState)) {
      const terminal = state === StreamState.Closed || state === StreamState.Reset;
      assert.equal(
        nextStreamState(state, "reset"),
        terminal ? undefined : StreamState.Reset,
        state,
      );
    }
  });
});
