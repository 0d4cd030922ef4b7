/**
 * The request inspector's core, without its web server: the ring of exchanges, the observer it
 * gives the client for each visitor of an HTTP tunnel, and replays, sent to the local service
 * directly and recorded as new exchanges that name the one they replay.
 *
 * @module
 */

import type { Transport } from "../../protocol/transport.ts";
import { dialTcp } from "../../tunnel/dial.ts";
import type { VisitorInspector, VisitorObserver } from "../tunnels/visitors.ts";
import { parseHostPort } from "../../util/net/address.ts";
import { HttpObserver, REDACTED } from "./http_observer.ts";
import { bodyBytes, type Exchange, Recorder, type RecorderLimits } from "./recorder.ts";

/** How an inspector records. */
export interface InspectorOptions extends RecorderLimits {
  /** Keep `Authorization`, `Cookie` and `Set-Cookie` values (default: redacted). */
  unredacted?: boolean;
  /** How long a replay may take, dial to the response's end (default 30 s). */
  replayTimeoutMs?: number;
}

/** What a replay changes; whatever is left out is sent as it was recorded. */
export interface ReplayEdits {
  method?: string;
  /** The request target (path and query). */
  path?: string;
  /** All request fields, replacing the recorded ones. */
  headers?: [string, string][];
  /** The body as text (UTF-8). */
  body?: string;
  /** The body as base64 (for bytes that are not text). */
  bodyBase64?: string;
}

/** A replay that cannot be sent; `status` is the API's answer. */
export class ReplayError extends Error {
  /** 400 for bad edits, 409 for an exchange that cannot be replayed, 502 when it failed. */
  readonly status: 400 | 409 | 502;
  /** An error with its API status. */
  constructor(status: 400 | 409 | 502, message: string) {
    super(message);
    this.name = "ReplayError";
    this.status = status;
  }
}

/** Fields a replay sets itself: it sends the body with its length, on a connection of its own. */
const REPLAY_SETS = new Set(["content-length", "transfer-encoding", "connection", "keep-alive"]);

const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
const FIELD_VALUE = /^[\t\x20-\x7e\x80-\xff]*$/;

/** The ring and the observers of one client's HTTP tunnels (see the module notes). */
export class Inspector implements VisitorInspector {
  /** The exchanges. */
  readonly recorder: Recorder;
  /** Whether secrets are kept as they were. */
  readonly unredacted: boolean;
  readonly #replayTimeoutMs: number;

  /** An inspector with `options`. */
  constructor(options: InspectorOptions = {}) {
    this.recorder = new Recorder(options);
    this.unredacted = options.unredacted ?? false;
    this.#replayTimeoutMs = options.replayTimeoutMs ?? 30_000;
  }

  /** An observer of one visitor of an HTTP tunnel (the client calls it). */
  observe(visit: { tunnel: string; local: string; remote: string }): VisitorObserver {
    const observer = new HttpObserver(this.recorder, visit, { unredacted: this.unredacted });
    return {
      aToB: (chunk) => observer.request(chunk),
      bToA: (chunk) => observer.response(chunk),
      close: (error) => observer.close(error),
    };
  }

  /**
   * Sends `original` again to its local service, changed by `edits`, on a new connection, and
   * resolves with the new exchange once its response ended (or it failed). The recorded body is
   * sent unless `edits` gives one; a body recorded cut cannot be, nor redacted fields' values
   * (they are left out), nor an upgrade.
   */
  replay(original: Exchange, edits: ReplayEdits = {}): Promise<Exchange> {
    const request = this.#replayBytes(original, edits);
    const { hostname, port } = parseHostPort(original.local);
    const timeoutMs = this.#replayTimeoutMs;
    return new Promise((resolve, reject) => {
      let exchange: Exchange | undefined;
      let socket: Transport | undefined;
      const observer = new HttpObserver(this.recorder, {
        tunnel: original.tunnel,
        local: original.local,
        remote: "replay",
        replayOf: original.id,
      }, { unredacted: this.unredacted, onExchange: (e) => exchange ??= e });
      // Recorded from the first byte on, so a dial that fails shows as a failed replay.
      observer.request(request);
      const timer = setTimeout(
        () => finish(new Error(`no response within ${timeoutMs} ms`)),
        timeoutMs,
      );
      let settled = false;
      const finish = (error?: Error) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        observer.close(error);
        socket?.close();
        if (exchange) resolve(exchange);
        else reject(new ReplayError(502, error?.message ?? "the replay was not recorded"));
      };
      dialTcp(hostname, port, Math.min(10_000, timeoutMs)).then(
        (transport) => {
          socket = transport;
          if (settled) return transport.close();
          transport.start({
            data(chunk) {
              observer.response(chunk);
              if (exchange && exchange.state !== "pending" && exchange.state !== "responding") {
                finish();
              }
            },
            drain() {},
            end: () => finish(),
            close: (error) => finish(error),
          });
          transport.write(request);
        },
        (error) => finish(new Error(`cannot reach ${original.local}: ${(error as Error).message}`)),
      );
    });
  }

  #replayBytes(original: Exchange, edits: ReplayEdits): Uint8Array {
    if (original.upgrade || /upgrade/i.test(fieldOf(original.requestHeaders, "connection") ?? "")) {
      throw new ReplayError(409, "an upgrade (WebSocket) cannot be replayed");
    }
    const method = edits.method ?? original.method;
    const path = edits.path ?? original.target;
    if (!TOKEN.test(method)) throw new ReplayError(400, `bad method "${method}"`);
    if (!/^(\/|\*$|https?:\/\/)\S*$/.test(path)) {
      throw new ReplayError(400, `the path must start with / and hold no spaces, got "${path}"`);
    }
    const headers = edits.headers ?? original.requestHeaders;
    if (!Array.isArray(headers)) throw new ReplayError(400, "headers must be [name, value] pairs");
    for (const pair of headers) {
      if (
        !Array.isArray(pair) || pair.length !== 2 || typeof pair[0] !== "string" ||
        typeof pair[1] !== "string" || !TOKEN.test(pair[0]) || !FIELD_VALUE.test(pair[1])
      ) {
        throw new ReplayError(400, `bad header ${JSON.stringify(pair).slice(0, 100)}`);
      }
    }
    let body: Uint8Array;
    if (edits.bodyBase64 !== undefined) {
      try {
        body = Uint8Array.from(atob(edits.bodyBase64), (c) => c.charCodeAt(0));
      } catch {
        throw new ReplayError(400, "bodyBase64 is not base64");
      }
    } else if (edits.body !== undefined) {
      body = new TextEncoder().encode(edits.body);
    } else {
      if (original.requestBody.truncated) {
        throw new ReplayError(
          409,
          `the recorded body was cut at ${original.requestBody.kept} of ` +
            `${original.requestBody.size} bytes: give the body to send`,
        );
      }
      body = bodyBytes(original.requestBody);
    }
    const lines = [`${method} ${path} HTTP/1.1`];
    for (const [name, value] of headers) {
      if (REPLAY_SETS.has(name.toLowerCase()) || value === REDACTED) continue;
      lines.push(`${name}: ${value}`);
    }
    if (body.length > 0 || !["GET", "HEAD", "DELETE", "OPTIONS"].includes(method)) {
      lines.push(`Content-Length: ${body.length}`);
    }
    lines.push("Connection: close", "", "");
    const head = Uint8Array.from(lines.join("\r\n"), (c) => c.charCodeAt(0) & 0xff);
    const bytes = new Uint8Array(head.length + body.length);
    bytes.set(head);
    bytes.set(body, head.length);
    return bytes;
  }
}

function fieldOf(fields: readonly [string, string][], name: string): string | undefined {
  return fields.find(([n]) => n.toLowerCase() === name)?.[1];
}
