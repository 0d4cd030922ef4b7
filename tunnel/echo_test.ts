import { afterEach, beforeEach, describe, it } from "node:test";
import assert from "node:assert/strict";
import { echoStream } from "./echo.ts";
import { Session } from "../protocol/session.ts";
import { Flag, FrameType } from "../protocol/constants.ts";
import { frame, KeepingPeer } from "../protocol/_raw_peer.ts";
import { connectTcp, listenTcp } from "../transport/mod.ts";
import { pattern, sameBytes } from "../util/bytes/bytes.ts";
import { EACH_TURN, waitFor } from "../testing/wait.ts";
import { BufferPool, poisonReleasedBuffers } from "../util/bytes/buffer_pool.ts";

const QUIET = { enableKeepAlive: false };

describe("echoStream", () => {
  it("writes a pooled payload back where it arrived, its header over the old one", async () => {
    const peer = new KeepingPeer();
    const session = new Session(peer, { client: false, config: QUIET, onStream: echoStream });
    try {
      // The stream opens with a few bytes; its answer carries the ACK and the window's growth.
      peer.send(frame(FrameType.Data, Flag.SYN, 1, 10, pattern(10, 2)));
      await peer.waitFrames(1);
      // Then a socket's read as it lands in a pooled buffer: one frame of 40,000 bytes.
      const buffer = new BufferPool(64 * 1024, 2).acquire();
      const payload = pattern(40_000, 3);
      const wire = frame(FrameType.Data, 0, 1, payload.length, payload);
      buffer.set(wire, 32);
      const before = peer.framesOf(FrameType.Data, 0, 1).length;
      peer.handlers.data(buffer.subarray(32, 32 + wire.length));
      await waitFor(() => peer.framesOf(FrameType.Data, 0, 1).length > before, EACH_TURN);
      const echoed = peer.framesOf(FrameType.Data, 0, 1).at(-1)!;
      assert.deepEqual(new Uint8Array(echoed.payload), payload);
      const sent = peer.given.at(-1)!;
      assert.equal(sent.buffer, buffer.buffer, "echoed where it arrived: no copy");
      assert.equal(sent.byteOffset, 32, "over the decoded header");
    } finally {
      session.destroy();
      peer.peerClose();
    }
  });

  it("sends a control frame due first on its own, then the payload where it arrived", async () => {
    const peer = new KeepingPeer();
    const session = new Session(peer, { client: false, config: QUIET, onStream: echoStream });
    try {
      // The stream opens with 40,000 bytes in a pooled read; the session's first measuring ping
      // is due at the same time and goes ahead of the echo, in a write of its own.
      const buffer = new BufferPool(64 * 1024, 2).acquire();
      const payload = pattern(40_000, 4);
      const wire = frame(FrameType.Data, Flag.SYN, 1, payload.length, payload);
      buffer.set(wire, 32);
      peer.handlers.data(buffer.subarray(32, 32 + wire.length));
      await waitFor(() => peer.framesOf(FrameType.Data, Flag.ACK, 1).length > 0, EACH_TURN);
      const [ahead, echoed] = peer.given.slice(-2);
      assert.equal(ahead.length, 12, "the control frame alone");
      assert.equal(peer.framesOf(FrameType.Ping, Flag.SYN).length, 1);
      assert.equal(echoed.buffer, buffer.buffer, "echoed where it arrived: no copy");
      const [answer] = peer.framesOf(FrameType.Data, Flag.ACK, 1);
      assert.deepEqual(new Uint8Array(answer.payload), payload);
    } finally {
      session.destroy();
      peer.peerClose();
    }
  });

  describe("over TCP, with released buffers poisoned", () => {
    let wasPoisoning = false;
    beforeEach(() => wasPoisoning = poisonReleasedBuffers(true));
    afterEach(() => poisonReleasedBuffers(wasPoisoning));

    it("gives 6 MiB back intact and half-closes after it", async () => {
      const sessions: Session[] = [];
      const listener = await listenTcp({ hostname: "127.0.0.1", port: 0 }, (transport) => {
        sessions.push(
          new Session(transport, { client: false, config: QUIET, onStream: echoStream }),
        );
      });
      try {
        const client = new Session(
          await connectTcp({ hostname: "127.0.0.1", port: listener.port }),
          {
            client: true,
            config: QUIET,
          },
        );
        sessions.push(client);
        const sent = pattern(6 * 1024 * 1024, 5);
        const stream = client.open();
        const received = new Uint8Array(sent.length);
        let at = 0;
        const echoed = new Promise<void>((resolve, reject) => {
          stream.onData = (chunk) => {
            if (at + chunk.length > received.length) reject(new Error("more bytes than sent"));
            received.set(chunk, at);
            at += chunk.length;
          };
          stream.onEnd = () => resolve();
          stream.onClose = (error) => error && reject(error);
        });
        let offset = 0;
        const pump = () => {
          while (offset < sent.length) {
            const piece = sent.subarray(offset, offset + 20 * 1024);
            offset += piece.length;
            if (!stream.write(piece)) return;
          }
          stream.end();
        };
        stream.onDrain = pump;
        pump();
        await echoed;
        assert.equal(at, sent.length);
        assert.ok(sameBytes(received, sent), "echoed intact");
      } finally {
        for (const session of sessions) session.destroy();
        listener.close();
      }
    });
  });
});
