/**
 * HTTP/1.1 message heads, as our own servers read and write them (`ws/server.ts`,
 * `http/server.ts`): strict parsing of a request head and the bytes of a response head. Strict
 * means what RFC 9112 lets a server refuse is refused: obs-fold, whitespace before a colon, header
 * names or values `Headers` rejects, a request line that is not `METHOD /target HTTP/1.x`.
 *
 * @module
 */

/** Largest request head our servers read; a longer one is answered 431. */
export const MAX_REQUEST_HEAD = 16 * 1024;

/** A parsed request head. */
export interface RequestHead {
  /** `GET`, `POST`, … */
  method: string;
  /** The origin-form target: path and query. */
  target: string;
  /** `1.1` or `1.0`. */
  version: "1.0" | "1.1";
  /** The header fields; repeated ones joined with ", " as `Headers` does. */
  headers: Headers;
}

/** Reason phrases of the statuses our servers send (the phrase is informative only). */
const REASONS: Record<number, string> = {
  101: "Switching Protocols",
  200: "OK",
  201: "Created",
  202: "Accepted",
  204: "No Content",
  301: "Moved Permanently",
  302: "Found",
  304: "Not Modified",
  400: "Bad Request",
  401: "Unauthorized",
  403: "Forbidden",
  404: "Not Found",
  405: "Method Not Allowed",
  408: "Request Timeout",
  409: "Conflict",
  411: "Length Required",
  413: "Content Too Large",
  415: "Unsupported Media Type",
  421: "Misdirected Request",
  426: "Upgrade Required",
  429: "Too Many Requests",
  431: "Request Header Fields Too Large",
  500: "Internal Server Error",
  501: "Not Implemented",
  502: "Bad Gateway",
  503: "Service Unavailable",
  504: "Gateway Timeout",
};

/** Index just past the blank line that ends a message head in `bytes`, or -1 if not there yet. */
export function headEnd(bytes: Uint8Array, from = 0): number {
  for (let i = Math.max(from, 3); i < bytes.length; i++) {
    if (bytes[i] === 10 && bytes[i - 1] === 13 && bytes[i - 2] === 10 && bytes[i - 3] === 13) {
      return i + 1;
    }
  }
  return -1;
}

/**
 * Index of the first LF in `bytes` that no CR precedes, or -1. RFC 9112 §2.2 lets a recipient
 * take a bare LF as a line's end; our parsers do not (they split lines on CRLF), so a head with
 * one can never be accepted and a server can refuse it at once instead of waiting for a CRLF CRLF
 * that may never come (`GET / HTTP/1.1\n\n`).
 *
 * @example
 * ```ts
 * import { bareLineFeed } from "./head.ts";
 * const bytes = (text: string) => new TextEncoder().encode(text);
 * console.assert(bareLineFeed(bytes("GET / HTTP/1.1\n\n")) === 14);
 * console.assert(bareLineFeed(bytes("GET / HTTP/1.1\r\nHost: a\r\n\r\n")) === -1);
 * ```
 */
export function bareLineFeed(bytes: Uint8Array): number {
  for (let i = bytes.indexOf(10); i >= 0; i = bytes.indexOf(10, i + 1)) {
    if (i === 0 || bytes[i - 1] !== 13) return i;
  }
  return -1;
}

/** The longest method we wait for; real ones are at most 7 letters. */
const MAX_METHOD = 16;

/**
 * Whether the first bytes of a connection already show it is not an HTTP/1.x request as we accept
 * it (a method of capital letters, a space, a path), so a server can answer 400 at once instead of
 * waiting for a head that will never come: another protocol (a yamux client on the wrong port, TLS)
 * speaks first and then waits for us.
 *
 * @example
 * ```ts
 * import { notHttpRequest } from "./head.ts";
 * const bytes = (text: string) => new TextEncoder().encode(text);
 * console.assert(!notHttpRequest(bytes("GE")) && !notHttpRequest(bytes("GET /")));
 * console.assert(notHttpRequest(new Uint8Array([0, 0, 0, 1])) && notHttpRequest(bytes("GET x")));
 * ```
 */
export function notHttpRequest(bytes: Uint8Array): boolean {
  const n = Math.min(bytes.length, MAX_METHOD + 2);
  for (let i = 0; i < n; i++) {
    const byte = bytes[i];
    if (byte === 32) return i === 0 || (i + 1 < bytes.length && bytes[i + 1] !== 47); // "/"
    if (byte < 65 || byte > 90) return true; // not A-Z
  }
  return n > MAX_METHOD;
}

/**
 * Parses a request head (request line, header fields, the blank line), or returns undefined when
 * it is not HTTP/1.x as we accept it.
 *
 * @example
 * ```ts
 * import { parseRequestHead } from "./head.ts";
 * const head = parseRequestHead(new TextEncoder().encode("GET /a?b HTTP/1.1\r\nHost: x\r\n\r\n"));
 * console.assert(head?.target === "/a?b" && head.headers.get("host") === "x");
 * ```
 */
export function parseRequestHead(head: Uint8Array): RequestHead | undefined {
  // Latin-1: header bytes map one to one onto characters, whatever a client put in them.
  const lines = new TextDecoder("latin1").decode(head).split("\r\n");
  const match = /^([A-Z]+) (\/[^ ]*) HTTP\/1\.([01])$/.exec(lines[0]);
  if (!match) return undefined;
  const headers = new Headers();
  for (const line of lines.slice(1)) {
    if (line === "") continue;
    const colon = line.indexOf(":");
    // No obs-fold, no whitespace before the colon (RFC 9112 §5.1, §5.2): both are refused.
    if (colon <= 0 || line[0] === " " || line[0] === "\t" || /\s/.test(line[colon - 1])) {
      return undefined;
    }
    try {
      headers.append(line.slice(0, colon), line.slice(colon + 1).trim());
    } catch {
      return undefined;
    }
  }
  return {
    method: match[1],
    target: match[2],
    version: match[3] === "1" ? "1.1" : "1.0",
    headers,
  };
}

/**
 * The bytes of a response head: status line, `fields` (a name → value list, written as given),
 * and the blank line.
 */
export function responseHead(status: number, fields: [string, string][]): Uint8Array {
  let text = `HTTP/1.1 ${status} ${REASONS[status] ?? "Status"}\r\n`;
  for (const [name, value] of fields) text += `${name}: ${value}\r\n`;
  return new TextEncoder().encode(text + "\r\n");
}

/** A short plain-text response that closes the connection, for refusals before any handler ran. */
export function plainResponse(status: number, message: string): Uint8Array {
  const body = new TextEncoder().encode(`${message}\n`);
  const head = responseHead(status, [
    ["content-type", "text/plain; charset=utf-8"],
    ["content-length", String(body.length)],
    ["connection", "close"],
  ]);
  const out = new Uint8Array(head.length + body.length);
  out.set(head);
  out.set(body, head.length);
  return out;
}
