// tunnelmux against the real Go yamux libraries (hashicorp/yamux and go-yamux), both directions,
// over real TCP on 127.0.0.1: Go clients against our echo server, our client against Go servers.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { GO_PEERS, type GoPeerName, runGoClient, startGoServer } from "./go_peer.ts";
import { Session, type SessionConfig, type Stream, YamuxError } from "../protocol/mod.ts";
import { connectTcp, listenTcp } from "../transport/mod.ts";
import type { TransportListener } from "../protocol/transport.ts";
import { echoStream } from "../tunnel/echo.ts";
import { checkEcho, pattern, roundTrip } from "../tools/echo_check.ts";
import { waitFor } from "../testing/wait.ts";

const MiB = 1024 * 1024;
const CONFIG: Partial<SessionConfig> = { maxStreamWindow: 16 * MiB };

/** Our echo server, in this process, with every session it served. */
async function startOurEcho(): Promise<{ address: string; sessions: Session[]; close(): void }> {
  const sessions: Session[] = [];
  const listener: TransportListener = await listenTcp({ hostname: "127.0.0.1", port: 0 }, (t) => {
    sessions.push(new Session(t, { client: false, config: CONFIG, onStream: echoStream }));
  });
  return {
    address: `127.0.0.1:${listener.port}`,
    sessions,
    close() {
      listener.close();
      for (const session of sessions) session.destroy();
    },
  };
}

async function dial(port: number, onStream?: (stream: Stream) => void): Promise<Session> {
  const transport = await connectTcp({ hostname: "127.0.0.1", port });
  return new Session(transport, { client: true, config: CONFIG, onStream });
}

for (const peer of GO_PEERS) {
  describe(`${peer} client → tunnelmux echo server`, () => {
    let echo: Awaited<ReturnType<typeof startOurEcho>>;
    before(async () => echo = await startOurEcho());
    after(() => echo.close());

    const run = (scenario: string, ...args: string[]) =>
      runGoClient(peer, ["-connect", echo.address, "-scenario", scenario, ...args]);

    it("500 concurrent streams of random sizes up to 1 MiB", async () => {
      const summary = await run("concurrent", "-count", "500", "-max-size", String(MiB));
      assert.equal(summary.ok, true);
      assert.equal(summary.streams, 500);
    });

    it("half-close: the full echo arrives after the client's FIN", async () => {
      const summary = await run("halfclose", "-size", String(128 * 1024));
      assert.equal(summary.echo_after_fin_bytes, 128 * 1024);
    });

    it("RST mid-stream, then the session still echoes and answers pings", async () => {
      const summary = await run("rst", "-count", "3");
      assert.equal(summary.resets, 3);
      await waitFor(() =>
        echo.sessions.every((s) => s.stats.resetsReceived > 0 || s.state === "closed")
      );
    });

    it("ping: we echo the exact value", async () => {
      const summary = await run("ping", "-count", "5");
      assert.equal(summary.pings, 5);
    });

    it("GoAway from the client: no stream opened toward it afterwards", async () => {
      const summary = await run("goaway");
      assert.equal(summary.syn_after_goaway, 0);
    });

    it("one-byte dribble", async () => {
      const summary = await run("dribble", "-size", "4096");
      assert.equal(summary.writes, 4096);
    });

    it("large windows: 32 MiB full duplex with 16 MiB windows", async () => {
      const summary = await run(
        "largewindow",
        "-bytes",
        String(32 * MiB),
        "-window",
        String(16 * MiB),
      );
      assert.equal(summary.ok, true);
    });
  });

  describe(`tunnelmux client → ${peer} echo server`, () => {
    it("500 concurrent streams of random sizes up to 1 MiB", async () => {
      await withServer(peer, [], async (port) => {
        const session = await dial(port);
        const result = await checkEcho(session, {
          streams: 500,
          maxSize: MiB,
          concurrency: 500,
          seed: 7,
        });
        assert.equal(result.streams, 500);
        await session.close();
      });
    });

    it("half-close, one-byte dribble, large window and ping", async () => {
      await withServer(peer, ["-window", String(16 * MiB)], async (port) => {
        const session = await dial(port);
        const dribble = pattern(4096, 9);
        assert.deepEqual(
          await roundTrip(session.open(), dribble, 1),
          dribble,
          "one byte per write",
        );
        const big = pattern(32 * MiB, 3);
        assert.deepEqual(await roundTrip(session.open(), big, 256 * 1024), big);
        assert.ok(typeof await session.ping() === "number");
        await session.close();
      });
    });

    it("our reset mid-stream leaves the session working", async () => {
      await withServer(peer, [], async (port) => {
        const session = await dial(port);
        const victim = session.open();
        victim.onData = () => {};
        victim.write(pattern(100_000, 1));
        await waitFor(() => victim.bytesIn > 0);
        victim.reset();
        const payload = pattern(64 * 1024, 2);
        assert.deepEqual(await roundTrip(session.open(), payload), payload);
        await session.close();
      });
    });

    it("the server's reset reaches our stream as stream_reset", async () => {
      await withServer(peer, ["-rst-after", "1000"], async (port) => {
        const session = await dial(port);
        const failure = await roundTrip(session.open(), pattern(256 * 1024, 4)).then(
          () => undefined,
          (error) => error,
        );
        assert.ok(
          failure instanceof YamuxError && failure.code === "stream_reset",
          String(failure),
        );
        assert.deepEqual(await roundTrip(session.open(), pattern(500, 5)), pattern(500, 5));
        session.destroy();
      });
    });

    it("streams the server opens are accepted and echoed", async () => {
      await withServer(peer, ["-server-opens", "20"], async (port, server) => {
        const session = await dial(port, echoStream);
        const event = await server.waitForEvent((e) => e.event === "server-opens");
        assert.equal(event.ok, true, JSON.stringify(event));
        assert.equal(event.verified, 20);
        session.destroy();
      });
    });

    it("the server's GoAway: open() refuses afterwards, finished streams were intact", async () => {
      await withServer(peer, ["-goaway-after", "2"], async (port) => {
        const session = await dial(port);
        for (let i = 0; i < 2; i++) {
          assert.deepEqual(await roundTrip(session.open(), pattern(1000, i)), pattern(1000, i));
        }
        await waitFor(() => session.remoteGoAway || session.state === "closed");
        assert.throws(() => session.open(), YamuxError);
        session.destroy();
      });
    });
  });
}

type GoServer = Awaited<ReturnType<typeof startGoServer>>;

async function withServer(
  peer: GoPeerName,
  args: string[],
  body: (port: number, server: GoServer) => Promise<void>,
): Promise<void> {
  const server = await startGoServer(peer, args);
  try {
    await body(server.port, server);
  } finally {
    await server.close();
  }
}
