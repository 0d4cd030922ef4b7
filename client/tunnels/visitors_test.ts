import { describe, it } from "node:test";
import assert from "node:assert/strict";
import {
  acceptIncoming,
  pipeToLocal,
  type VisitorInspector,
  type VisitorRoutes,
  withProxyHeader,
} from "./visitors.ts";
import { EACH_TURN, waitFor } from "../../testing/wait.ts";
import type { ClientError } from "../errors.ts";
import { Session } from "../../protocol/session.ts";
import type { Stream } from "../../protocol/stream.ts";
import { YamuxError } from "../../protocol/errors.ts";
import { memoryPair } from "../../transport/memory.ts";
import { listenTcp } from "../../transport/mod.ts";
import type { TransportListener } from "../../protocol/transport.ts";
import { decodeProxyHeader } from "../../tunnel/proxy_protocol/proxy_protocol_decoder.ts";
import { ResetReason } from "../../tunnel/stream/reset_reasons.ts";
import { encodeStreamHeader, type StreamHeader } from "../../tunnel/stream/stream_header.ts";
import { concat } from "../../util/bytes/bytes.ts";

const QUIET = { enableKeepAlive: false };
const text = new TextEncoder();

const VISITOR = {
  kind: "visitor",
  tunnel: "t1",
  remote: "203.0.113.7:50000",
  local: "198.51.100.1:8080",
} as const;

/**
 * A local service on 127.0.0.1: it reads until its client half-closes, then sends back what it
 * got and half-closes too, so a test sees both directions of the splice in one exchange.
 */
async function replayService(): Promise<TransportListener> {
  return await listenTcp({ hostname: "127.0.0.1", port: 0 }, (socket) => {
    const chunks: Uint8Array[] = [];
    socket.start({
      data: (chunk) => void chunks.push(chunk.slice()),
      drain: () => {},
      end: () => {
        socket.write(concat(chunks));
        socket.end();
      },
      close: () => {},
    });
  });
}

/** The daemon's side and the client's: streams the daemon opens go to `acceptIncoming`. */
function sessions(routes: VisitorRoutes) {
  const [a, b] = memoryPair();
  const client = new Session(a, {
    client: true,
    config: QUIET,
    onStream: (stream) => acceptIncoming(stream, routes),
  });
  const daemon = new Session(b, { client: false, config: QUIET });
  return { daemon, done: () => (daemon.destroy(), client.destroy()) };
}

/** Routes to one tunnel `t1` and one service `box`; dial errors are kept. */
function routes(
  tunnel: { local: string; proxyProtocol?: "v1" | "v2" } | undefined,
  service?: string,
): VisitorRoutes & { dialErrors: ClientError[] } {
  const dialErrors: ClientError[] = [];
  return {
    dialErrors,
    tunnel: (id) => id === "t1" ? tunnel : undefined,
    service: (name) => name === "box" ? service : undefined,
    deadlines: { connectTimeoutMs: 5_000, dialTimeoutMs: 5_000 },
    onDialError: (error) => void dialErrors.push(error),
  };
}

/** Everything the stream receives until it ends; rejects when it is reset. */
function received(stream: Stream): Promise<Uint8Array> {
  const chunks: Uint8Array[] = [];
  return new Promise((resolve, reject) => {
    stream.onData = (chunk) => void chunks.push(chunk.slice());
    stream.onEnd = () => resolve(concat(chunks));
    stream.onClose = (error) => error && reject(error);
  });
}

/** The reset reason that closed `stream`. */
async function resetReason(stream: Stream): Promise<number | undefined> {
  const error = await received(stream).then(() => undefined, (e: unknown) => e);
  assert.ok(error instanceof YamuxError, `reset, not ${error}`);
  return error.resetCode;
}

/** Opens a stream from the daemon with `header` (or raw bytes) and `payload`, then half-closes. */
function visit(daemon: Session, header: StreamHeader | Uint8Array, payload: string): Stream {
  const stream = daemon.open();
  stream.write(header instanceof Uint8Array ? header : encodeStreamHeader(header));
  if (payload) stream.write(text.encode(payload));
  stream.end();
  return stream;
}

describe("withProxyHeader", () => {
  for (const version of ["v1", "v2"] as const) {
    it(`${version}: names the visitor and the address it reached, then the early payload`, () => {
      const first = withProxyHeader(version, VISITOR, text.encode("GET /"));
      const proxy = decodeProxyHeader(first);
      assert.ok(proxy);
      assert.equal(proxy.version, version === "v1" ? 1 : 2);
      assert.equal(proxy.source, VISITOR.remote);
      assert.equal(proxy.destination, VISITOR.local);
      assert.equal(new TextDecoder().decode(first.subarray(proxy.length)), "GET /");
    });
  }
});

describe("acceptIncoming", () => {
  it("shows an HTTP tunnel's visitor to the inspector, bytes unchanged; a port's tunnel never", async () => {
    const service = await replayService();
    const seen: { visit: unknown; aToB: string; bToA: string; closed: number }[] = [];
    const inspector: VisitorInspector = {
      observe(visit) {
        const record = { visit, aToB: "", bToA: "", closed: 0 };
        seen.push(record);
        return {
          // Decoded at once: a chunk may be a pooled buffer reused after the call.
          aToB: (chunk) => void (record.aToB += new TextDecoder().decode(chunk)),
          bToA: (chunk) => void (record.bToA += new TextDecoder().decode(chunk)),
          close: () => void record.closed++,
        };
      },
    };
    const local = `127.0.0.1:${service.port}`;
    const http = sessions({
      ...routes({ local }),
      inspector,
      tunnel: () => ({ local, http: "app" }),
    });
    const port = sessions({ ...routes({ local }), inspector });
    try {
      const request = "GET / HTTP/1.1\r\nHost: app\r\n\r\n";
      const back = await received(visit(http.daemon, VISITOR, request));
      assert.equal(new TextDecoder().decode(back), request, "the bytes pass unchanged");
      await waitFor(() => seen[0]?.closed === 1, { ...EACH_TURN, message: "the observer closed" });
      assert.deepEqual(seen, [{
        visit: { tunnel: "app", local, remote: VISITOR.remote },
        aToB: request,
        bToA: request,
        closed: 1,
      }]);
      assert.equal(
        new TextDecoder().decode(await received(visit(port.daemon, VISITOR, "raw"))),
        "raw",
      );
      assert.equal(seen.length, 1, "a port's tunnel is not shown to the inspector");
    } finally {
      http.done();
      port.done();
      service.close();
    }
  });

  it("pipes a visitor to the tunnel's local service, both ways", async () => {
    const service = await replayService();
    const { daemon, done } = sessions(routes({ local: `127.0.0.1:${service.port}` }));
    try {
      const stream = visit(daemon, VISITOR, "hello");
      assert.equal(new TextDecoder().decode(await received(stream)), "hello");
    } finally {
      done();
      service.close();
    }
  });

  it("sends the PROXY header first when the tunnel asks for it", async () => {
    const service = await replayService();
    const local = `127.0.0.1:${service.port}`;
    const { daemon, done } = sessions(routes({ local, proxyProtocol: "v2" }));
    try {
      const got = await received(visit(daemon, VISITOR, "hello"));
      const proxy = decodeProxyHeader(got);
      assert.equal(proxy?.source, VISITOR.remote);
      assert.equal(new TextDecoder().decode(got.subarray(proxy!.length)), "hello");
    } finally {
      done();
      service.close();
    }
  });

  it("pipes a user of an offered service to its local service", async () => {
    const service = await replayService();
    const { daemon, done } = sessions(routes(undefined, `127.0.0.1:${service.port}`));
    try {
      const got = await received(visit(daemon, { kind: "service", service: "box" }, "hi box"));
      assert.equal(new TextDecoder().decode(got), "hi box");
    } finally {
      done();
      service.close();
    }
  });

  it("resets a stream whose serving throws, and the session goes on serving others", async () => {
    const service = await replayService();
    const local = `127.0.0.1:${service.port}`;
    let throwing = true;
    const base = routes(undefined);
    const { daemon, done } = sessions({
      ...base,
      tunnel: (id) => id === "t1" ? { local, http: "web" } : undefined,
      inspector: {
        observe() {
          if (throwing) throw new Error("an inspector that fails");
          return { aToB: () => {}, bToA: () => {}, close: () => {} };
        },
      },
    });
    try {
      assert.equal(await resetReason(visit(daemon, VISITOR, "lost")), ResetReason.BadHeader);
      throwing = false;
      const back = await received(visit(daemon, VISITOR, "still here"));
      assert.equal(new TextDecoder().decode(back), "still here");
    } finally {
      done();
      service.close();
    }
  });

  it("resets what it cannot serve, naming why", async () => {
    const { daemon, done } = sessions(routes({ local: "127.0.0.1:1" }, "127.0.0.1:1"));
    try {
      const cases: [StreamHeader | Uint8Array, number][] = [
        [{ ...VISITOR, tunnel: "gone" }, ResetReason.UnknownTunnel],
        [{ kind: "service", service: "nobody" }, ResetReason.UnknownService],
        [{ kind: "forward", target: "127.0.0.1:22" }, ResetReason.BadHeader],
        [new Uint8Array([9, 9, 0, 0]), ResetReason.BadHeader],
      ];
      const reasons = await Promise.all(
        cases.map(([header]) => resetReason(visit(daemon, header, ""))),
      );
      assert.deepEqual(reasons, cases.map(([, reason]) => reason));
    } finally {
      done();
    }
  });
});

describe("pipeToLocal", () => {
  it("a refused local service resets the stream DialRefused and reports local_dial_failed", async () => {
    const closed = await listenTcp({ hostname: "127.0.0.1", port: 0 }, (t) => t.close());
    const port = closed.port;
    await closed.close(); // nothing listens there now
    const visitorRoutes = routes({ local: `127.0.0.1:${port}` });
    const { daemon, done } = sessions(visitorRoutes);
    try {
      const reason = await resetReason(visit(daemon, VISITOR, "hello"));
      assert.equal(reason, ResetReason.DialRefused);
      assert.deepEqual(visitorRoutes.dialErrors.map((e) => e.code), ["local_dial_failed"]);
      // The address once, and what happened in words.
      assert.equal(
        visitorRoutes.dialErrors[0].message,
        `cannot reach the local service: 127.0.0.1:${port} refused the connection`,
      );
    } finally {
      done();
    }
  });

  it("writes `first` ahead of what the stream carries", async () => {
    const service = await replayService();
    const [a, b] = memoryPair();
    const ours = new Session(a, { client: true, config: QUIET });
    const piped: Promise<void>[] = [];
    const theirs = new Session(b, {
      client: false,
      config: QUIET,
      onStream: (stream) => {
        const deadlines = { dialTimeoutMs: 5_000 };
        const onDialError = () => {};
        const local = `127.0.0.1:${service.port}`;
        piped.push(pipeToLocal(stream, local, text.encode("first:"), { deadlines, onDialError }));
      },
    });
    try {
      const stream = ours.open();
      stream.write(text.encode("then"));
      stream.end();
      assert.equal(new TextDecoder().decode(await received(stream)), "first:then");
      await Promise.all(piped);
    } finally {
      ours.destroy();
      theirs.destroy();
      service.close();
    }
  });
});
