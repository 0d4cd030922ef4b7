import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { nextStreamState, STREAM_TRANSITIONS, StreamState } from "./stream_state.ts";

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
