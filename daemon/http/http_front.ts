/**
 * The HTTP front of HTTP tunnels (docs/design/http-tunnels.md): one visitor connection
 * on the shared HTTP port, its requests routed one by one by their `Host` to the tunnel holding
 * that name. Each request gets a stream of its own to the tunnel's client (which dials its local
 * service for it, as for a TCP tunnel), carrying the request head, with `X-Forwarded-*` and
 * `Forwarded` written from what this connection knows, and exactly the body's framed bytes; the
 * response comes back the same way, exactly framed, and the next request on the connection may go
 * to another tunnel. A `101 Switching Protocols` (WebSocket) turns the connection into a tunnel
 * to that stream until either side closes.
 *
 * Strict and bounded: request heads at most `maxHeadBytes` within `headerTimeoutMs` (431, 408),
 * their lines ended by CRLF (a bare LF: 400 at once), one `Host`, framing that two parsers could
 * read differently refused before any byte goes to a client (400, 501: see
 * `transport/http/framing.ts`), pipelined input held up to one head, `maxRequests` per connection.
 * Unknown host: 404 without touching any client; a route that cannot be reached, a response that
 * breaks off before its head, or a head over 64 KiB: 502; no response head within
 * `responseTimeoutMs` of the request's last byte sent: 504. After a 404 or 502 of ours the
 * connection takes the next request when nothing of this one is left unread (no body, or all of
 * it sent on) and the visitor did not ask to close; other refusals close it.
 *
 * The daemon serves its `listen.http` connections here, and its `listen.https` connections once
 * TLS is terminated (`https_front.ts`); ACME HTTP-01 challenges are answered before routing.
 *
 * @module
 */

import type { Stream } from "../../protocol/stream.ts";
import type { Transport } from "../../protocol/transport.ts";
import type { SpliceThrottle } from "../../tunnel/splice.ts";
import { bareLineFeed, headEnd, responseHead } from "../../transport/http/head.ts";
import {
  ChunkedScanner,
  fieldValues,
  FramingError,
  parseMessageHead,
  requestFraming,
  responseFraming,
} from "../../transport/http/framing.ts";
import type { BodyFraming } from "../../transport/http/framing.ts";
import { requestHost } from "../policy/host_names.ts";
import { concat } from "../../util/bytes/bytes.ts";
import { formatIp, splitHostPort } from "../../util/net/address.ts";
import { type Entry, visitorIp } from "../../tunnel/policy/visitor_gate.ts";
import type { AddressRules } from "../../tunnel/policy/visitor_policy.ts";
import { ResetReason } from "../../tunnel/stream/reset_reasons.ts";
import type { GateVerdict, HttpGate } from "./http_gate.ts";

/** How a request reaches the client holding its host. */
export interface HttpRoute {
  /** Opens a stream to the client for one request; undefined when it cannot (counted there). */
  open(remote: string, local: string): Stream | undefined;
  /** Counts one request's bytes (head and body each way), told once when it is over. */
  exchanged?(bytesIn: number, bytesOut: number): void;
  /** The tunnel's `policy.http`: who may reach it, what changes on the way; none: all, nothing. */
  readonly gate?: HttpGate;
  /**
   * Checks one request from visitor address `remote` against the tunnel's visitor policy:
   * admitted (with what to call when it is over) or refused and why. Absent: no policy.
   */
  enter?(remote: string): Entry;
  /**
   * The tunnel's bandwidth each way (`in`: request bodies, `out`: response bodies), asked once
   * per request; undefined, or absent: not limited.
   */
  bandwidth?(): { in?: SpliceThrottle; out?: SpliceThrottle } | undefined;
}

/** One finished request, for metrics and logs. */
export interface HttpExchange {
  /** The host it was for ("" when there was none). */
  host: string;
  /** The status the visitor got (from the client's service, or ours). */
  status: number;
  /** Request bytes sent on (head and body). */
  bytesIn: number;
  /** Response bytes sent back. */
  bytesOut: number;
  /** From the head's arrival to the response's end. */
  ms: number;
  /** Whether a tunnel held its host (and path); false for a host nobody holds, or none. */
  routed?: boolean;
}

/** What {@linkcode serveHttpConnection} needs. */
export interface HttpFrontOptions {
  /**
   * The route for `host` and the request's `path` (the tunnel of the longest path prefix it lies
   * under, else the name's own), or undefined when no tunnel holds it.
   */
  route(host: string, path?: string): HttpRoute | undefined;
  /** `http` or `https` (after TLS termination): what `X-Forwarded-Proto` says. */
  proto: "http" | "https";
  /** Keep incoming `X-Forwarded-*` / `Forwarded` and append to them, instead of replacing them. */
  trustForwarded: boolean;
  /**
   * The fronts (`trustedProxies`) whose `X-Forwarded-For` / `Forwarded` name the visitor a
   * tunnel's policy judges; absent or none: the connection's own address.
   */
  trustedProxies?(): AddressRules | undefined;
  /** Largest request head (default 16 KiB). */
  maxHeadBytes?: number;
  /** A request head must be complete this long after it starts (default 10 s). */
  headerTimeoutMs?: number;
  /**
   * A kept-alive connection may wait this long for its next request, and a request in flight this
   * long without a byte moving either way, except while it waits for its response head
   * (default 60 s).
   */
  idleTimeoutMs?: number;
  /**
   * How long a request, once all sent to the client, waits for its response head before the
   * visitor gets 504; asked at each request, so a reload applies to open connections (default
   * 60 s).
   */
  responseTimeoutMs?(): number;
  /** Requests per connection; the last is answered with the connection closed (default 1000). */
  maxRequests?: number;
  /** Told about every finished request. */
  onExchange?(exchange: HttpExchange): void;
  /** Told once when the visitor connection has closed (for a count of open connections). */
  onClose?(): void;
  /** Told when a tunnel's `policy.http` refused a request (`reason` for counters, never sent). */
  onRefused?(host: string, reason: string): void;
  /**
   * Whether this connection may carry requests for `host` (a TLS connection: the names its
   * certificate serves); others get 421 Misdirected Request. Absent: any host.
   */
  authority?(host: string): boolean;
  /**
   * The key authorization for an ACME HTTP-01 `token` (RFC 8555 §8.3), answered before any
   * routing to `GET /.well-known/acme-challenge/TOKEN`; undefined: no such challenge here (the
   * request is routed as any other).
   */
  acmeAnswer?(token: string): string | undefined;
}

/** Largest response head we read from a client's service; a larger one gets the visitor 502. */
const MAX_RESPONSE_HEAD = 64 * 1024;
const FORWARDED_FIELDS = new Set([
  "x-forwarded-for",
  "x-forwarded-proto",
  "x-forwarded-host",
  "forwarded",
]);

const encoder = new TextEncoder();
const ACME_CHALLENGE = "/.well-known/acme-challenge/";
/** Requests a proxy may send again on its own (RFC 9110 §9.2.1, §9.2.2: safe, so idempotent). */
const SAFE_METHODS = new Set(["GET", "HEAD", "OPTIONS"]);
/** Nothing (shared: no allocation where a chunk is used up). */
const EMPTY = new Uint8Array(0);

/**
 * A response head saying `connection: close` instead of what the service said about the
 * connection (`Connection`, `Keep-Alive`: hop-by-hop, about the service's side).
 */
function withConnectionClose(startLine: string, fields: [string, string][]): Uint8Array {
  let text = `${startLine}\r\n`;
  for (const [name, value] of fields) {
    const lower = name.toLowerCase();
    if (lower !== "connection" && lower !== "keep-alive") text += `${name}: ${value}\r\n`;
  }
  return encoder.encode(`${text}connection: close\r\n\r\n`);
}

/** A message head from its start line and fields, byte for byte as read (Latin-1). */
function serializeHead(startLine: string, fields: [string, string][]): Uint8Array {
  let text = `${startLine}\r\n`;
  for (const [name, value] of fields) text += `${name}: ${value}\r\n`;
  text += "\r\n";
  const bytes = new Uint8Array(text.length);
  for (let i = 0; i < text.length; i++) bytes[i] = text.charCodeAt(i);
  return bytes;
}

/**
 * Our own short plain-text answer, with `fields` first: on a connection that stays open it says
 * `connection: keep-alive` (an HTTP/1.0 visitor needs that said), and to a HEAD request it is the
 * head alone (a body would be read as the next response); else `connection: close`.
 */
function keptResponse(
  status: number,
  message: string,
  headOnly: boolean,
  fields: [string, string][] = [],
  keep = true,
): Uint8Array {
  const body = encoder.encode(`${message}\n`);
  const head = responseHead(status, [
    ...fields,
    ["content-type", "text/plain; charset=utf-8"],
    ["content-length", String(body.length)],
    ["connection", keep ? "keep-alive" : "close"],
  ]);
  return headOnly ? head : concat([head, body]);
}

const PAGE_TITLES: Record<number, string> = { 403: "Forbidden", 429: "Too Many Requests" };

/**
 * A policy's refusal as a short HTML page (403 or 429) that names no rule; `keep` says whether the
 * connection stays open, and to a HEAD request it is the head alone.
 */
function htmlResponse(status: number, keep: boolean, headOnly = false): Uint8Array {
  const title = `${status} ${PAGE_TITLES[status] ?? "Refused"}`;
  const body = encoder.encode(
    `<!doctype html>\n<html><head><meta charset="utf-8"><title>${title}</title></head>` +
      `<body><h1>${title}</h1></body></html>\n`,
  );
  const head = responseHead(status, [
    ["content-type", "text/html; charset=utf-8"],
    ["content-length", String(body.length)],
    ...(status === 429 ? [["retry-after", "1"] as [string, string]] : []),
    ["connection", keep ? "keep-alive" : "close"],
  ]);
  return headOnly ? head : concat([head, body]);
}

/**
 * The connection's phases (a state machine for its lifecycle, not for its bytes); `gate`: a
 * request head waits for its tunnel's policy to decide (a password hash, a JWKS fetch).
 */
type Phase = "head" | "gate" | "request" | "tunnel" | "closing";

/** A request head read and routed, before its stream opens. */
interface RoutedHead {
  host: string;
  hostValue: string;
  route: HttpRoute;
  method: string;
  target: string;
  minor: string;
  authority: string | undefined;
  startLine: string;
  fields: [string, string][];
  body: BodyFraming;
  closeAfter: boolean;
  keepFor: string | undefined;
  /** Bytes after the head (its body's first, or pipelined). */
  rest: Uint8Array;
  /** The tunnel's policy let it through (and said who for the app), if it has a gate. */
  verdict?: GateVerdict;
  /** The visitor policy's admission of this request, to give back once it is over. */
  leave?: () => void;
}

/**
 * A finished exchange's stream, kept for the next request to the same host: the client's
 * connection to its service stays open behind it, as a browser's keep-alive connection would.
 */
interface KeptStream {
  host: string;
  route: HttpRoute;
  stream: Stream;
}

/** One request in flight. */
interface Exchange {
  host: string;
  route: HttpRoute;
  method: string;
  stream: Stream;
  /**
   * The request head, while it may be sent again: the stream was a kept one and the request is
   * safe (GET, HEAD, OPTIONS) without a body, so if the service turns out to have closed that
   * connection before answering, the request goes once more on a new stream (what browsers and
   * proxies do for a kept-alive connection closed under them; never for a POST).
   */
  replay: Uint8Array | undefined;
  /** The service sent bytes past its response: its stream is not kept. */
  extra: boolean;
  /** The request's body framing and how far it got. */
  body: BodyFraming;
  bodyLeft: number;
  bodyScanner: ChunkedScanner | undefined;
  bodyDone: boolean;
  /** The response so far. */
  head: Uint8Array | undefined;
  status: number;
  framing: BodyFraming | undefined;
  left: number;
  scanner: ChunkedScanner | undefined;
  /** The visitor asked to close after this one (or it is the last we take). */
  closeAfter: boolean;
  started: number;
  bytesIn: number;
  bytesOut: number;
  /** Its bytes were told to its route (once: it may be reported, then dropped). */
  counted: boolean;
  /** What its route's policy wants called when it is over. */
  leave: (() => void) | undefined;
  /** Its tunnel's bandwidth each way, when set (else nothing is counted per chunk). */
  throttle: { in?: SpliceThrottle; out?: SpliceThrottle } | undefined;
}

/** Something a bandwidth hold stops reading from (the visitor, or a response's stream). */
interface Pausable {
  pause(): void;
  resume(): void;
}

/**
 * One direction's bandwidth hold: after bytes are spent past the rate, their source stops being
 * read until the throttle says the debt is paid (then it is resumed), so the flow is held where
 * it comes from (TCP or yamux window) and nothing is buffered here.
 */
class BandwidthHold {
  #timer: ReturnType<typeof setTimeout> | undefined;
  #source: Pausable | undefined;

  /** True while a source is held. */
  get active(): boolean {
    return this.#timer !== undefined;
  }

  /** Spends `n` bytes moved from `source`; holds it when the rate is passed. */
  spend(throttle: SpliceThrottle, n: number, source: Pausable): void {
    const wait = throttle.spend(n);
    if (wait <= 0) return;
    source.pause();
    this.#source = source;
    if (this.#timer === undefined) this.#arm(throttle, wait);
  }

  #arm(throttle: SpliceThrottle, wait: number): void {
    this.#timer = setTimeout(() => {
      // Bytes may come after a pause (read before it): the hold lasts until all are paid.
      const more = throttle.spend(0);
      if (more > 0) return this.#arm(throttle, more);
      this.#timer = undefined;
      const source = this.#source;
      this.#source = undefined;
      source?.resume();
    }, Math.ceil(wait));
  }

  /** Ends the hold without resuming (the connection is going). */
  stop(): void {
    clearTimeout(this.#timer);
    this.#timer = undefined;
    this.#source = undefined;
  }
}

/** Serves one visitor connection of the HTTP port until it closes. */
export function serveHttpConnection(visitor: Transport, options: HttpFrontOptions): void {
  new HttpConnection(visitor, options).start();
}

class HttpConnection {
  readonly #visitor: Transport;
  readonly #options: HttpFrontOptions;
  readonly #maxHead: number;
  #phase: Phase = "head";
  /** Visitor bytes not yet consumed: a head in progress, or pipelined input. */
  #pending: Uint8Array = EMPTY;
  #exchange: Exchange | undefined;
  /** The last exchange's stream, idle, for the next request if it goes to the same host. */
  #kept: KeptStream | undefined;
  #requests = 0;
  #timer: ReturnType<typeof setTimeout> | undefined;
  /** Runs from a request's last byte sent until its response head comes (`responseTimeoutMs`). */
  #responseTimer: ReturnType<typeof setTimeout> | undefined;
  /** When bytes last moved either way while a request was in flight (or tunneled). */
  #lastActivity = 0;
  #visitorEnded = false;
  #closed = false;
  /** Bandwidth holds of request bytes (the visitor held) and response bytes (the stream held). */
  readonly #holdIn = new BandwidthHold();
  readonly #holdOut = new BandwidthHold();
  /**
   * The visitor as the request hold sees it: when the hold ends it is read again only while a
   * body or an upgraded connection is being forwarded; in any other phase whoever paused it
   * (the gate's verdict, pipelined input past one head) resumes it.
   */
  readonly #heldVisitor: Pausable = {
    pause: () => this.#visitor.pause(),
    resume: () => {
      const exchange = this.#exchange;
      if (
        this.#phase === "tunnel" || (this.#phase === "request" && exchange && !exchange.bodyDone)
      ) {
        this.#visitor.resume();
      }
    },
  };

  constructor(visitor: Transport, options: HttpFrontOptions) {
    this.#visitor = visitor;
    this.#options = options;
    this.#maxHead = options.maxHeadBytes ?? 16 * 1024;
  }

  start(): void {
    this.#visitor.start({
      data: (chunk) => this.#onVisitorData(chunk),
      drain: () => {
        if (!this.#holdOut.active) this.#exchange?.stream.resume();
      },
      end: () => this.#onVisitorEnd(),
      close: () => this.#onVisitorClose(),
    });
    this.#armTimer(this.#options.headerTimeoutMs ?? 10_000, 408);
  }

  // ---- visitor side -------------------------------------------------------------------------

  #onVisitorData(chunk: Uint8Array): void {
    if (this.#closed) return;
    this.#lastActivity = performance.now();
    switch (this.#phase) {
      case "head":
        if (this.#pending.length === 0) {
          this.#armTimer(this.#options.headerTimeoutMs ?? 10_000, 408);
        }
        this.#append(chunk);
        this.#readHead();
        break;
      case "request": {
        const exchange = this.#exchange!;
        if (!exchange.bodyDone) this.#forwardBody(exchange, chunk);
        else this.#hold(chunk);
        break;
      }
      case "tunnel": {
        const exchange = this.#exchange!;
        if (!exchange.stream.write(chunk)) this.#visitor.pause();
        const limit = exchange.throttle?.in;
        if (limit) this.#holdIn.spend(limit, chunk.length, this.#heldVisitor);
        break;
      }
      case "gate":
        // Paused: only what was already on its way; the request's, kept for after the verdict.
        this.#append(chunk);
        break;
      case "closing":
        break;
    }
  }

  /** Pipelined input while a response is on its way: kept, up to one head, then read no more. */
  #hold(chunk: Uint8Array): void {
    this.#append(chunk);
    if (this.#pending.length > this.#maxHead) this.#visitor.pause();
  }

  #append(chunk: Uint8Array): void {
    if (this.#pending.length === 0) {
      this.#pending = chunk;
      return;
    }
    const joined = new Uint8Array(this.#pending.length + chunk.length);
    joined.set(this.#pending);
    joined.set(chunk, this.#pending.length);
    this.#pending = joined;
  }

  #onVisitorEnd(): void {
    this.#visitorEnded = true;
    if (this.#phase === "tunnel") return this.#exchange!.stream.end();
    // Nothing in flight: the visitor is done. In flight: answer it, then close.
    if (this.#phase === "head") this.#finish();
  }

  #onVisitorClose(): void {
    if (this.#closed) return;
    this.#closed = true;
    this.#options.onClose?.();
    this.#holdIn.stop();
    this.#holdOut.stop();
    clearTimeout(this.#timer);
    clearTimeout(this.#responseTimer);
    this.#dropKept();
    const exchange = this.#exchange;
    if (exchange && !this.#responseDone(exchange)) this.#drop(exchange);
  }

  /**
   * In the head phase: after `ms`, a head in progress is answered 408 (`status`), an idle
   * kept-alive connection (`status` 0) closed.
   */
  #armTimer(ms: number, status: 408 | 0): void {
    clearTimeout(this.#timer);
    this.#timer = setTimeout(() => {
      this.#timer = undefined;
      if (this.#phase !== "head" || this.#closed) return;
      if (status && this.#pending.length > 0) {
        this.#refuse(408, "request head not received in time");
      } else this.#finish();
    }, ms);
  }

  /**
   * While a request is in flight: cut it when no byte moved either way for `idleTimeoutMs` (a
   * visitor that stops mid-body, a response body that stops). Checked by one timer at half that
   * period, not a timer per chunk. Not while a request all sent waits for its response head: the
   * response deadline is for that (`#awaitResponse`). An upgraded connection (a WebSocket) may
   * stay silent, as a TCP tunnel's visitor may.
   */
  #watchActivity(): void {
    const limit = this.#options.idleTimeoutMs ?? 60_000;
    this.#lastActivity = performance.now();
    clearTimeout(this.#timer);
    const check = () => {
      if (this.#closed || this.#phase !== "request") return;
      const exchange = this.#exchange;
      const awaitingHead = exchange?.bodyDone && exchange.framing === undefined;
      if (awaitingHead || performance.now() - this.#lastActivity < limit) {
        this.#timer = setTimeout(check, limit / 2);
        return;
      }
      if (exchange && exchange.framing === undefined && exchange.bytesOut === 0) {
        this.#drop(exchange);
        this.#refuse(504, "no response in time", exchange.host);
        return;
      }
      if (exchange) this.#drop(exchange);
      this.#phase = "closing";
      this.#visitor.close();
    };
    this.#timer = setTimeout(check, limit / 2);
  }

  /**
   * The request in flight is all sent: its response head must come within `responseTimeoutMs`,
   * read now (so a reload applies to the next request of an open connection).
   */
  #awaitResponse(): void {
    clearTimeout(this.#responseTimer);
    const ms = this.#options.responseTimeoutMs?.() ?? 60_000;
    this.#responseTimer = setTimeout(this.#responseTimedOut, ms);
  }

  /** The response deadline ran out: 504, if the request in flight has no response head yet. */
  readonly #responseTimedOut = (): void => {
    this.#responseTimer = undefined;
    const exchange = this.#exchange;
    if (this.#closed || !exchange || exchange.framing !== undefined) return;
    this.#drop(exchange);
    this.#refuse(504, "no response in time", exchange.host);
  };

  // ---- request head -------------------------------------------------------------------------

  /** Pipelined bytes start the next head: its deadline runs from now. */
  #startHead(): void {
    this.#armTimer(this.#options.headerTimeoutMs ?? 10_000, 408);
    this.#readHead();
  }

  /**
   * Reads the pending heads. A request answered here with the connection kept (404, 502) leaves
   * it reading heads: a pipelined next one is read in this loop, not by recursion.
   */
  #readHead(): void {
    while (this.#readOneHead() && this.#pending.length > 0) {
      this.#armTimer(this.#options.headerTimeoutMs ?? 10_000, 408);
    }
  }

  /** Reads one head if it is all there; true when it was answered here and the connection kept. */
  #readOneHead(): boolean {
    const end = headEnd(this.#pending);
    if (end < 0) {
      // A line ended by LF alone: the head can never parse (lines end in CRLF here), so it is
      // refused now rather than when its deadline runs out.
      if (bareLineFeed(this.#pending) >= 0) return this.#refuse(400, "malformed request head");
      if (this.#pending.length > this.#maxHead) this.#refuse(431, "request head too large");
      return false;
    }
    if (end > this.#maxHead) return this.#refuse(431, "request head too large");
    clearTimeout(this.#timer);
    this.#timer = undefined;
    const headBytes = this.#pending.subarray(0, end);
    const rest = this.#pending.subarray(end);
    this.#pending = EMPTY;
    const head = parseMessageHead(headBytes);
    const line = head && /^([A-Z]+) (\S+) HTTP\/1\.([01])$/.exec(head.startLine);
    if (!head || !line) return this.#refuse(400, "malformed request head");
    const [, method, received, minor] = line;
    if (method === "CONNECT") return this.#refuse(405, "CONNECT is not served here");
    // Origin-form (`/path`), `*`, or absolute-form (`http://host/path`, RFC 9112 §3.2.2), whose
    // authority wins over `Host` and which goes on in origin-form with `Host` set to it.
    let target = received;
    let authority: string | undefined;
    if (!received.startsWith("/") && received !== "*") {
      const absolute = /^https?:\/\/([^/?#@\s]+)([/?][^#\s]*)?$/i.exec(received);
      if (!absolute) return this.#refuse(400, "malformed request target");
      authority = absolute[1];
      const path = absolute[2] ?? "/";
      target = path.startsWith("?") ? `/${path}` : path;
    }
    if (method === "GET" && target.startsWith(ACME_CHALLENGE) && this.#options.acmeAnswer) {
      const answer = this.#options.acmeAnswer(target.slice(ACME_CHALLENGE.length));
      if (answer !== undefined) {
        this.#answer(answer);
        return false;
      }
    }
    let body: BodyFraming;
    try {
      body = requestFraming(minor === "1" ? "1.1" : "1.0", head.fields);
    } catch (error) {
      if (!(error instanceof FramingError)) throw error;
      return this.#refuse(error.status, error.message);
    }
    const hosts = fieldValues(head.fields, "host");
    if (hosts.length !== 1) return this.#refuse(400, "a request needs exactly one Host");
    const hostValue = authority ?? hosts[0];
    this.#requests++;
    const connection = fieldValues(head.fields, "connection").join(",").toLowerCase();
    const keepAlive = minor === "1"
      ? !/\bclose\b/.test(connection)
      : /\bkeep-alive\b/.test(connection);
    const closeAfter = !keepAlive || this.#requests >= (this.#options.maxRequests ?? 1000);
    // Refused before any byte reached a client: with no body left unread, and nobody asking to
    // close, the connection's framing is intact and it can take the next request (in `rest`).
    const keepFor = !closeAfter && body.kind === "none" && !this.#visitorEnded ? method : undefined;
    const host = requestHost(hostValue);
    const route = host === undefined ? undefined : this.#options.route(host, target);
    if (!route) {
      this.#pending = rest;
      return this.#refuse(404, `no tunnel for ${hostValue}`, hostValue, keepFor);
    }
    // On a terminated TLS connection: only names its certificate serves (RFC 9110 §7.4).
    if (this.#options.authority && !this.#options.authority(host!)) {
      return this.#refuse(421, `this connection's certificate does not serve ${host}`, host!);
    }
    const entry = route.enter?.(this.#visitorAddress(head.fields));
    if (entry && !entry.ok) {
      this.#pending = rest;
      // Neither answer says which rule it was: the visitor learns nothing of the policy.
      return entry.reason === "policy_address" || entry.reason === "policy_not_allowed"
        ? this.#refuse(403, "", host!, keepFor)
        : this.#refuse(429, "", host!, keepFor);
    }
    const routed: RoutedHead = {
      host: host!,
      hostValue,
      route,
      method,
      target,
      minor,
      authority,
      startLine: head.startLine,
      fields: head.fields,
      body,
      closeAfter,
      keepFor,
      rest,
      leave: entry?.leave,
    };
    const verdict = route.gate?.guards
      ? route.gate.check({
        method,
        target,
        hostValue: authority ?? hostValue,
        host: host!,
        proto: this.#options.proto,
        fields: head.fields,
      })
      : undefined;
    if (verdict instanceof Promise) {
      this.#phase = "gate";
      this.#visitor.pause();
      verdict.then(
        (decided) => this.#gated(routed, decided),
        () => this.#gated(routed, undefined),
      );
      return false;
    }
    if (verdict && !verdict.ok) return this.#gateRefused(routed, verdict);
    routed.verdict = verdict;
    return this.#open(routed);
  }

  /** The policy decided on a request that waited for it (undefined: it failed: refused). */
  #gated(routed: RoutedHead, verdict: GateVerdict | undefined): void {
    if (this.#closed || this.#phase !== "gate") {
      routed.leave?.();
      return;
    }
    // What came in meanwhile follows the head's own rest.
    routed.rest = this.#pending.length > 0 ? concat([routed.rest, this.#pending]) : routed.rest;
    this.#pending = EMPTY;
    this.#visitor.resume();
    this.#phase = "head";
    if (this.#visitorEnded) routed.keepFor = undefined;
    routed.verdict = verdict;
    const kept = verdict?.ok ? this.#open(routed) : this.#gateRefused(routed, verdict);
    if (kept && this.#pending.length > 0) this.#startHead();
  }

  /**
   * A request the tunnel's policy refused: 401 with the scheme to use and nothing about why
   * (counted by reason); the connection kept when nothing of the request is left unread.
   */
  #gateRefused(
    routed: RoutedHead,
    verdict: Extract<GateVerdict, { ok: false }> | undefined,
  ): boolean {
    routed.leave?.();
    const status = verdict?.status ?? 401;
    // The login's redirects and pages are answers, not refusals.
    if (status >= 400) this.#options.onRefused?.(routed.host, verdict?.reason ?? "error");
    this.#pending = routed.rest;
    const message = verdict?.message ?? "unauthorized";
    return this.#refuse(status, message, routed.host, routed.keepFor, verdict?.fields);
  }

  /** Opens the request's stream and sends its head on; true when answered here and kept. */
  #open(routed: RoutedHead): boolean {
    const { host, hostValue, route, method, target, minor, authority, body, closeAfter, keepFor } =
      routed;
    const rest = routed.rest;
    const kept = this.#takeKept(host, route);
    const stream = kept ?? route.open(this.#visitor.remoteAddress, this.#visitor.localAddress);
    if (!stream) {
      routed.leave?.();
      this.#pending = rest;
      return this.#refuse(502, `the tunnel for ${host} cannot be reached`, host, keepFor);
    }
    const exchange: Exchange = {
      host,
      route,
      method,
      stream,
      replay: undefined,
      extra: false,
      body,
      bodyLeft: body.kind === "length" ? body.length : 0,
      bodyScanner: body.kind === "chunked" ? new ChunkedScanner() : undefined,
      bodyDone: body.kind === "none",
      head: undefined,
      status: 0,
      framing: undefined,
      left: 0,
      scanner: undefined,
      closeAfter,
      started: performance.now(),
      bytesIn: 0,
      bytesOut: 0,
      counted: false,
      leave: routed.leave,
      throttle: route.bandwidth?.(),
    };
    this.#exchange = exchange;
    this.#phase = "request";
    this.#watchActivity();
    stream.onData = (chunk) => this.#onResponseData(exchange, chunk);
    stream.onDrain = () => {
      if (!this.#holdIn.active) this.#visitor.resume();
    };
    stream.onEnd = () => this.#onResponseEnd(exchange);
    stream.onClose = (error) => this.#onResponseEnd(exchange, error);
    const fields = authority === undefined ? routed.fields : routed.fields.map((
      [name, value],
    ) => [name, name.toLowerCase() === "host" ? authority : value] as [string, string]);
    const out = this.#requestHead(
      authority === undefined ? routed.startLine : `${method} ${target} HTTP/1.${minor}`,
      route.gate ? route.gate.requestFields(fields, routed.verdict) : fields,
      hostValue,
    );
    if (kept && body.kind === "none" && SAFE_METHODS.has(method)) exchange.replay = out;
    exchange.bytesIn += out.length;
    stream.write(out);
    if (exchange.bodyDone) this.#awaitResponse();
    if (rest.length > 0) {
      if (exchange.bodyDone) this.#hold(rest);
      else this.#forwardBody(exchange, rest);
    }
    return false;
  }

  /**
   * The head sent on: the visitor's fields, with the forwarding fields written by us. Untrusted,
   * incoming `X-Forwarded-*` and `Forwarded` are dropped; trusted, the chain is kept and this hop
   * appended (and the visitor's own proto and host, if it gave them, kept).
   */
  #requestHead(startLine: string, fields: [string, string][], hostValue: string): Uint8Array {
    const trust = this.#options.trustForwarded;
    const proto = this.#options.proto;
    const ip = addressHost(this.#visitor.remoteAddress);
    const prior = (name: string) => trust ? fieldValues(fields, name).join(", ") : "";
    const priorFor = prior("x-forwarded-for");
    const priorForwarded = prior("forwarded");
    const out = fields.filter(([name]) => {
      const lower = name.toLowerCase();
      if (lower === "x-forwarded-for" || lower === "forwarded") return false;
      return trust || !FORWARDED_FIELDS.has(lower);
    });
    out.push(["X-Forwarded-For", priorFor ? `${priorFor}, ${ip}` : ip]);
    if (!prior("x-forwarded-proto")) out.push(["X-Forwarded-Proto", proto]);
    if (!prior("x-forwarded-host")) out.push(["X-Forwarded-Host", hostValue]);
    const node = ip.includes(":") ? `"[${ip}]"` : ip;
    const element = `for=${node};host="${hostValue}";proto=${proto}`;
    out.push(["Forwarded", priorForwarded ? `${priorForwarded}, ${element}` : element]);
    let text = `${startLine}\r\n`;
    for (const [name, value] of out) text += `${name}: ${value}\r\n`;
    return encoder.encode(text + "\r\n");
  }

  // ---- request body -------------------------------------------------------------------------

  #forwardBody(exchange: Exchange, bytes: Uint8Array): void {
    let take = bytes.length;
    try {
      if (exchange.bodyScanner) {
        const at = exchange.bodyScanner.push(bytes);
        if (at >= 0) take = at;
      } else {
        take = Math.min(exchange.bodyLeft, bytes.length);
        exchange.bodyLeft -= take;
      }
    } catch (error) {
      // A chunked body that breaks its framing: the client's service gets no more of it.
      return this.#badRequestBody(exchange, (error as Error).message);
    }
    if (take > 0) {
      exchange.bytesIn += take;
      if (!exchange.stream.write(bytes.subarray(0, take))) this.#visitor.pause();
      const limit = exchange.throttle?.in;
      if (limit) this.#holdIn.spend(limit, take, this.#heldVisitor);
    }
    if (exchange.bodyScanner ? exchange.bodyScanner.done : exchange.bodyLeft === 0) {
      exchange.bodyDone = true;
      // Unless the service answered before the body was all sent (it may: a 413, a 401).
      if (exchange.framing === undefined) this.#awaitResponse();
      if (take < bytes.length) this.#hold(bytes.subarray(take));
    }
  }

  // ---- response -----------------------------------------------------------------------------

  #onResponseData(exchange: Exchange, chunk: Uint8Array): void {
    if (this.#closed || exchange !== this.#exchange) return;
    this.#lastActivity = performance.now();
    if (this.#phase === "tunnel") {
      exchange.bytesOut += chunk.length;
      if (!this.#visitor.write(chunk)) exchange.stream.pause();
      const limit = exchange.throttle?.out;
      if (limit) this.#holdOut.spend(limit, chunk.length, exchange.stream);
      return;
    }
    let bytes = chunk;
    while (bytes.length > 0 && !this.#responseDone(exchange)) {
      if (exchange.framing === undefined) {
        const head = exchange.head ? concat([exchange.head, bytes]) : bytes;
        const end = headEnd(head);
        // The cap holds however the head arrives: unfinished past it, or whole but over it (in
        // one read, or its end in the read that crossed it).
        if (end < 0 ? head.length > MAX_RESPONSE_HEAD : end > MAX_RESPONSE_HEAD) {
          return this.#badGateway(exchange, "response head too large");
        }
        if (end < 0) {
          exchange.head = head;
          return;
        }
        exchange.head = undefined;
        if (!this.#startResponse(exchange, head.subarray(0, end))) return;
        bytes = head.subarray(end);
        // #startResponse may have turned the connection into a tunnel (a 101).
        if ((this.#phase as Phase) === "tunnel") {
          if (bytes.length > 0) this.#onResponseData(exchange, bytes);
          return;
        }
        continue;
      }
      bytes = this.#forwardResponse(exchange, bytes);
    }
    if (bytes.length > 0) exchange.extra = true;
    if (this.#responseDone(exchange)) this.#endExchange(exchange, !exchange.extra);
  }

  /** Checks and sends on a response head; false when the exchange ended instead. */
  #startResponse(exchange: Exchange, headBytes: Uint8Array): boolean {
    const head = parseMessageHead(headBytes);
    const line = head && /^HTTP\/1\.[01] ([1-9][0-9]{2})(?: .*)?$/.exec(head.startLine);
    if (!head || !line) {
      this.#badGateway(exchange, "malformed response head");
      return false;
    }
    const status = Number(line[1]);
    let framing: BodyFraming;
    try {
      framing = responseFraming(exchange.method, status, head.fields);
    } catch (error) {
      this.#badGateway(exchange, (error as Error).message);
      return false;
    }
    if (status >= 100 && status < 200 && status !== 101) {
      // Interim: the real one follows (and the response deadline runs on for it).
      exchange.bytesOut += headBytes.length;
      this.#visitor.write(headBytes);
      return true;
    }
    clearTimeout(this.#responseTimer);
    const saysClose = /\bclose\b/i.test(fieldValues(head.fields, "connection").join(","));
    // Closing after this one for a reason of ours (the request limit), or the visitor's: say so,
    // or a kept-alive visitor would send its next request into a closing connection.
    const gate = exchange.route.gate;
    const fields = gate?.rewritesResponses ? gate.responseFields(head.fields) : head.fields;
    const out = exchange.closeAfter && !saysClose && framing.kind !== "tunnel"
      ? withConnectionClose(head.startLine, fields)
      : fields === head.fields
      ? headBytes
      : serializeHead(head.startLine, fields);
    exchange.bytesOut += out.length;
    this.#visitor.write(out);
    exchange.status = status;
    exchange.framing = framing;
    if (saysClose) exchange.closeAfter = true;
    if (framing.kind === "length") exchange.left = framing.length;
    if (framing.kind === "chunked") exchange.scanner = new ChunkedScanner();
    if (framing.kind === "close") exchange.closeAfter = true;
    if (framing.kind === "tunnel") {
      this.#phase = "tunnel";
      clearTimeout(this.#timer);
      // Whatever the visitor sent after its request head is the new protocol's.
      const held = this.#pending;
      this.#pending = EMPTY;
      if (held.length > 0) exchange.stream.write(held);
      if (this.#visitorEnded) exchange.stream.end();
      this.#visitor.resume();
    }
    return true;
  }

  /** Forwards response body bytes; returns what is left past the response's end. */
  #forwardResponse(exchange: Exchange, bytes: Uint8Array): Uint8Array {
    const framing = exchange.framing!;
    let take = bytes.length;
    if (framing.kind === "length") {
      take = Math.min(exchange.left, bytes.length);
      exchange.left -= take;
    } else if (framing.kind === "chunked") {
      try {
        const at = exchange.scanner!.push(bytes);
        if (at >= 0) take = at;
      } catch (error) {
        this.#breakOff(exchange, (error as Error).message);
        return EMPTY;
      }
    } else if (framing.kind === "none") {
      take = 0;
    }
    if (take > 0) {
      exchange.bytesOut += take;
      if (!this.#visitor.write(bytes.subarray(0, take))) exchange.stream.pause();
      const limit = exchange.throttle?.out;
      if (limit) this.#holdOut.spend(limit, take, exchange.stream);
    }
    // Bytes past a complete response are the service's mistake: dropped, and the stream with them.
    if (take === bytes.length) return EMPTY;
    if (this.#responseDone(exchange)) {
      exchange.extra = true;
      return EMPTY;
    }
    return bytes.subarray(take);
  }

  #responseDone(exchange: Exchange): boolean {
    const framing = exchange.framing;
    if (!framing || framing.kind === "close" || framing.kind === "tunnel") return false;
    if (framing.kind === "none") return true;
    if (framing.kind === "length") return exchange.left === 0;
    return exchange.scanner!.done;
  }

  /** The response's stream ended (or closed: `error`, a reset's, says why when it was one). */
  #onResponseEnd(exchange: Exchange, error?: Error): void {
    if (this.#closed || exchange !== this.#exchange) return;
    if (this.#phase === "tunnel") return this.#finish();
    if (exchange.framing?.kind === "close") {
      this.#report(exchange);
      return this.#finish();
    }
    if (!this.#responseDone(exchange)) {
      if (exchange.framing === undefined && exchange.head === undefined && exchange.replay) {
        return this.#replay(exchange);
      }
      if (exchange.framing === undefined) {
        // The node holding the tunnel refused a visitor relayed to it (a rate or count of the
        // tunnel's policy, or a limit, counted there): the page a refusal here would give.
        const limited = (error as { resetCode?: number } | undefined)?.resetCode ===
          ResetReason.LimitReached;
        if (limited) this.#badGateway(exchange, "", 429);
        else this.#badGateway(exchange, noResponse(error));
      } else this.#breakOff(exchange, "the service closed mid-response");
    }
  }

  /**
   * The kept stream's service connection had closed before the request got there: the request
   * (head only) goes again on a new stream, once.
   */
  #replay(exchange: Exchange): void {
    const head = exchange.replay!;
    exchange.replay = undefined;
    const old = exchange.stream;
    old.onData = null;
    old.onEnd = null;
    old.onClose = null;
    old.onDrain = null;
    old.reset();
    const stream = exchange.route.open(this.#visitor.remoteAddress, this.#visitor.localAddress);
    if (!stream) {
      return this.#badGateway(exchange, `the tunnel for ${exchange.host} cannot be reached`);
    }
    exchange.stream = stream;
    stream.onData = (chunk) => this.#onResponseData(exchange, chunk);
    stream.onDrain = () => {
      if (!this.#holdIn.active) this.#visitor.resume();
    };
    stream.onEnd = () => this.#onResponseEnd(exchange);
    stream.onClose = (error) => this.#onResponseEnd(exchange, error);
    stream.write(head);
    this.#awaitResponse();
  }

  /**
   * The response is complete: the connection takes the next request, and the stream is kept for
   * it when the exchange left it clean (the request's body all sent, a response that ended by
   * its framing, nothing from the service past it); else it goes.
   */
  #endExchange(exchange: Exchange, clean = true): void {
    this.#report(exchange);
    const stream = exchange.stream;
    stream.onData = null;
    stream.onEnd = null;
    stream.onClose = null;
    this.#exchange = undefined;
    const closing = exchange.closeAfter || !exchange.bodyDone || this.#visitorEnded;
    if (clean && !closing) this.#keep({ host: exchange.host, route: exchange.route, stream });
    else stream.end();
    if (closing) return this.#finish();
    this.#phase = "head";
    this.#visitor.resume();
    // Idle until the next head starts (then its own deadline runs, see #onVisitorData).
    this.#armTimer(this.#options.idleTimeoutMs ?? 60_000, 0);
    if (this.#pending.length > 0) this.#startHead();
  }

  /** Keeps `kept` idle; the service closing its side meanwhile (or saying more) lets it go. */
  #keep(kept: KeptStream): void {
    this.#kept = kept;
    const release = () => {
      if (this.#kept !== kept) return;
      this.#kept = undefined;
      kept.stream.onData = null;
      kept.stream.onEnd = null;
      kept.stream.onClose = null;
      kept.stream.reset();
    };
    kept.stream.onEnd = release;
    kept.stream.onClose = release;
    // Bytes while no request is out are not a response to anything.
    kept.stream.onData = release;
  }

  /** The kept stream when it serves `host` through `route`; any other kept one goes. */
  #takeKept(host: string, route: HttpRoute): Stream | undefined {
    const kept = this.#kept;
    if (!kept) return undefined;
    this.#kept = undefined;
    kept.stream.onData = null;
    kept.stream.onEnd = null;
    kept.stream.onClose = null;
    if (kept.host === host && kept.route === route) return kept.stream;
    kept.stream.end();
    return undefined;
  }

  #report(exchange: Exchange): void {
    this.#count(exchange);
    this.#options.onExchange?.({
      host: exchange.host,
      status: exchange.status,
      bytesIn: exchange.bytesIn,
      bytesOut: exchange.bytesOut,
      ms: performance.now() - exchange.started,
      routed: true,
    });
  }

  // ---- refusals and endings -----------------------------------------------------------------

  /** The visitor of the request with `fields`, as the tunnel's policy judges it. */
  #visitorAddress(fields: [string, string][]): string {
    return forwardedVisitor(
      this.#visitor.remoteAddress,
      fields,
      this.#options.trustedProxies?.(),
    );
  }

  /**
   * Answers `status` ourselves (nothing of this request reached a client's service, or it gave no
   * response) and closes; or, given `keepFor` (the request's method: the caller found its framing
   * intact and no reason to close), keeps the connection for the next request, whose bytes are
   * then in `#pending`. Returns whether it kept it. Without a `message` the answer is a short
   * HTML page that says only the status (a policy's refusal).
   */
  #refuse(
    status: number,
    message: string,
    host = "",
    keepFor?: string,
    fields: [string, string][] = [],
  ): boolean {
    // Our 404 is for a host (or path) no tunnel holds; other answers of ours name a held host.
    const routed = host !== "" && status !== 404;
    this.#options.onExchange?.({ host, status, bytesIn: 0, bytesOut: 0, ms: 0, routed });
    if (keepFor === undefined) {
      this.#phase = "closing";
      this.#visitor.write(
        message ? keptResponse(status, message, false, fields, false) : htmlResponse(status, false),
      );
      this.#finish();
      return false;
    }
    this.#visitor.write(
      message
        ? keptResponse(status, message, keepFor === "HEAD", fields)
        : htmlResponse(status, true, keepFor === "HEAD"),
    );
    this.#phase = "head";
    this.#visitor.resume();
    // Idle until the next head starts (or at once, with pipelined bytes: see the callers).
    this.#armTimer(this.#options.idleTimeoutMs ?? 60_000, 0);
    return true;
  }

  /** Answers 200 with `text` exactly (an ACME key authorization) and closes. */
  #answer(text: string): void {
    const body = encoder.encode(text);
    this.#options.onExchange?.({ host: "", status: 200, bytesIn: 0, bytesOut: body.length, ms: 0 });
    this.#phase = "closing";
    this.#visitor.write(responseHead(200, [
      ["content-type", "application/octet-stream"],
      ["content-length", String(body.length)],
      ["connection", "close"],
    ]));
    this.#visitor.write(body);
    this.#finish();
  }

  /** A request body that broke its framing after the head went on: 400 if no response began. */
  #badRequestBody(exchange: Exchange, message: string): void {
    if (exchange.framing === undefined && exchange.bytesOut === 0) {
      this.#drop(exchange);
      this.#refuse(400, message, exchange.host);
      return;
    }
    this.#breakOff(exchange, message);
  }

  /**
   * The client's side failed: 502 (or `status`, with the policy's page when `message` is empty) if
   * no response began, and the connection kept when the request was all read and nobody asked to
   * close; else the visitor's connection is cut.
   */
  #badGateway(exchange: Exchange, message: string, status = 502): void {
    if (exchange.bytesOut === 0) {
      exchange.status = status;
      this.#drop(exchange);
      const keep = exchange.bodyDone && !exchange.closeAfter && !this.#visitorEnded;
      const kept = this.#refuse(status, message, exchange.host, keep ? exchange.method : undefined);
      if (kept && this.#pending.length > 0) this.#startHead();
      return;
    }
    this.#breakOff(exchange, message);
  }

  /** A response that cannot be completed after it began: the visitor's connection is cut. */
  #breakOff(exchange: Exchange, _message: string): void {
    this.#drop(exchange);
    this.#phase = "closing";
    this.#visitor.close();
  }

  /**
   * Lets go of `exchange` and resets its stream: its handlers are detached first, so the reset's
   * own close event does not come back into this connection.
   */
  #drop(exchange: Exchange): void {
    this.#count(exchange);
    exchange.stream.onData = null;
    exchange.stream.onEnd = null;
    exchange.stream.onClose = null;
    exchange.stream.onDrain = null;
    if (this.#exchange === exchange) this.#exchange = undefined;
    clearTimeout(this.#responseTimer);
    exchange.stream.reset();
  }

  /**
   * Tells the route what `exchange` moved, once, when it is over (reported, or dropped): per
   * request, from the counts kept anyway, so the tunnel's bytes move with no work per chunk.
   */
  #count(exchange: Exchange): void {
    if (exchange.counted) return;
    exchange.counted = true;
    exchange.route.exchanged?.(exchange.bytesIn, exchange.bytesOut);
    exchange.leave?.();
  }

  #finish(): void {
    if (this.#phase !== "closing") this.#phase = "closing";
    clearTimeout(this.#timer);
    clearTimeout(this.#responseTimer);
    this.#dropKept();
    this.#visitor.end();
  }

  /** The visitor connection is going: so does its kept stream. */
  #dropKept(): void {
    const kept = this.#kept;
    if (!kept) return;
    this.#kept = undefined;
    kept.stream.onData = null;
    kept.stream.onEnd = null;
    kept.stream.onClose = null;
    kept.stream.end();
  }
}

/**
 * Why a request got no response, for the visitor's 502: the client resets the request's stream
 * with the reason its local service could not be dialed, which says more than a closed stream.
 */
function noResponse(error: Error | undefined): string {
  switch ((error as { resetCode?: number } | undefined)?.resetCode) {
    case ResetReason.DialRefused:
      return "the tunnel's local service refused the connection (is it running?)";
    case ResetReason.DialTimeout:
      return "the tunnel's local service did not answer in time";
    case ResetReason.DialFailed:
    case ResetReason.NetworkUnreachable:
      return "the tunnel's local service could not be reached";
    default:
      return "the service closed without a response";
  }
}

/**
 * The visitor a request is from, for a tunnel's policy: the connection's address, unless that is
 * a trusted front's; then the nearest address in its `X-Forwarded-For` (else `Forwarded`) that is
 * not a trusted front's, walking from the right (the entries a visitor wrote itself come first).
 */
export function forwardedVisitor(
  remote: string,
  fields: [string, string][],
  trusted: AddressRules | undefined,
): string {
  if (!trusted) return addressHost(remote);
  const ip = visitorIp(remote);
  if (!ip || !trusted.admits(ip)) return addressHost(remote);
  let chain = fieldValues(fields, "x-forwarded-for").join(",").split(",").map((v) => v.trim());
  if (chain.every((v) => v === "")) {
    chain = fieldValues(fields, "forwarded").join(",").split(",").map((element) => {
      const match = /(?:^|;)\s*for="?\[?([^\]";]+)/i.exec(element.trim());
      return match ? match[1] : "";
    });
  }
  for (let i = chain.length - 1; i >= 0; i--) {
    const hop = visitorIp(chain[i]);
    if (!hop) return chain[i] || addressHost(remote); // unreadable: judged as it is written
    if (!trusted.admits(hop)) return formatIp(hop);
  }
  return addressHost(remote);
}

/** The host part of a `host:port` address (brackets removed); a descriptive name as it is. */
function addressHost(address: string): string {
  return splitHostPort(address)?.host ?? address;
}
