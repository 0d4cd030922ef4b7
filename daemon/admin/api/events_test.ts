// GET /v1/events: the daemon's events as SSE, resuming with Last-Event-ID, the reset message when
// events were lost, slow readers cut off, and no subscriber left behind by a closed stream.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { Daemon } from "../../daemon.ts";
import { validateConfig } from "../../config/mod.ts";
import { Logger } from "../../../util/log.ts";
import { connect } from "../../../client/client.ts";
import { listenTcp } from "../../../transport/mod.ts";
import type { TransportListener } from "../../../protocol/transport.ts";
import { connect as netConnect } from "node:net";
import { eventRing, eventsApi, type EventsApiOptions, eventStream } from "./events.ts";
import { EventRing } from "./event_ring.ts";
import { EventFeed } from "../../events.ts";
import { assertError, fakeCluster, served } from "./_fake_deps.ts";
import { serveHttp } from "../../../transport/http/serve.ts";
import { sleep, waitFor } from "../../../testing/wait.ts";

const TOKEN = "events-test-token-0123456789abcdef";

/** One SSE message; `comment` set for a comment-only block. */
interface Message {
  id?: string;
  event?: string;
  data?: Record<string, unknown>;
  comment?: string;
}

/** Rejects if `promise` takes longer than 10 s: a hang fails the test instead of stalling it. */
function bounded<T>(promise: Promise<T>, what: string): Promise<T> {
  let timer: ReturnType<typeof setTimeout>;
  const limit = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: nothing within 10 s`)), 10_000);
  });
  return Promise.race([promise, limit]).finally(() => clearTimeout(timer));
}

/** Reads SSE messages from a response body, one block at a time. */
class SseReader {
  readonly #reader: ReadableStreamDefaultReader<Uint8Array>;
  readonly #decoder = new TextDecoder();
  #buffer = "";

  constructor(response: Response) {
    assert.equal(response.status, 200);
    assert.match(response.headers.get("content-type") ?? "", /^text\/event-stream/);
    this.#reader = response.body!.getReader();
  }

  /** The next block (comment or message); undefined when the stream ended. */
  async next(): Promise<Message | undefined> {
    while (!this.#buffer.includes("\n\n")) {
      const { done, value } = await bounded(this.#reader.read(), "SSE read");
      if (done) return undefined;
      this.#buffer += this.#decoder.decode(value, { stream: true });
    }
    const end = this.#buffer.indexOf("\n\n");
    const block = this.#buffer.slice(0, end);
    this.#buffer = this.#buffer.slice(end + 2);
    const message: Message = {};
    for (const line of block.split("\n")) {
      if (line.startsWith(":")) message.comment = line.slice(1).trim();
      else if (line.startsWith("id: ")) message.id = line.slice(4);
      else if (line.startsWith("event: ")) message.event = line.slice(7);
      else if (line.startsWith("data: ")) {
        assert.equal(message.data, undefined, "one data line per message");
        message.data = JSON.parse(line.slice(6));
      } else assert.fail(`unexpected SSE line ${JSON.stringify(line)}`);
    }
    return message;
  }

  /** The next message that is not a comment. */
  async event(): Promise<Message> {
    for (;;) {
      const message = await this.next();
      assert.ok(message, "the stream ended");
      if (message.comment === undefined) return message;
    }
  }

  /** Cancels the stream, as a client going away does. */
  cancel(): Promise<void> {
    return this.#reader.cancel();
  }
}

/** A daemon that is never started: enough to publish events by hand. */
function idleDaemon(): Daemon {
  const result = validateConfig({
    listen: { tcp: "127.0.0.1:0", websocket: null, admin: null },
    clients: [{ name: "alice", token: TOKEN }],
  });
  const log = new Logger({ level: "error", format: "json", sink: () => {} });
  return new Daemon(result.config!, { log });
}

function withApi(options: EventsApiOptions = {}) {
  const daemon = idleDaemon();
  const app = eventsApi(daemon, options);
  return { daemon, app, ring: eventRing(daemon) };
}

describe("GET /v1/events (daemon in process)", () => {
  let local: TransportListener;
  let daemon: Daemon;
  let app: ReturnType<typeof eventsApi>;

  before(async () => {
    local = await listenTcp({ hostname: "127.0.0.1", port: 0 }, (t) => t.close());
    const result = validateConfig({
      listen: { tcp: "127.0.0.1:0", websocket: null, admin: null },
      clients: [{ name: "alice", token: TOKEN, expose: { ports: [0, "20000-32767"] } }],
    });
    assert.deepEqual(result.errors, []);
    const log = new Logger({ level: "error", format: "json", sink: () => {} });
    daemon = new Daemon(result.config!, { log });
    app = eventsApi(daemon);
    await daemon.start();
  });
  after(() => {
    daemon.stop();
    local.close();
  });

  it("streams session_opened then tunnel_up with ids, resumes after Last-Event-ID", async () => {
    const ring = eventRing(daemon);
    const baseline = ring.subscriberCount;
    const live = new SseReader(await app.request("/v1/events"));
    assert.equal(ring.subscriberCount, baseline + 1);
    const client = await connect(`tcp://${daemon.addresses.tcp}`, {
      token: TOKEN,
      reconnect: false,
    });
    try {
      const tunnel = await client.expose({ local: `127.0.0.1:${local.port}` });
      const opened = await live.event();
      const up = await live.event();
      assert.equal(opened.event, "session_opened");
      assert.equal(opened.data?.type, "session_opened");
      assert.equal(opened.data?.client, "alice");
      assert.equal(opened.data?.transport, "tcp");
      assert.equal(typeof opened.data?.time, "number");
      assert.equal(up.event, "tunnel_up");
      assert.equal(up.data?.tunnel, tunnel.id);
      const first = Number(opened.id);
      assert.ok(first >= 1);
      assert.equal(up.id, String(first + 1));
      await live.cancel();
      assert.equal(ring.subscriberCount, baseline, "a cancelled stream leaves no subscriber");

      await tunnel.close(); // tunnel_down, while nobody listens
      const resumed = new SseReader(
        await app.request("/v1/events", { headers: { "Last-Event-ID": String(first) } }),
      );
      const viaQuery = new SseReader(await app.request(`/v1/events?lastEventId=${first + 1}`));
      try {
        assert.deepEqual(
          [await resumed.event(), await resumed.event()].map((m) => [m.id, m.event]),
          [
            [String(first + 1), "tunnel_up"],
            [String(first + 2), "tunnel_down"],
          ],
        );
        assert.deepEqual((await viaQuery.event()).id, String(first + 2));
        await client.close(); // then session_closed arrives live on both, next in line
        for (const reader of [resumed, viaQuery]) {
          const closed = await reader.event();
          assert.equal(closed.event, "session_closed");
          assert.equal(closed.id, String(first + 3));
        }
      } finally {
        await resumed.cancel();
        await viaQuery.cancel();
      }
      assert.equal(ring.subscriberCount, baseline);
    } finally {
      await client.close();
    }
  });
});

describe("GET /v1/events (event history)", () => {
  it("starts with event: reset when the asked-for id fell out of the ring", async () => {
    const { daemon, app } = withApi({ ringCapacity: 5 });
    for (let n = 1; n <= 12; n++) daemon.events.publish("drain", { n });
    const reader = new SseReader(
      await app.request("/v1/events", { headers: { "Last-Event-ID": "2" } }),
    );
    try {
      const reset = await reader.event();
      assert.equal(reset.event, "reset");
      assert.equal(reset.id, undefined, "a reset does not move the client's last id");
      assert.equal(reset.data?.reason, "events_lost");
      assert.equal(reset.data?.firstId, 8);
      const ids = [];
      for (let i = 0; i < 5; i++) ids.push((await reader.event()).id);
      assert.deepEqual(ids, ["8", "9", "10", "11", "12"]);
    } finally {
      await reader.cancel();
      daemon.stop();
    }
  });

  it("resets for an id this daemon never issued, and replays all for lastEventId=0", async () => {
    const { daemon, app } = withApi({ ringCapacity: 5 });
    daemon.events.publish("drain", {});
    const future = new SseReader(await app.request("/v1/events?lastEventId=99"));
    const all = new SseReader(await app.request("/v1/events?lastEventId=0"));
    try {
      const reset = await future.event();
      assert.deepEqual([reset.event, reset.data?.reason], ["reset", "unknown_id"]);
      assert.equal((await future.event()).id, "1");
      const first = await all.event();
      assert.deepEqual([first.event, first.id], ["drain", "1"]);
    } finally {
      await future.cancel();
      await all.cancel();
      daemon.stop();
    }
  });

  it("answers 400 to a Last-Event-ID that is not a number", async () => {
    const { daemon, app, ring } = withApi();
    const response = await app.request("/v1/events", { headers: { "Last-Event-ID": "abc" } });
    assert.equal(response.status, 400);
    assert.equal((await response.json()).error.code, "bad_request");
    assert.equal(ring.subscriberCount, 0);
    daemon.stop();
  });

  it("disconnects a reader that falls more than maxLag events behind", async () => {
    const { daemon, app, ring } = withApi({ maxLag: 3 });
    const response = await app.request("/v1/events");
    assert.equal(ring.subscriberCount, 1);
    for (let n = 0; n < 4; n++) daemon.events.publish("drain", { n });
    assert.equal(ring.subscriberCount, 0, "cut off at once, nothing buffered for it");
    const reader = response.body!.getReader();
    await assert.rejects(async () => {
      for (let i = 0; i < 100; i++) if ((await bounded(reader.read(), "read")).done) return;
    });
    daemon.stop();
  });

  it("sends heartbeat comments on an idle stream", async () => {
    const { daemon, app, ring } = withApi({ heartbeatMs: 10 });
    const reader = new SseReader(await app.request("/v1/events"));
    try {
      assert.equal((await reader.next())?.comment, "tunnelmux events");
      assert.equal((await reader.next())?.comment, "heartbeat");
    } finally {
      await reader.cancel();
      daemon.stop();
    }
    assert.equal(ring.subscriberCount, 0);
  });

  it("ends open streams when the daemon stops", async () => {
    const { daemon, app, ring } = withApi();
    const reader = new SseReader(await app.request("/v1/events"));
    daemon.events.publish("drain", {});
    assert.equal((await reader.event()).event, "drain");
    daemon.stop();
    let end: Message | undefined = { comment: "" };
    for (let i = 0; i < 10 && end !== undefined; i++) end = await reader.next();
    assert.equal(end, undefined);
    assert.equal(ring.subscriberCount, 0);
  });
});

describe("GET /v1/events (over fakes)", () => {
  /** The feed over bare event feeds: this daemon's, and the cluster's when `clustered`. */
  function feedOver(clustered: boolean) {
    const events = new EventFeed();
    const cluster = clustered ? fakeCluster() : undefined;
    let stop!: () => void;
    const stopped = new Promise<void>((resolve) => stop = resolve);
    const app = served(eventsApi({ events, stopped, cluster }));
    return { events, cluster, stop, app };
  }

  it("answers 400 to a bad resume id or scope, and to scope=cluster on a single node", async () => {
    const { app, stop } = feedOver(false);
    await assertError(app, "/v1/events?lastEventId=-1", 400, "bad_request");
    await assertError(app, "/v1/events?lastEventId=1e3", 400, "bad_request");
    await assertError(app, "/v1/events?scope=everything", 400, "bad_request");
    const message = await assertError(app, "/v1/events?scope=cluster", 400, "bad_request");
    assert.match(message, /not in a cluster/);
    stop();
  });

  it("follows every node's events with scope=cluster, and only this node's without", async () => {
    const { events, cluster, stop, app } = feedOver(true);
    cluster!.events.publish("tunnel_up", { tunnel: "t-1", node: "n2" });
    events.publish("drain", { sessions: 0 });
    const everyNode = new SseReader(await app.request("/v1/events?scope=cluster&lastEventId=0"));
    const thisNode = new SseReader(await app.request("/v1/events?lastEventId=0"));
    try {
      const remote = await everyNode.event();
      assert.deepEqual([remote.event, remote.id, remote.data?.node], ["tunnel_up", "1", "n2"]);
      const local = await thisNode.event();
      assert.deepEqual([local.event, local.id], ["drain", "1"]);
    } finally {
      stop();
    }
    // The daemon stopping ends both streams.
    for (const reader of [everyNode, thisNode]) {
      let end: Message | undefined = { comment: "" };
      for (let i = 0; i < 10 && end !== undefined; i++) end = await reader.next();
      assert.equal(end, undefined);
    }
  });
});

describe("GET /v1/events (what a reader costs)", () => {
  /** An abort signal that counts the listeners it holds. */
  function countedSignal() {
    const controller = new AbortController();
    const signal = controller.signal;
    const listeners = new Set<unknown>();
    const add = signal.addEventListener.bind(signal);
    const remove = signal.removeEventListener.bind(signal);
    signal.addEventListener = (type: string, listener: unknown, options?: unknown) => {
      listeners.add(listener);
      add(type, listener as EventListener, options as AddEventListenerOptions);
    };
    signal.removeEventListener = (type: string, listener: unknown, options?: unknown) => {
      listeners.delete(listener);
      remove(type, listener as EventListener, options as EventListenerOptions);
    };
    return { controller, signal, listeners: () => listeners.size };
  }

  it("leaves nothing behind once a stream ends: no subscriber, no listener on its stop signal", async () => {
    const ring = new EventRing(100);
    const push = () => ring.push({ type: "drain", time: Date.now(), fields: {} });
    const options = { maxLag: 2, heartbeatMs: 60_000 };

    // Cancelled by its reader.
    const cancelled = countedSignal();
    const first = eventStream(ring, { after: ring.lastId }, { ...options, ...cancelled });
    assert.equal(ring.subscriberCount, 1);
    assert.equal(cancelled.listeners(), 1);
    await first.cancel();
    assert.deepEqual([ring.subscriberCount, cancelled.listeners()], [0, 0]);

    // Cut off: its reader fell behind.
    const cut = countedSignal();
    const second = eventStream(ring, { after: ring.lastId }, { ...options, ...cut });
    for (let i = 0; i < 4; i++) push();
    assert.deepEqual([ring.subscriberCount, cut.listeners()], [0, 0]);
    await assert.rejects(async () => {
      const reader = second.getReader();
      for (let i = 0; i < 10; i++) if ((await reader.read()).done) return;
    });

    // Ended by the signal itself.
    const stopped = countedSignal();
    const third = eventStream(ring, { after: ring.lastId }, { ...options, ...stopped });
    stopped.controller.abort();
    assert.deepEqual([ring.subscriberCount, stopped.listeners()], [0, 0]);
    const reader = third.getReader();
    let end = false;
    for (let i = 0; i < 10 && !end; i++) end = (await reader.read()).done;
    assert.ok(end, "the stream ended");
  });

  it("disconnects a subscriber that never reads within a bounded number of events, over a real listener", async () => {
    const maxLag = 16;
    const events = new EventFeed();
    let stop!: () => void;
    const deps = { events, stopped: new Promise<void>((resolve) => stop = resolve) };
    const app = served(eventsApi(deps, { maxLag }));
    const ring = eventRing(deps);
    const server = await serveHttp({ hostname: "127.0.0.1", port: 0 }, (r) => app.fetch(r));
    const socket = netConnect({ host: "127.0.0.1", port: server.port });
    let closed = false;
    socket.on("close", () => closed = true);
    socket.on("error", () => closed = true);
    try {
      socket.pause(); // never reads
      socket.write(`GET /v1/events HTTP/1.1\r\nHost: 127.0.0.1:${server.port}\r\n\r\n`);
      await waitFor(() => ring.subscriberCount === 1, "subscribed");
      // Events of about 1 KiB: the peer's socket buffers fill (a few MiB on Linux), then the
      // listener stops pulling, the reader falls maxLag behind and is cut off. The bound is far
      // above that, so that only a listener that keeps pulling for a peer that does not read
      // (buffering without end) runs into it.
      const pad = "x".repeat(1024);
      const bound = 50_000;
      let published = 0;
      while (ring.subscriberCount > 0 && published < bound) {
        // Fewer than maxLag at a time, so that a listener that keeps up never lags.
        for (let i = 0; i < 4; i++) events.publish("drain", { n: published++, pad });
        await sleep(0); // the listener pulls and writes
      }
      assert.equal(ring.subscriberCount, 0, `still subscribed after ${published} events`);
      // The connection is closed, not left waiting for a reader that never comes; the daemon
      // holds nothing more for it.
      await waitFor(() => server.pendingRequests === 0, "the response ended, unread");
      await waitFor(() => {
        // A socket the server closed answers data with a reset; an open one ignores an empty
        // line before a request.
        if (!closed) socket.write("\r\n");
        return closed;
      }, { intervalMs: 100, message: "the connection closed" });
    } finally {
      socket.destroy();
      stop();
      await server.close();
    }
  });
});
