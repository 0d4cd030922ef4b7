/**
 * What the inspector's API shows of an exchange: a summary for lists and live updates, the
 * detail with its bodies made readable (gzip, deflate and br decoded with node:zlib, bounded;
 * text and JSON as text, the rest as hex), the filters of the list, and a HAR 1.2 log.
 *
 * @module
 */

import {
  brotliDecompressSync,
  constants,
  gunzipSync,
  inflateRawSync,
  inflateSync,
} from "node:zlib";
import { VERSION } from "../../util/host/version.ts";
import { bodyBytes, type CapturedBody, type Exchange } from "./recorder.ts";

/** Most bytes a compressed body is decoded to for display. */
export const MAX_DECODED_BYTES = 1024 * 1024;

/** An exchange in a list or an event. */
export interface ExchangeSummary {
  id: number;
  replayOf?: number;
  connection: number;
  tunnel: string;
  local: string;
  remote: string;
  method: string;
  target: string;
  status?: number;
  reason?: string;
  state: Exchange["state"];
  startedAt: string;
  firstByteMs?: number;
  endMs?: number;
  requestSize: number;
  responseSize: number;
  /** Whether either body was recorded cut. */
  truncated: boolean;
  contentType?: string;
  upgrade?: Exchange["upgrade"];
  error?: string;
}

/** A body as the API shows it. */
export interface BodyView {
  /** Bytes of the body (chunked coding removed), captured or not. */
  size: number;
  /** Bytes captured. */
  captured: number;
  /** Whether the body was cut at the limit (or dropped with an evicted exchange). */
  truncated: boolean;
  /** Its `Content-Encoding` when one applies (gzip, deflate, br). */
  encoding?: string;
  /** How `text` shows it: as text, as JSON (pretty when it parsed), or as hex. */
  kind: "empty" | "text" | "json" | "hex";
  /** The decoded bytes as text or hex. */
  text: string;
  /** The captured bytes as sent (still encoded), base64, for replays and HAR. */
  base64: string;
  /** What went wrong decoding, or why it is shown as it is. */
  note?: string;
}

/** An exchange in full. */
export interface ExchangeDetail extends ExchangeSummary {
  version: string;
  requestHeaders: [string, string][];
  responseHeaders?: [string, string][];
  requestBody: BodyView;
  responseBody: BodyView;
}

/** The first value of field `name` (any case). */
export function field(fields: readonly [string, string][] | undefined, name: string) {
  const lower = name.toLowerCase();
  return fields?.find(([n]) => n.toLowerCase() === lower)?.[1];
}

/** The summary of `e`. */
export function summary(e: Exchange): ExchangeSummary {
  return {
    id: e.id,
    replayOf: e.replayOf,
    connection: e.connection,
    tunnel: e.tunnel,
    local: e.local,
    remote: e.remote,
    method: e.method,
    target: e.target,
    status: e.status,
    reason: e.reason,
    state: e.state,
    startedAt: new Date(e.startedAt).toISOString(),
    firstByteMs: round(e.firstByteMs),
    endMs: round(e.endMs),
    requestSize: e.requestBody.size,
    responseSize: e.responseBody.size,
    truncated: e.requestBody.truncated || e.responseBody.truncated,
    contentType: field(e.responseHeaders, "content-type"),
    upgrade: e.upgrade ? { ...e.upgrade } : undefined,
    error: e.error,
  };
}

/** The detail of `e`, bodies decoded for display. */
export function detail(e: Exchange): ExchangeDetail {
  return {
    ...summary(e),
    version: e.version,
    requestHeaders: e.requestHeaders,
    responseHeaders: e.responseHeaders,
    requestBody: bodyView(e.requestBody, e.requestHeaders),
    responseBody: bodyView(e.responseBody, e.responseHeaders ?? []),
  };
}

function round(ms: number | undefined): number | undefined {
  return ms === undefined ? undefined : Math.round(ms * 100) / 100;
}

/** Decodes `bytes` of content coding `encoding`, bounded; a cut body decodes as far as it goes. */
function decodeContent(encoding: string, bytes: Uint8Array): Uint8Array {
  const options = { maxOutputLength: MAX_DECODED_BYTES, finishFlush: constants.Z_SYNC_FLUSH };
  if (encoding === "gzip" || encoding === "x-gzip") return gunzipSync(bytes, options);
  if (encoding === "br") {
    return brotliDecompressSync(bytes, {
      maxOutputLength: MAX_DECODED_BYTES,
      finishFlush: constants.BROTLI_OPERATION_FLUSH,
    });
  }
  // "deflate" is zlib-wrapped by the RFC, raw from some servers: try both.
  try {
    return inflateSync(bytes, options);
  } catch {
    return inflateRawSync(bytes, options);
  }
}

const TEXT_TYPE =
  /^(text\/|application\/(json|[\w.+-]*\+json|xml|[\w.+-]*\+xml|javascript|x-www-form-urlencoded|graphql)|image\/svg\+xml)/i;

/** A body's view: decoded when it has a content coding we know, shown as text, JSON or hex. */
export function bodyView(body: CapturedBody, headers: readonly [string, string][]): BodyView {
  const raw = bodyBytes(body);
  const view: BodyView = {
    size: body.size,
    captured: body.kept,
    truncated: body.truncated,
    kind: "empty",
    text: "",
    base64: toBase64(raw),
  };
  if (raw.length === 0) {
    if (body.size > 0) view.note = "not kept (the exchange left the ring's byte budget)";
    return view;
  }
  let bytes = raw;
  const encoding = field(headers, "content-encoding")?.trim().toLowerCase();
  if (encoding && encoding !== "identity") {
    view.encoding = encoding;
    if (["gzip", "x-gzip", "deflate", "br"].includes(encoding)) {
      try {
        bytes = decodeContent(encoding, raw);
      } catch (error) {
        // zlib refuses to go past the bound (a "zip bomb" among others) with this code.
        view.note = (error as { code?: string }).code === "ERR_BUFFER_TOO_LARGE"
          ? `decodes to more than ${MAX_DECODED_BYTES} bytes: shown as it came`
          : `cannot decode ${encoding}: ${(error as Error).message}`;
        bytes = raw;
      }
    } else view.note = `content coding ${encoding} shown as it came`;
  }
  const type = field(headers, "content-type") ?? "";
  const text = utf8(bytes);
  if (text !== undefined && (TEXT_TYPE.test(type) || looksLikeText(text))) {
    view.kind = /json/i.test(type) ? "json" : "text";
    view.text = text;
    if (view.kind === "json" && !body.truncated) {
      try {
        view.text = JSON.stringify(JSON.parse(text), null, 2);
      } catch {
        view.note ??= "not valid JSON: shown as it came";
      }
    }
  } else {
    view.kind = "hex";
    view.text = hexDump(bytes.subarray(0, 64 * 1024));
  }
  return view;
}

const strictUtf8 = new TextDecoder("utf-8", { fatal: true });

function utf8(bytes: Uint8Array): string | undefined {
  try {
    // A cut body may end inside a character: decode without its last bytes if need be.
    return strictUtf8.decode(bytes);
  } catch {
    for (let cut = 1; cut <= 3 && cut < bytes.length; cut++) {
      try {
        return strictUtf8.decode(bytes.subarray(0, bytes.length - cut));
      } catch {
        // try a shorter one
      }
    }
    return undefined;
  }
}

/** No control characters other than tab, CR and LF. */
function looksLikeText(text: string): boolean {
  // deno-lint-ignore no-control-regex
  return !/[\x00-\x08\x0e-\x1f\x7f]/.test(text);
}

/** `offset  hex bytes  ascii`, 16 bytes a line. */
export function hexDump(bytes: Uint8Array): string {
  const lines: string[] = [];
  for (let at = 0; at < bytes.length; at += 16) {
    const row = bytes.subarray(at, at + 16);
    const hex = [...row].map((b) => b.toString(16).padStart(2, "0")).join(" ");
    const ascii = [...row].map((b) => (b >= 32 && b < 127 ? String.fromCharCode(b) : ".")).join(
      "",
    );
    lines.push(`${at.toString(16).padStart(8, "0")}  ${hex.padEnd(47)}  ${ascii}`);
  }
  return lines.join("\n");
}

/** Base64 of `bytes` (no Buffer: the same on every runtime). */
export function toBase64(bytes: Uint8Array): string {
  let binary = "";
  for (let at = 0; at < bytes.length; at += 0x8000) {
    binary += String.fromCharCode(...bytes.subarray(at, at + 0x8000));
  }
  return btoa(binary);
}

/** The list's filters, as the API's query takes them. */
export interface ExchangeFilter {
  /** `200`, `4xx`, or a list of them (`4xx,5xx`). */
  status?: string;
  /** A method, any case. */
  method?: string;
  /** Part of the target. */
  path?: string;
  /** Free text: in the method, target, status, headers or captured bodies (any case). */
  q?: string;
}

/** Whether `e` passes `filter`. */
export function matches(e: Exchange, filter: ExchangeFilter): boolean {
  if (filter.status) {
    const status = e.status === undefined ? "" : String(e.status);
    const wanted = filter.status.split(",").map((s) => s.trim().toLowerCase()).filter(Boolean);
    const ok = wanted.some((w) =>
      /^[1-5]xx$/.test(w) ? status[0] === w[0] : w === status || (w === "pending" && !status)
    );
    if (!ok) return false;
  }
  if (filter.method && e.method.toLowerCase() !== filter.method.toLowerCase()) return false;
  if (filter.path && !e.target.includes(filter.path)) return false;
  if (filter.q) {
    const q = filter.q.toLowerCase();
    const heads = [...e.requestHeaders, ...(e.responseHeaders ?? [])].map(([n, v]) => `${n}: ${v}`);
    const text = [e.method, e.target, String(e.status ?? ""), e.remote, ...heads].join("\n");
    if (text.toLowerCase().includes(q)) return true;
    const latin1 = new TextDecoder("latin1");
    return [e.requestBody, e.responseBody].some((b) =>
      b.chunks.some((c) => latin1.decode(c).toLowerCase().includes(q))
    );
  }
  return true;
}

/** The exchanges as a HAR 1.2 log (bodies as captured; a cut one says so in its comment). */
export function harLog(exchanges: readonly Exchange[]): unknown {
  return {
    log: {
      version: "1.2",
      creator: { name: "tunnelmux inspector", version: VERSION },
      entries: exchanges.map(harEntry),
    },
  };
}

function harEntry(e: Exchange) {
  const proto = field(e.requestHeaders, "x-forwarded-proto") ?? "http";
  const host = field(e.requestHeaders, "host") ?? e.tunnel;
  const url = /^https?:\/\//i.test(e.target) ? e.target : `${proto}://${host}${e.target}`;
  const query = [...new URL(url, "http://x").searchParams].map(([name, value]) => ({
    name,
    value,
  }));
  const request = bodyView(e.requestBody, e.requestHeaders);
  const response = bodyView(e.responseBody, e.responseHeaders ?? []);
  const wait = e.firstByteMs ?? -1;
  const comments = [
    e.replayOf !== undefined ? `replay of #${e.replayOf}` : "",
    e.error ?? "",
    e.upgrade ? `upgraded: ${e.upgrade.framesIn} frames in, ${e.upgrade.framesOut} frames out` : "",
  ].filter(Boolean);
  return {
    startedDateTime: new Date(e.startedAt).toISOString(),
    time: e.endMs ?? 0,
    request: {
      method: e.method,
      url,
      httpVersion: e.version,
      cookies: [],
      headers: e.requestHeaders.map(([name, value]) => ({ name, value })),
      queryString: query,
      ...(e.requestBody.size > 0
        ? {
          postData: {
            mimeType: field(e.requestHeaders, "content-type") ?? "",
            text: request.kind === "hex" ? request.base64 : request.text,
            ...(request.truncated
              ? { comment: `cut at ${request.captured} of ${request.size} bytes` }
              : {}),
          },
        }
        : {}),
      headersSize: -1,
      bodySize: e.requestBody.size,
    },
    response: {
      status: e.status ?? 0,
      statusText: e.reason ?? "",
      httpVersion: e.version,
      cookies: [],
      headers: (e.responseHeaders ?? []).map(([name, value]) => ({ name, value })),
      content: {
        size: response.size,
        mimeType: field(e.responseHeaders, "content-type") ?? "",
        ...(response.kind === "hex"
          ? { text: response.base64, encoding: "base64" }
          : { text: response.text }),
        ...(response.truncated
          ? { comment: `cut at ${response.captured} of ${response.size} bytes` }
          : {}),
      },
      redirectURL: field(e.responseHeaders, "location") ?? "",
      headersSize: -1,
      bodySize: e.responseBody.size,
    },
    cache: {},
    timings: {
      send: 0,
      wait: wait < 0 ? -1 : wait,
      receive: e.endMs !== undefined && wait >= 0 ? Math.max(0, e.endMs - wait) : -1,
    },
    ...(comments.length > 0 ? { comment: comments.join("; ") } : {}),
  };
}
