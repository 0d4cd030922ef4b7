/**
 * Where an HTTP/1.1 message ends, for a proxy that passes messages through without decoding
 * their bodies: the head's fields as they came (order, case and repeats kept, so they can be
 * forwarded as they were), how the body is framed (RFC 9112 §6), and a scanner that finds the end
 * of a chunked body in a byte stream split anywhere. A proxy that routes each request of a
 * keep-alive connection on its own needs exactly this, and needs it strict: a request whose
 * length two parties could read differently (both `Content-Length` and `Transfer-Encoding`, two
 * lengths, a coding other than chunked last) is refused rather than guessed at, which is what
 * request smuggling needs to work.
 *
 * @module
 */

/** A message head: its start line and its fields, as received. */
export interface MessageHead {
  /** The request line or status line. */
  startLine: string;
  /** `[name, value]` in order; names keep their case, values are trimmed of surrounding spaces. */
  fields: [string, string][];
}

/** RFC 9110 token: what a field name may be made of. */
const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
/** Field value characters: visible ASCII, spaces, tabs and obs-text; no CR, LF or NUL. */
const FIELD_VALUE = /^[\t\x20-\x7e\x80-\xff]*$/;

/**
 * Parses a message head (up to and including its blank line), strictly: a field line that folds
 * (starts with a space or tab), has no colon, a name that is not a token, whitespace before the
 * colon, or a value with control characters makes the whole head invalid (undefined).
 *
 * @example
 * ```ts
 * import { parseMessageHead } from "./framing.ts";
 * const head = parseMessageHead(new TextEncoder().encode("GET / HTTP/1.1\r\nHost: a\r\n\r\n"));
 * console.assert(head?.fields[0][0] === "Host" && head.fields[0][1] === "a");
 * ```
 */
export function parseMessageHead(head: Uint8Array): MessageHead | undefined {
  // Latin-1: every byte is one character, so nothing a client sends is lost or merged.
  const lines = new TextDecoder("latin1").decode(head).split("\r\n");
  const fields: [string, string][] = [];
  for (const line of lines.slice(1)) {
    if (line === "") continue;
    const colon = line.indexOf(":");
    if (colon <= 0) return undefined;
    const name = line.slice(0, colon);
    const value = line.slice(colon + 1).replace(/^[ \t]+|[ \t]+$/g, "");
    if (!TOKEN.test(name) || !FIELD_VALUE.test(value)) return undefined;
    fields.push([name, value]);
  }
  return { startLine: lines[0], fields };
}

/** The values of field `name` (any case), in order. */
export function fieldValues(fields: readonly [string, string][], name: string): string[] {
  const lower = name.toLowerCase();
  return fields.filter(([n]) => n.toLowerCase() === lower).map(([, v]) => v);
}

/** How a message's body is delimited. */
export type BodyFraming =
  /** No body. */
  | { kind: "none" }
  /** Exactly `length` bytes. */
  | { kind: "length"; length: number }
  /** Chunked transfer coding: ends with its last chunk and trailers ({@linkcode ChunkedScanner}). */
  | { kind: "chunked" }
  /** Until the connection closes (responses only). */
  | { kind: "close" }
  /** The connection becomes a tunnel after this head (a 101 or a 2xx to CONNECT). */
  | { kind: "tunnel" };

/** A message whose framing cannot be trusted; `status` is what to answer a request with. */
export class FramingError extends Error {
  /** 400 for a malformed or ambiguous message, 501 for a transfer coding we do not know. */
  readonly status: 400 | 501;

  /** A framing error answered with `status`. */
  constructor(status: 400 | 501, message: string) {
    super(message);
    this.name = "FramingError";
    this.status = status;
  }
}

/** The largest body length we accept in `Content-Length` (bytes that fit a double exactly). */
const MAX_LENGTH = Number.MAX_SAFE_INTEGER;

/** The value of a single `Content-Length`, or a {@linkcode FramingError}. */
function contentLength(values: string[]): number {
  // Repeated or listed lengths ("5, 5") are refused even when equal: RFC 9112 §6.3 lets a
  // recipient refuse them, and any tolerance here is a difference from some other parser.
  if (values.length !== 1 || !/^[0-9]{1,16}$/.test(values[0])) {
    throw new FramingError(400, `bad Content-Length: ${values.join(", ")}`);
  }
  const length = Number(values[0]);
  if (length > MAX_LENGTH) throw new FramingError(400, "Content-Length too large");
  return length;
}

/** Whether `Transfer-Encoding` ends in chunked; a {@linkcode FramingError} for what we refuse. */
function chunkedLast(values: string[]): true {
  const codings = values.flatMap((v) => v.split(",")).map((c) => c.trim().toLowerCase());
  if (codings.some((c) => c === "")) throw new FramingError(400, "empty transfer coding");
  if (codings.at(-1) !== "chunked") {
    throw new FramingError(501, `transfer coding not supported: ${values.join(", ")}`);
  }
  if (codings.indexOf("chunked") !== codings.length - 1) {
    throw new FramingError(400, "chunked applied more than once");
  }
  return true;
}

/**
 * How a request's body is framed (RFC 9112 §6.3), refusing what a smuggler needs: both
 * `Transfer-Encoding` and `Content-Length`, a repeated or listed length, a length that is not
 * digits, a transfer coding in an HTTP/1.0 request, codings that do not end in chunked.
 *
 * @example
 * ```ts
 * import { requestFraming } from "./framing.ts";
 * console.assert(requestFraming("1.1", [["Content-Length", "5"]]).kind === "length");
 * console.assert(requestFraming("1.1", []).kind === "none");
 * ```
 */
export function requestFraming(
  version: "1.0" | "1.1",
  fields: readonly [string, string][],
): BodyFraming {
  const te = fieldValues(fields, "transfer-encoding");
  const cl = fieldValues(fields, "content-length");
  if (te.length > 0) {
    if (cl.length > 0) throw new FramingError(400, "both Transfer-Encoding and Content-Length");
    if (version === "1.0") throw new FramingError(400, "Transfer-Encoding in an HTTP/1.0 request");
    chunkedLast(te);
    return { kind: "chunked" };
  }
  if (cl.length > 0) {
    const length = contentLength(cl);
    return length === 0 ? { kind: "none" } : { kind: "length", length };
  }
  return { kind: "none" };
}

/**
 * How a response to a `method` request is framed (RFC 9112 §6.3): no body for HEAD, 1xx, 204 and
 * 304; a tunnel after 101 or a 2xx to CONNECT; else chunked, a length, or until close. A response
 * with both `Transfer-Encoding` and `Content-Length` is refused too (the proxy answers 502).
 */
export function responseFraming(
  method: string,
  status: number,
  fields: readonly [string, string][],
): BodyFraming {
  if (status === 101 || (method === "CONNECT" && status >= 200 && status < 300)) {
    return { kind: "tunnel" };
  }
  if (method === "HEAD" || (status >= 100 && status < 200) || status === 204 || status === 304) {
    return { kind: "none" };
  }
  const te = fieldValues(fields, "transfer-encoding");
  const cl = fieldValues(fields, "content-length");
  if (te.length > 0) {
    if (cl.length > 0) throw new FramingError(400, "both Transfer-Encoding and Content-Length");
    const codings = te.flatMap((v) => v.split(",")).map((c) => c.trim().toLowerCase());
    // A response whose codings do not end in chunked is delimited by the close (§6.3 item 4).
    return codings.at(-1) === "chunked" ? { kind: "chunked" } : { kind: "close" };
  }
  if (cl.length > 0) {
    const length = contentLength(cl);
    return length === 0 ? { kind: "none" } : { kind: "length", length };
  }
  return { kind: "close" };
}

/** The longest chunk-size line (size, extensions) we accept. */
const MAX_SIZE_LINE = 4096;
/** The most trailer bytes we accept after the last chunk. */
const MAX_TRAILERS = 16 * 1024;

enum Scan {
  /** Reading the chunk-size line (hex digits, then extensions) up to its CR. */
  SizeLine,
  /** Expecting the LF that ends the size line. */
  SizeLf,
  /** Inside chunk data. */
  Data,
  /** Expecting the CR after chunk data. */
  DataCr,
  /** Expecting the LF after chunk data. */
  DataLf,
  /** At the start of a trailer line (an empty one ends the body). */
  TrailerStart,
  /** Inside a trailer line, up to its CR. */
  Trailer,
  /** Expecting the LF that ends a trailer line. */
  TrailerLf,
  /** Expecting the LF of the final empty line. */
  FinalLf,
  /** The body has ended. */
  Done,
}

/**
 * Finds where a chunked body ends, fed the bytes after the head in pieces of any size. It checks
 * the framing (hex sizes, CRLFs, bounded size lines and trailers) but does not decode: the bytes
 * pass through as they came.
 *
 * @example
 * ```ts
 * import { ChunkedScanner } from "./framing.ts";
 * const scanner = new ChunkedScanner();
 * const bytes = new TextEncoder().encode("3\r\nabc\r\n0\r\n\r\nNEXT");
 * console.assert(scanner.push(bytes) === 15 && scanner.done);
 * ```
 */
export class ChunkedScanner {
  #state = Scan.SizeLine;
  #size = 0;
  #sizeDigits = 0;
  /** 0: in the size's digits; 1: whitespace after them; 2: in the extensions. */
  #sizePart = 0;
  #lineLength = 0;
  #trailerBytes = 0;

  /** Whether the body has ended. */
  get done(): boolean {
    return this.#state === Scan.Done;
  }

  /**
   * Scans `bytes` from `from`; returns the index just past the body's end when it ends in them,
   * else -1 (all of them belong to the body). Throws a {@linkcode FramingError} on bad framing.
   */
  push(bytes: Uint8Array, from = 0): number {
    let i = from;
    while (i < bytes.length) {
      const byte = bytes[i];
      switch (this.#state) {
        case Scan.SizeLine:
          if (byte === 13) {
            if (this.#sizeDigits === 0) throw new FramingError(400, "chunk size missing");
            this.#state = Scan.SizeLf;
          } else if (++this.#lineLength > MAX_SIZE_LINE) {
            throw new FramingError(400, "chunk size line too long");
          } else if (this.#sizePart === 2) {
            if (byte === 10 || byte === 0) throw new FramingError(400, "bad chunk extension");
          } else if (byte === 59) { // ";" starts the extensions
            if (this.#sizeDigits === 0) throw new FramingError(400, "chunk size missing");
            this.#sizePart = 2;
          } else if (byte === 32 || byte === 9) { // whitespace before ";" (BWS)
            if (this.#sizeDigits === 0) throw new FramingError(400, "chunk size missing");
            this.#sizePart = 1;
          } else if (this.#sizePart === 1) {
            throw new FramingError(400, "bad chunk size");
          } else {
            const digit = hexValue(byte);
            if (digit < 0) throw new FramingError(400, "bad chunk size");
            if (++this.#sizeDigits > 13) throw new FramingError(400, "chunk too large");
            this.#size = this.#size * 16 + digit;
          }
          i++;
          break;
        case Scan.SizeLf:
          if (byte !== 10) throw new FramingError(400, "chunk size line without LF");
          i++;
          if (this.#size === 0) {
            this.#state = Scan.TrailerStart;
          } else {
            this.#state = Scan.Data;
          }
          this.#sizeDigits = 0;
          this.#sizePart = 0;
          this.#lineLength = 0;
          break;
        case Scan.Data: {
          const take = Math.min(this.#size, bytes.length - i);
          this.#size -= take;
          i += take;
          if (this.#size === 0) this.#state = Scan.DataCr;
          break;
        }
        case Scan.DataCr:
          if (byte !== 13) throw new FramingError(400, "chunk data longer than its size");
          this.#state = Scan.DataLf;
          i++;
          break;
        case Scan.DataLf:
          if (byte !== 10) throw new FramingError(400, "chunk data without CRLF");
          this.#state = Scan.SizeLine;
          i++;
          break;
        case Scan.TrailerStart:
          if (byte === 13) {
            this.#state = Scan.FinalLf;
            i++;
            break;
          }
          this.#state = Scan.Trailer;
          break;
        case Scan.Trailer:
          if (++this.#trailerBytes > MAX_TRAILERS) throw new FramingError(400, "trailers too long");
          if (byte === 13) this.#state = Scan.TrailerLf;
          else if (byte === 10 || byte === 0) throw new FramingError(400, "bad trailer line");
          i++;
          break;
        case Scan.TrailerLf:
          if (byte !== 10) throw new FramingError(400, "trailer line without LF");
          this.#state = Scan.TrailerStart;
          i++;
          break;
        case Scan.FinalLf:
          if (byte !== 10) throw new FramingError(400, "chunked body without final CRLF");
          this.#state = Scan.Done;
          return i + 1;
        case Scan.Done:
          return i;
      }
    }
    return -1;
  }
}

function hexValue(byte: number): number {
  if (byte >= 48 && byte <= 57) return byte - 48;
  if (byte >= 65 && byte <= 70) return byte - 55;
  if (byte >= 97 && byte <= 102) return byte - 87;
  return -1;
}
