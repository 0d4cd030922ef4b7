/**
 * The client side of the RFC 6455 opening handshake (§4.1): the HTTP/1.1 upgrade request, and
 * checks on the server's response head. Socket-free; `ws/client.ts` does the I/O.
 *
 * @module
 */

import { sha1 } from "../../util/crypto/sha1.ts";

/** The GUID the server appends to our key before hashing (§1.3). */
const WEBSOCKET_GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";

/** Largest response head we read; a server sending more is not a WebSocket server we want. */
export const MAX_RESPONSE_HEAD = 16 * 1024;

/**
 * Headers the handshake itself sets; a caller's value would break or contradict it (an extension
 * we would then have to speak, a second key). `Host` may be overridden (e.g. for a proxy).
 */
const RESERVED = new Set([
  "upgrade",
  "connection",
  "sec-websocket-key",
  "sec-websocket-version",
  "sec-websocket-extensions",
  "sec-websocket-accept",
]);

/** RFC 9110 token characters: what a header name may consist of. */
const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;

/** A fresh `Sec-WebSocket-Key`: 16 random bytes, base64 (§4.1). */
export function newKey(): string {
  const bytes = crypto.getRandomValues(new Uint8Array(16));
  return btoa(String.fromCharCode(...bytes));
}

/** The `Sec-WebSocket-Accept` a server must answer `key` with: base64(SHA-1(key + GUID)). */
export function acceptFor(key: string): string {
  return btoa(String.fromCharCode(...sha1(key + WEBSOCKET_GUID)));
}

/**
 * The upgrade request for `url` (path and query; no fragment), with `key` and the caller's extra
 * `headers`. Throws a TypeError for a header that is malformed (CR/LF would let a value inject
 * headers) or reserved by the handshake.
 */
export function upgradeRequest(
  url: URL,
  key: string,
  headers: Record<string, string> = {},
): Uint8Array {
  let host = url.host;
  const extra: string[] = [];
  for (const [name, value] of Object.entries(headers)) {
    if (!TOKEN.test(name)) throw new TypeError(`invalid header name: ${JSON.stringify(name)}`);
    if (/[\r\n\0]/.test(value)) throw new TypeError(`invalid value for header ${name}`);
    const lower = name.toLowerCase();
    if (RESERVED.has(lower)) {
      throw new TypeError(`header ${name} is set by the WebSocket handshake`);
    }
    if (lower === "host") host = value;
    else extra.push(`${name}: ${value}\r\n`);
  }
  const target = `${url.pathname || "/"}${url.search}`;
  const head = `GET ${target} HTTP/1.1\r\nHost: ${host}\r\nUpgrade: websocket\r\n` +
    `Connection: Upgrade\r\nSec-WebSocket-Key: ${key}\r\nSec-WebSocket-Version: 13\r\n` +
    `${extra.join("")}\r\n`;
  return new TextEncoder().encode(head);
}

/** A parsed response head. */
export interface ResponseHead {
  /** The HTTP status code. */
  status: number;
  /** Header values by lower-case name; repeated headers joined with ", ". */
  headers: Map<string, string>;
}

/** Parses a response head (status line and headers, CRLF-separated). Throws when malformed. */
export function parseResponseHead(head: Uint8Array): ResponseHead {
  // Latin-1: header bytes map one to one onto characters, whatever a server put in them.
  const lines = new TextDecoder("latin1").decode(head).split("\r\n");
  const match = /^HTTP\/1\.[01] (\d{3})(?: .*)?$/.exec(lines[0]);
  if (!match) throw new Error(`malformed status line: ${JSON.stringify(lines[0].slice(0, 80))}`);
  const headers = new Map<string, string>();
  for (const line of lines.slice(1)) {
    if (line === "") continue;
    const colon = line.indexOf(":");
    if (colon <= 0) throw new Error(`malformed header line: ${JSON.stringify(line.slice(0, 80))}`);
    const name = line.slice(0, colon).trim().toLowerCase();
    const value = line.slice(colon + 1).trim();
    const seen = headers.get(name);
    headers.set(name, seen === undefined ? value : `${seen}, ${value}`);
  }
  return { status: Number(match[1]), headers };
}

/**
 * What is wrong with a 101 response to a request made with `key` (§4.1, client steps 2–6), or
 * undefined when it is a valid WebSocket upgrade without extensions or subprotocol surprises.
 */
export function upgradeProblem(response: ResponseHead, key: string): string | undefined {
  const h = response.headers;
  if (h.get("upgrade")?.toLowerCase() !== "websocket") return "response lacks Upgrade: websocket";
  const connection = (h.get("connection") ?? "").toLowerCase().split(",").map((t) => t.trim());
  if (!connection.includes("upgrade")) return "response lacks Connection: Upgrade";
  if (h.get("sec-websocket-accept") !== acceptFor(key)) return "wrong Sec-WebSocket-Accept";
  // We offered no extension; one in use would change the framing under us.
  if (h.has("sec-websocket-extensions")) return "server chose an extension we did not offer";
  return undefined;
}
