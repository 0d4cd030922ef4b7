/**
 * Follows the HTTP/1.1 exchanges of one connection from the bytes passing in each direction,
 * without ever changing, holding back or owning them: request and response heads (split across
 * chunks anywhere), bodies framed by `Content-Length` or chunked (the chunked coding removed from
 * what is captured), several exchanges per connection (keep-alive, pipelining: responses are
 * matched to requests in order), and an upgrade (`101 Switching Protocols`), after which only
 * WebSocket frames are counted. Each exchange goes to a {@linkcode Recorder}, which bounds what is
 * kept.
 *
 * It is fed from inside the relay's data callbacks, before each chunk is written on: a chunk may
 * be a pooled buffer reused once the callback returns, so whatever is kept is copied first (head
 * bytes while a head is incomplete, body bytes within the limit), and nothing else is held. It
 * never throws into the relay: bytes it cannot follow make it stop following the connection,
 * and say why on the exchange at hand.
 *
 * @module
 */

import { parseMessageHead } from "../../transport/http/framing.ts";
import { emptyBody, type Exchange, fieldsBytes, type Recorder } from "./recorder.ts";

/** Largest head followed; a longer one stops the observation of its connection. */
export const MAX_OBSERVED_HEAD = 64 * 1024;

/** Field names whose values are redacted unless redaction is off. */
const SECRET_FIELDS = new Set(["authorization", "proxy-authorization", "cookie", "set-cookie"]);

/** What a redacted value is replaced with. */
export const REDACTED = "[redacted]";

/** Where the observed connection came from and went to. */
export interface ObservedConnection {
  /** The HTTP tunnel's host name. */
  tunnel: string;
  /** The local service (`host:port`). */
  local: string;
  /** The visitor's address (`replay` for a replay). */
  remote: string;
  /** The exchange the first request on this connection replays. */
  replayOf?: number;
}

/** Options of an observer. */
export interface ObserverOptions {
  /** Keep `Authorization`, `Cookie` and `Set-Cookie` values as they were (default false). */
  unredacted?: boolean;
  /** Called with each exchange as it is added (a replay waits for its own). */
  onExchange?: (exchange: Exchange) => void;
}

type Mode =
  /** Reading a head. */
  | "head"
  /** Inside a body of known length. */
  | "length"
  /** Inside a chunked body. */
  | "chunked"
  /** Inside a response body that ends with the connection. */
  | "close"
  /** After an upgrade: WebSocket frames. */
  | "frames"
  /** Not following any more. */
  | "off";

enum Chunk {
  Size,
  Extension,
  SizeLf,
  Data,
  DataCr,
  DataLf,
  TrailerStart,
  Trailer,
  TrailerLf,
  FinalLf,
}

/** One direction of the connection. */
class Side {
  mode: Mode = "head";
  /** The head so far (a copy), while `mode` is head. */
  head: Uint8Array | undefined;
  headLength = 0;
  /** Where the last complete head starts and ends in `head`. */
  headStart = 0;
  headEnd = 0;
  /** Body bytes left in length mode. */
  remaining = 0;
  chunk = Chunk.Size;
  chunkLeft = 0;
  chunkDigits = 0;
  /** The exchange whose body this side reads. */
  exchange: Exchange | undefined;
  /** WebSocket frame parsing: header bytes so far, the header's length, payload left. */
  frameHead = new Uint8Array(14);
  frameHeadLength = 0;
  frameHeadNeed = 2;
  framePayloadLeft = 0;
}

/** Follows one connection's exchanges into a recorder; see the module notes. */
export class HttpObserver {
  readonly #recorder: Recorder;
  readonly #info: ObservedConnection;
  readonly #options: ObserverOptions;
  readonly #connection: number;
  readonly #request = new Side();
  readonly #response = new Side();
  /** Exchanges whose response head has not come yet, oldest first. */
  readonly #waiting: Exchange[] = [];
  /** Exchanges not finished (for close). */
  readonly #open = new Set<Exchange>();
  /** performance.now() of each open exchange's first byte. */
  readonly #started = new Map<Exchange, number>();
  /** performance.now() of the first byte of the request head being read. */
  #headStart = 0;
  /** performance.now() of the first byte of the response head being read. */
  #responseStart = 0;
  #upgraded: Exchange | undefined;
  /** When the upgraded exchange's counts were last told to the subscribers. */
  #countsToldAt = -Infinity;
  #replayOf: number | undefined;
  #closed = false;

  /** An observer of a new connection described by `info`, recording into `recorder`. */
  constructor(recorder: Recorder, info: ObservedConnection, options: ObserverOptions = {}) {
    this.#recorder = recorder;
    this.#info = info;
    this.#options = options;
    this.#replayOf = info.replayOf;
    this.#connection = recorder.connection();
  }

  /** Bytes from the visitor to the service; never throws, never keeps `chunk`. */
  request(chunk: Uint8Array): void {
    const side = this.#request;
    if (side.mode === "off" || this.#closed) return;
    try {
      this.#feed(side, chunk, true);
    } catch (error) {
      this.#stop(side, (error as Error).message);
    }
  }

  /** Bytes from the service to the visitor; never throws, never keeps `chunk`. */
  response(chunk: Uint8Array): void {
    const side = this.#response;
    if (side.mode === "off" || this.#closed) return;
    try {
      this.#feed(side, chunk, false);
    } catch (error) {
      this.#stop(side, (error as Error).message);
    }
  }

  /**
   * The connection is over (`error` when it failed): a response delimited by the close ends
   * here, an upgraded connection is done, and anything else unfinished failed.
   */
  close(error?: Error): void {
    if (this.#closed) return;
    this.#closed = true;
    for (const exchange of this.#open) {
      const delimited = this.#response.mode === "close" && this.#response.exchange === exchange;
      if (exchange.state === "websocket" || (delimited && !error)) {
        this.#finish(exchange, "done");
      } else {
        exchange.error ??= error
          ? `connection failed: ${error.message}`
          : exchange.state === "pending"
          ? "the connection closed before a response"
          : "the connection closed before the response ended";
        this.#finish(exchange, "failed");
      }
    }
    this.#request.head = this.#response.head = undefined;
  }

  #feed(side: Side, chunk: Uint8Array, isRequest: boolean): void {
    let at = 0;
    // Each turn consumes at least one byte or returns, so the loop ends within chunk.length.
    while (at < chunk.length) {
      switch (side.mode) {
        case "head": {
          if (side.headLength === 0) {
            if (isRequest) this.#headStart = performance.now();
            else this.#responseStart = performance.now();
          }
          const end = this.#readHead(side, chunk, at);
          if (end < 0) return;
          at = end;
          if (isRequest) this.#requestHead(side);
          else this.#responseHead(side);
          break;
        }
        case "length": {
          const take = Math.min(side.remaining, chunk.length - at);
          this.#body(side, isRequest, chunk, at, at + take);
          at += take;
          side.remaining -= take;
          if (side.remaining === 0) this.#bodyEnd(side, isRequest);
          break;
        }
        case "chunked":
          at = this.#chunked(side, isRequest, chunk, at);
          break;
        case "close":
          this.#body(side, isRequest, chunk, at, chunk.length);
          return;
        case "frames":
          this.#frames(side, isRequest, chunk, at);
          return;
        case "off":
          return;
      }
    }
  }

  /** Copies head bytes; returns the index after the head's blank line, or -1 (not yet). */
  #readHead(side: Side, chunk: Uint8Array, at: number): number {
    const had = side.headLength;
    const room = MAX_OBSERVED_HEAD - had;
    const take = Math.min(room, chunk.length - at);
    if (!side.head) side.head = new Uint8Array(Math.min(MAX_OBSERVED_HEAD, Math.max(4096, take)));
    if (side.head.length < had + take) {
      const bigger = new Uint8Array(Math.min(MAX_OBSERVED_HEAD, Math.max(had + take, had * 2)));
      bigger.set(side.head.subarray(0, had));
      side.head = bigger;
    }
    side.head.set(chunk.subarray(at, at + take), had);
    side.headLength = had + take;
    const head = side.head;
    // Heads may start with empty lines between messages (RFC 9112 §2.2): skip them.
    let begin = 0;
    while (begin + 1 < side.headLength && head[begin] === 13 && head[begin + 1] === 10) begin += 2;
    for (let i = Math.max(begin + 3, had); i < side.headLength; i++) {
      if (head[i] === 10 && head[i - 1] === 13 && head[i - 2] === 10 && head[i - 3] === 13) {
        side.headLength = 0;
        side.headStart = begin;
        side.headEnd = i + 1;
        return at + (i + 1 - had);
      }
    }
    if (side.headLength >= MAX_OBSERVED_HEAD) {
      throw new Error(`a head longer than ${MAX_OBSERVED_HEAD} bytes`);
    }
    return -1;
  }

  #parsedHead(side: Side): { startLine: string; fields: [string, string][] } {
    const bytes = side.head!.subarray(side.headStart, side.headEnd);
    const head = parseMessageHead(bytes);
    // The head buffer is reused for the next head; a big one is let go.
    if (side.head!.length > 4096) side.head = undefined;
    if (!head) throw new Error("a head that is not HTTP/1.1");
    if (!this.#options.unredacted) {
      for (const field of head.fields) {
        if (SECRET_FIELDS.has(field[0].toLowerCase())) field[1] = REDACTED;
      }
    }
    return head;
  }

  #requestHead(side: Side): void {
    const { startLine, fields } = this.#parsedHead(side);
    const match = /^([!#$%&'*+\-.^_`|~0-9A-Za-z]+) (\S+) (HTTP\/1\.[01])$/.exec(startLine);
    if (!match) throw new Error(`not an HTTP/1.1 request line: ${startLine.slice(0, 80)}`);
    const [, method, target, version] = match;
    const exchange = this.#recorder.add({
      replayOf: this.#replayOf,
      tunnel: this.#info.tunnel,
      local: this.#info.local,
      remote: this.#info.remote,
      connection: this.#connection,
      method,
      target,
      version,
      requestHeaders: fields,
      requestBody: emptyBody(),
      responseBody: emptyBody(),
      startedAt: Date.now() - (performance.now() - this.#headStart),
      state: "pending",
    });
    this.#replayOf = undefined;
    this.#open.add(exchange);
    this.#started.set(exchange, this.#headStart);
    this.#waiting.push(exchange);
    this.#options.onExchange?.(exchange);
    side.exchange = exchange;
    const framing = bodyFraming(fields, true);
    if (framing === "chunked") this.#startChunked(side);
    else if (typeof framing === "number" && framing > 0) {
      side.mode = "length";
      side.remaining = framing;
    } else this.#bodyEnd(side, true);
  }

  #responseHead(side: Side): void {
    const { startLine, fields } = this.#parsedHead(side);
    const match = /^HTTP\/1\.[01] (\d{3})(?: (.*))?$/.exec(startLine);
    if (!match) throw new Error(`not an HTTP/1.1 status line: ${startLine.slice(0, 80)}`);
    const status = Number(match[1]);
    const exchange = this.#waiting[0];
    if (!exchange) throw new Error("a response without a request");
    if (status >= 100 && status < 200 && status !== 101) return; // interim: the real one follows
    this.#waiting.shift();
    exchange.status = status;
    exchange.reason = match[2] ?? "";
    exchange.responseHeaders = fields;
    // From the first byte of the head, which may have come in an earlier chunk than its end;
    // an interim 1xx before it does not count.
    exchange.firstByteMs = Math.max(0, this.#responseStart - this.#started.get(exchange)!);
    exchange.state = "responding";
    this.#recorder.grow(exchange, fieldsBytes(fields) + startLine.length);
    side.exchange = exchange;
    if (status === 101 || (exchange.method === "CONNECT" && status >= 200 && status < 300)) {
      exchange.state = "websocket";
      exchange.upgrade = { framesIn: 0, framesOut: 0, bytesIn: 0, bytesOut: 0 };
      this.#upgraded = exchange;
      side.mode = "frames";
      this.#request.mode = "frames";
      this.#request.exchange = exchange;
      this.#recorder.updated(exchange);
      return;
    }
    this.#recorder.updated(exchange);
    const bodyless = exchange.method === "HEAD" || status === 204 || status === 304;
    const framing = bodyless ? 0 : bodyFraming(fields, false);
    if (framing === "chunked") this.#startChunked(side);
    else if (framing === "close") side.mode = "close";
    else if (framing > 0) {
      side.mode = "length";
      side.remaining = framing;
    } else this.#bodyEnd(side, false);
  }

  #startChunked(side: Side): void {
    side.mode = "chunked";
    side.chunk = Chunk.Size;
    side.chunkLeft = 0;
    side.chunkDigits = 0;
  }

  #body(side: Side, isRequest: boolean, chunk: Uint8Array, start: number, end: number): void {
    const exchange = side.exchange!;
    const body = isRequest ? exchange.requestBody : exchange.responseBody;
    this.#recorder.capture(exchange, body, chunk, start, end);
  }

  #bodyEnd(side: Side, isRequest: boolean): void {
    side.mode = "head";
    const exchange = side.exchange!;
    side.exchange = undefined;
    if (isRequest) {
      // An upgrade request's connection carries frames only if the answer is a 101; until
      // then nothing else is sent on it.
      return;
    }
    this.#finish(exchange, "done");
  }

  #finish(exchange: Exchange, state: "done" | "failed"): void {
    exchange.state = state;
    exchange.endMs = performance.now() - (this.#started.get(exchange) ?? performance.now());
    this.#open.delete(exchange);
    this.#started.delete(exchange);
    this.#recorder.updated(exchange);
  }

  /** Reads a chunked body's framing, capturing its data; returns where it stopped. */
  #chunked(side: Side, isRequest: boolean, chunk: Uint8Array, from: number): number {
    let i = from;
    while (i < chunk.length) {
      const byte = chunk[i];
      switch (side.chunk) {
        case Chunk.Size: {
          const digit = hexValue(byte);
          if (digit >= 0) {
            if (++side.chunkDigits > 13) throw new Error("a chunk too large to follow");
            side.chunkLeft = side.chunkLeft * 16 + digit;
          } else if (side.chunkDigits === 0) throw new Error("a chunk without a size");
          else if (byte === 13) side.chunk = Chunk.SizeLf;
          else side.chunk = Chunk.Extension;
          i++;
          break;
        }
        case Chunk.Extension:
          if (byte === 13) side.chunk = Chunk.SizeLf;
          i++;
          break;
        case Chunk.SizeLf:
          if (byte !== 10) throw new Error("a chunk size line without LF");
          side.chunk = side.chunkLeft === 0 ? Chunk.TrailerStart : Chunk.Data;
          side.chunkDigits = 0;
          i++;
          break;
        case Chunk.Data: {
          const take = Math.min(side.chunkLeft, chunk.length - i);
          this.#body(side, isRequest, chunk, i, i + take);
          i += take;
          side.chunkLeft -= take;
          if (side.chunkLeft === 0) side.chunk = Chunk.DataCr;
          break;
        }
        case Chunk.DataCr:
          if (byte !== 13) throw new Error("chunk data longer than its size");
          side.chunk = Chunk.DataLf;
          i++;
          break;
        case Chunk.DataLf:
          if (byte !== 10) throw new Error("chunk data without CRLF");
          side.chunk = Chunk.Size;
          i++;
          break;
        case Chunk.TrailerStart:
          side.chunk = byte === 13 ? Chunk.FinalLf : Chunk.Trailer;
          i++;
          break;
        case Chunk.Trailer:
          if (byte === 13) side.chunk = Chunk.TrailerLf;
          i++;
          break;
        case Chunk.TrailerLf:
          if (byte !== 10) throw new Error("a trailer line without LF");
          side.chunk = Chunk.TrailerStart;
          i++;
          break;
        case Chunk.FinalLf:
          if (byte !== 10) throw new Error("a chunked body without its final CRLF");
          this.#bodyEnd(side, isRequest);
          return i + 1;
      }
    }
    return i;
  }

  /** Counts WebSocket frames (header parsed, payload skipped) after an upgrade. */
  #frames(side: Side, isRequest: boolean, chunk: Uint8Array, from: number): void {
    const counts = this.#upgraded!.upgrade!;
    const n = chunk.length - from;
    if (isRequest) counts.bytesIn += n;
    else counts.bytesOut += n;
    let i = from;
    while (i < chunk.length) {
      if (side.framePayloadLeft > 0) {
        const take = Math.min(side.framePayloadLeft, chunk.length - i);
        side.framePayloadLeft -= take;
        i += take;
        continue;
      }
      side.frameHead[side.frameHeadLength++] = chunk[i++];
      if (side.frameHeadLength === 2) {
        const length7 = side.frameHead[1] & 0x7f;
        side.frameHeadNeed = 2 + (length7 === 126 ? 2 : length7 === 127 ? 8 : 0) +
          (side.frameHead[1] & 0x80 ? 4 : 0);
      }
      if (side.frameHeadLength >= 2 && side.frameHeadLength === side.frameHeadNeed) {
        const head = side.frameHead;
        const length7 = head[1] & 0x7f;
        let length = length7;
        if (length7 === 126) length = (head[2] << 8) | head[3];
        else if (length7 === 127) {
          length = 0;
          for (let k = 2; k < 10; k++) length = length * 256 + head[k];
        }
        if (isRequest) counts.framesIn++;
        else counts.framesOut++;
        side.framePayloadLeft = length;
        side.frameHeadLength = 0;
        side.frameHeadNeed = 2;
      }
    }
    // The live list follows the counts, once a second at most.
    const now = performance.now();
    if (now - this.#countsToldAt >= 1000) {
      this.#countsToldAt = now;
      this.#recorder.updated(this.#upgraded!);
    }
  }

  #stop(side: Side, why: string): void {
    side.mode = "off";
    side.head = undefined;
    const exchange = side.exchange ?? this.#waiting[0];
    if (exchange && !exchange.error) {
      exchange.error = `the inspector stopped following this connection: ${why}`;
      this.#recorder.updated(exchange);
    }
    // Both directions: what follows on the other cannot be matched any more.
    const other = side === this.#request ? this.#response : this.#request;
    other.mode = "off";
    other.head = undefined;
  }
}

/**
 * How a body is delimited, leniently (the daemon has refused the ambiguous already): "chunked",
 * "close" (a response without a length), or a length (0: none, as for a request without one).
 */
function bodyFraming(fields: readonly [string, string][], isRequest: boolean) {
  let length: number | undefined;
  let chunked = false;
  let coded = false;
  for (const [name, value] of fields) {
    const lower = name.toLowerCase();
    if (lower === "transfer-encoding") {
      coded = true;
      chunked = value.split(",").at(-1)!.trim().toLowerCase() === "chunked";
    } else if (lower === "content-length") {
      if (!/^\d{1,15}$/.test(value)) throw new Error(`a Content-Length of "${value}"`);
      length = Number(value);
    }
  }
  if (coded) {
    if (chunked) return "chunked" as const;
    if (isRequest) throw new Error("a request body of unknown length");
    return "close" as const;
  }
  if (length !== undefined) return length;
  return isRequest ? 0 : "close" as const;
}

function hexValue(byte: number): number {
  if (byte >= 48 && byte <= 57) return byte - 48;
  if (byte >= 65 && byte <= 70) return byte - 55;
  if (byte >= 97 && byte <= 102) return byte - 87;
  return -1;
}
