/**
 * A small HTTP/1.1 server over our own TCP transports, serving a fetch handler (the admin API's
 * hono app) with every deadline and bound a listener needs; used on Deno, whose `Deno.serve` keeps
 * a connection that never finishes its request forever (slowloris) and has no forced close.
 *
 * - A request (head and body) must arrive within `requestTimeoutMs` (408, then close); an idle
 *   keep-alive connection is closed after `keepAliveTimeoutMs`; at most `maxRequests` requests per
 *   connection.
 * - The head is parsed strictly (`http/head.ts`) and bounded (16 KiB, 431); the body by
 *   `maxBodyBytes` (413), read whole before the handler runs. Bodies are framed by Content-Length
 *   or chunked, never both (400, the request-smuggling shape), and a Content-Length listed twice is
 *   refused (400). While a response is in progress, at most one more request's worth is read
 *   ahead; then reading stops until the response is done.
 * - Responses stream (chunked when their length is unknown: server-sent events), with
 *   backpressure: the body is pulled only while less than `highWaterMark` bytes wait to reach the
 *   client, so a client that does not read costs that much here, and the body (an event feed)
 *   sees it fall behind. A client that goes away aborts the request's `signal` and cancels the
 *   body; a body that fails ends the connection at once, even while it waits for the client to
 *   read (nothing can follow a response cut short, and the client learns of it by the close).
 * - `close()` stops accepting, lets responses in flight finish for a bounded time, then destroys
 *   every connection.
 *
 * One request at a time per connection (pipelined requests wait in order). No HTTP/2, no
 * `Expect: 100-continue` (bodies are small), no upgrades (the WebSocket listener is separate).
 *
 * @module
 */

import type { Transport, TransportHandlers } from "../../protocol/transport.ts";
import type { HostPort } from "../../util/net/address.ts";
import { concat } from "../../util/bytes/bytes.ts";
import { listenTcp } from "../tcp.ts";
import {
  headEnd,
  MAX_REQUEST_HEAD,
  notHttpRequest,
  parseRequestHead,
  plainResponse,
  type RequestHead,
  responseHead,
} from "./head.ts";

/** Limits and deadlines of {@linkcode serveHttp1}. Durations in milliseconds. */
export interface Http1ServerOptions {
  /** A whole request (head and body) must arrive within this long. Default 10 s. */
  requestTimeoutMs?: number;
  /** An idle keep-alive connection is closed after this long. Default 5 s. */
  keepAliveTimeoutMs?: number;
  /** Largest request body. Default 1 MiB. */
  maxBodyBytes?: number;
  /** Requests per connection before it is closed. Default 1000. */
  maxRequests?: number;
  /** How long `close()` lets responses in flight finish. Default 2 s. */
  closeGraceMs?: number;
  /**
   * Bytes of a response waiting to reach its client at which the server stops pulling the body,
   * until the client reads. Default {@linkcode RESPONSE_HIGH_WATER_MARK}.
   */
  highWaterMark?: number;
}

/**
 * Default of {@linkcode Http1ServerOptions.highWaterMark}: what a response may have queued toward a
 * client that does not read. The data path's 1 MiB is meant for throughput; admin answers are
 * small, and an event stream's reader that stalls should fall behind in its feed, not here.
 */
export const RESPONSE_HIGH_WATER_MARK = 64 * 1024;

/** A handler, as `app.fetch` of a hono app. */
export type Http1Handler = (request: Request) => Response | Promise<Response>;

/** A running {@linkcode serveHttp1} server. */
export interface Http1Server {
  /** The bound address. */
  readonly hostname: string;
  /** The bound port (the real one when 0 was asked for). */
  readonly port: number;
  /** Connections open now. */
  readonly connections: number;
  /** Requests whose response is not finished: being produced, or written to a slow client. */
  readonly pendingRequests: number;
  /** Stops accepting, waits (bounded) for responses in flight, then closes every connection. */
  close(): Promise<void>;
}

const LAST_CHUNK = new TextEncoder().encode("0\r\n\r\n");
const NO_BODY_STATUS = new Set([204, 304]);

/** Why a request's body cannot be read, as a status and message; or its framing. */
type BodyFraming =
  | { kind: "none" }
  | { kind: "length"; length: number }
  | { kind: "chunked" }
  | { kind: "refused"; status: number; message: string };

function bodyFraming(head: RequestHead, maxBodyBytes: number): BodyFraming {
  const te = head.headers.get("transfer-encoding");
  const cl = head.headers.get("content-length");
  if (te !== null && cl !== null) {
    return { kind: "refused", status: 400, message: "both Content-Length and Transfer-Encoding" };
  }
  if (te !== null) {
    if (te.toLowerCase() !== "chunked") {
      return { kind: "refused", status: 501, message: "only chunked transfer coding is supported" };
    }
    return { kind: "chunked" };
  }
  if (cl === null) return { kind: "none" };
  if (!/^\d{1,15}$/.test(cl)) {
    return { kind: "refused", status: 400, message: "bad Content-Length" };
  }
  const length = Number(cl);
  if (length > maxBodyBytes) {
    return { kind: "refused", status: 413, message: `body above ${maxBodyBytes} bytes` };
  }
  return { kind: "length", length };
}

/**
 * Decodes a chunked body from `bytes` (which start right after the head). Returns the body and
 * how many bytes it took, `undefined` when more bytes are needed, or a refusal.
 */
function decodeChunked(
  bytes: Uint8Array,
  maxBodyBytes: number,
): { body: Uint8Array; used: number } | { status: number; message: string } | undefined {
  const parts: Uint8Array[] = [];
  let total = 0;
  let at = 0;
  for (;;) {
    const lineEnd = indexOfCrlf(bytes, at);
    if (lineEnd < 0) {
      return bytes.length - at > 1024 ? { status: 400, message: "bad chunk" } : undefined;
    }
    const line = new TextDecoder("latin1").decode(bytes.subarray(at, lineEnd));
    const size = /^([0-9a-fA-F]{1,8})(?:;.*)?$/.exec(line);
    if (!size) return { status: 400, message: "bad chunk size" };
    const n = parseInt(size[1], 16);
    at = lineEnd + 2;
    if (n === 0) {
      // Trailer fields (ignored) up to the blank line.
      for (;;) {
        const end = indexOfCrlf(bytes, at);
        if (end < 0) {
          return bytes.length - at > 4096 ? { status: 400, message: "bad trailer" } : undefined;
        }
        const empty = end === at;
        at = end + 2;
        if (empty) break;
      }
      const body = new Uint8Array(total);
      let o = 0;
      for (const part of parts) {
        body.set(part, o);
        o += part.length;
      }
      return { body, used: at };
    }
    total += n;
    if (total > maxBodyBytes) return { status: 413, message: `body above ${maxBodyBytes} bytes` };
    if (bytes.length < at + n + 2) return undefined;
    if (bytes[at + n] !== 13 || bytes[at + n + 1] !== 10) {
      return { status: 400, message: "bad chunk end" };
    }
    parts.push(bytes.subarray(at, at + n));
    at += n + 2;
  }
}

/** One chunk of a chunked body, framed in a single buffer: one write and one allocation each. */
function framedChunk(value: Uint8Array): Uint8Array {
  const size = value.length.toString(16);
  const out = new Uint8Array(size.length + value.length + 4);
  for (let i = 0; i < size.length; i++) out[i] = size.charCodeAt(i);
  out[size.length] = 13;
  out[size.length + 1] = 10;
  out.set(value, size.length + 2);
  out[out.length - 2] = 13;
  out[out.length - 1] = 10;
  return out;
}

function indexOfCrlf(bytes: Uint8Array, from: number): number {
  for (let i = from; i + 1 < bytes.length; i++) {
    if (bytes[i] === 13 && bytes[i + 1] === 10) return i;
  }
  return -1;
}

/** One client connection: reads requests one at a time and writes their responses. */
class Connection implements TransportHandlers {
  readonly #tcp: Transport;
  readonly #handler: Http1Handler;
  readonly #options: Required<Http1ServerOptions>;
  readonly #onGone: () => void;
  #buffer: Uint8Array = new Uint8Array(0);
  #busy = false; // a request is being handled
  #gone = false;
  #requests = 0;
  #timer: ReturnType<typeof setTimeout> | undefined;
  #drainWaiter: (() => void) | undefined;
  #abort: AbortController | undefined;
  #readingPaused = false;

  constructor(
    tcp: Transport,
    handler: Http1Handler,
    options: Required<Http1ServerOptions>,
    onGone: () => void,
  ) {
    this.#tcp = tcp;
    this.#handler = handler;
    this.#options = options;
    this.#onGone = onGone;
    this.#arm(options.requestTimeoutMs, true);
    tcp.start(this);
  }

  /** True while a response is being produced or written. */
  get busy(): boolean {
    return this.#busy;
  }

  data(chunk: Uint8Array): void {
    if (this.#gone) return;
    this.#buffer = this.#buffer.length === 0 ? chunk : concat([this.#buffer, chunk]);
    if (!this.#busy) this.#next();
    else if (
      !this.#readingPaused &&
      this.#buffer.length > MAX_REQUEST_HEAD + this.#options.maxBodyBytes
    ) {
      // While a response is in progress, the next request waits here: one request's worth at
      // most. Beyond that, stop reading until the response is done, and TCP pushes back.
      this.#readingPaused = true;
      this.#tcp.pause();
    }
  }

  drain(): void {
    const waiter = this.#drainWaiter;
    this.#drainWaiter = undefined;
    waiter?.();
  }

  end(): void {
    // The client finished sending; a response in flight is still written, then we close.
    if (!this.#busy) this.destroy();
  }

  close(): void {
    this.#gone = true;
    clearTimeout(this.#timer);
    this.#abort?.abort(new Error("client went away"));
    this.drain();
    this.#onGone();
  }

  /** Closes the connection now. */
  destroy(): void {
    this.#tcp.close();
  }

  /** Ends the connection once idle (server shutdown): closes now if no request is in flight. */
  closeWhenIdle(): void {
    if (!this.#busy) this.destroy();
  }

  /** (Re)arms the deadline: a request must be complete, or an idle connection used, in time. */
  #arm(ms: number, forRequest: boolean): void {
    clearTimeout(this.#timer);
    this.#timer = setTimeout(() => {
      if (this.#busy || this.#gone) return;
      // Half a request is answered 408; an idle keep-alive connection just closes.
      if (forRequest && this.#buffer.length > 0) this.#refuse(408, "request not complete in time");
      else this.destroy();
    }, ms);
  }

  /** Parses the next request from the buffer, if it is all there, and handles it. */
  #next(): void {
    if (this.#gone || this.#buffer.length === 0) return;
    const end = headEnd(this.#buffer);
    if (end < 0) {
      if (notHttpRequest(this.#buffer)) this.#refuse(400, "not an HTTP request");
      else if (this.#buffer.length > MAX_REQUEST_HEAD) this.#refuse(431, "request head too large");
      else if (this.#requests > 0) this.#arm(this.#options.requestTimeoutMs, true);
      return;
    }
    if (end > MAX_REQUEST_HEAD) return this.#refuse(431, "request head too large");
    const head = parseRequestHead(this.#buffer.subarray(0, end));
    if (!head) return this.#refuse(400, "malformed request");
    const host = head.headers.get("host");
    if (head.version === "1.1" && host === null) return this.#refuse(400, "missing Host");
    const framing = bodyFraming(head, this.#options.maxBodyBytes);
    let body: Uint8Array | undefined;
    let used = end;
    switch (framing.kind) {
      case "refused":
        return this.#refuse(framing.status, framing.message);
      case "length":
        if (this.#buffer.length < end + framing.length) return; // more body to come
        body = this.#buffer.subarray(end, end + framing.length);
        used = end + framing.length;
        break;
      case "chunked": {
        const decoded = decodeChunked(this.#buffer.subarray(end), this.#options.maxBodyBytes);
        if (decoded === undefined) return;
        if ("status" in decoded) return this.#refuse(decoded.status, decoded.message);
        body = decoded.body;
        used = end + decoded.used;
        break;
      }
    }
    this.#buffer = this.#buffer.subarray(used);
    this.#requests++;
    this.#busy = true;
    clearTimeout(this.#timer);
    void this.#respond(head, host ?? "localhost", body);
  }

  async #respond(head: RequestHead, host: string, body: Uint8Array | undefined): Promise<void> {
    const abort = new AbortController();
    this.#abort = abort;
    const keepAlive = head.version === "1.1" &&
      (head.headers.get("connection") ?? "").toLowerCase() !== "close" &&
      this.#requests < this.#options.maxRequests;
    let response: Response;
    try {
      const request = new Request(`http://${host}${head.target}`, {
        method: head.method,
        headers: head.headers,
        // A copy: the body is a view of the connection's buffer, which moves on.
        body: body && body.length > 0 && head.method !== "GET" && head.method !== "HEAD"
          ? body.slice() as Uint8Array<ArrayBuffer>
          : undefined,
        signal: abort.signal,
      });
      response = await this.#handler(request);
    } catch {
      response = Response.json(
        { error: { code: "internal", message: "internal error" } },
        { status: 500 },
      );
    }
    let written = false;
    try {
      await this.#write(response, head.method === "HEAD", keepAlive);
      written = true;
    } catch {
      // The client went away, or the body failed; handled below.
    }
    this.#abort = undefined;
    this.#busy = false;
    if (this.#gone) return;
    // A response cut short (its body failed): the client can tell only by the connection closing,
    // and no response can follow it on this connection. Queued bytes are dropped with it.
    if (!written) return this.destroy();
    if (!keepAlive) {
      this.#tcp.end();
      // The client should close in answer; if it does not, close anyway.
      setTimeout(() => this.destroy(), this.#options.closeGraceMs);
      return;
    }
    this.#arm(this.#options.keepAliveTimeoutMs, false);
    if (this.#readingPaused) {
      this.#readingPaused = false;
      // Held bytes may arrive now, and start the next request.
      this.#tcp.resume();
    }
    if (!this.#busy && this.#buffer.length > 0) this.#next();
  }

  async #write(response: Response, isHead: boolean, keepAlive: boolean): Promise<void> {
    const fields: [string, string][] = [];
    response.headers.forEach((value, name) => {
      if (name !== "connection" && name !== "transfer-encoding" && name !== "keep-alive") {
        fields.push([name, value]);
      }
    });
    if (!keepAlive) fields.push(["connection", "close"]);
    const noBody = NO_BODY_STATUS.has(response.status) || response.body === null;
    const length = response.headers.get("content-length");
    const chunked = !noBody && length === null;
    if (noBody && length === null && !NO_BODY_STATUS.has(response.status)) {
      fields.push(["content-length", "0"]);
    }
    if (chunked) fields.push(["transfer-encoding", "chunked"]);
    await this.#send(responseHead(response.status, fields));
    if (noBody || isHead) {
      await response.body?.cancel();
      return;
    }
    const reader = response.body!.getReader();
    const abort = this.#abort;
    const cancel = () => void reader.cancel().catch(() => {});
    abort?.signal.addEventListener("abort", cancel, { once: true });
    // The body may fail while we wait for a drain that a client that does not read never brings
    // (an event feed cutting off a reader that fell behind): that ends the wait, and the response.
    let failure: { error: unknown } | undefined;
    reader.closed.catch((error) => {
      failure = { error };
      this.drain();
    });
    const failed = () => failure;
    try {
      for (;;) {
        const { done, value } = await reader.read();
        if (done) break;
        if (this.#gone) throw new Error("client went away");
        if (value.length === 0) continue;
        await this.#send(chunked ? framedChunk(value) : value, failed);
      }
      if (chunked) await this.#send(LAST_CHUNK, failed);
    } finally {
      abort?.signal.removeEventListener("abort", cancel);
    }
  }

  /**
   * Writes `bytes`; when the transport pushes back, waits for a drain before the caller pulls
   * more, unless `failed` (the body's failure) cuts the wait short.
   */
  async #send(bytes: Uint8Array, failed?: () => { error: unknown } | undefined): Promise<void> {
    if (this.#gone) throw new Error("client went away");
    if (this.#tcp.write(bytes)) return;
    await new Promise<void>((resolve) => this.#drainWaiter = resolve);
    if (this.#gone) throw new Error("client went away");
    const failure = failed?.();
    if (failure) throw failure.error;
  }

  /** Answers with a plain-text error and closes, without running the handler. */
  #refuse(status: number, message: string): void {
    clearTimeout(this.#timer);
    this.#busy = true; // nothing more is read from this connection
    this.#tcp.write(plainResponse(status, message));
    this.#tcp.end();
    setTimeout(() => this.destroy(), this.#options.closeGraceMs);
  }
}

/**
 * Listens on `address` and serves `handler` over HTTP/1.1; resolves once bound, rejects if it
 * cannot bind. See the module notes for the limits.
 */
export async function serveHttp1(
  address: HostPort,
  handler: Http1Handler,
  options: Http1ServerOptions = {},
): Promise<Http1Server> {
  const settings: Required<Http1ServerOptions> = {
    requestTimeoutMs: options.requestTimeoutMs ?? 10_000,
    keepAliveTimeoutMs: options.keepAliveTimeoutMs ?? 5_000,
    maxBodyBytes: options.maxBodyBytes ?? 1024 * 1024,
    maxRequests: options.maxRequests ?? 1000,
    closeGraceMs: options.closeGraceMs ?? 2_000,
    highWaterMark: options.highWaterMark ?? RESPONSE_HIGH_WATER_MARK,
  };
  const connections = new Set<Connection>();
  const listener = await listenTcp({
    hostname: address.hostname,
    port: address.port,
    highWaterMark: settings.highWaterMark,
  }, (tcp) => {
    const connection: Connection = new Connection(
      tcp,
      handler,
      settings,
      () => connections.delete(connection),
    );
    connections.add(connection);
  });
  return {
    hostname: listener.hostname,
    port: listener.port,
    get connections() {
      return connections.size;
    },
    get pendingRequests() {
      let busy = 0;
      for (const connection of connections) if (connection.busy) busy++;
      return busy;
    },
    async close() {
      listener.close();
      for (const connection of connections) connection.closeWhenIdle();
      const deadline = Date.now() + settings.closeGraceMs;
      while (connections.size > 0 && Date.now() < deadline) {
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
      for (const connection of connections) connection.destroy();
    },
  };
}
