/**
 * The request inspector's memory: the HTTP exchanges seen through the client's HTTP tunnels (and
 * the replays the inspector sent), kept in a ring bounded both in count and in bytes. The bytes
 * counted are what an exchange holds beyond its fixed size: its heads and its captured bodies.
 * An exchange pushed out of the ring stops capturing at once, so an exchange still in flight when
 * it is evicted cannot grow the memory further.
 *
 * @module
 */

/** A body as captured: its first bytes up to the limit, and how long it really was. */
export interface CapturedBody {
  /** Bytes of the body seen (after removing the chunked coding), captured or not. */
  size: number;
  /** The captured bytes, copies, in order; together at most the body limit. */
  chunks: Uint8Array[];
  /** Bytes in `chunks`. */
  kept: number;
  /** Whether bytes were seen that are not in `chunks` (over the limit, or evicted). */
  truncated: boolean;
}

/** Where an exchange stands. */
export type ExchangeState =
  /** The request is arriving or waits for its response. */
  | "pending"
  /** The response head arrived; its body is arriving. */
  | "responding"
  /** The response ended. */
  | "done"
  /** A WebSocket (or other upgrade) connection is open after a 101. */
  | "websocket"
  /** The connection closed or failed before the response ended. */
  | "failed";

/** Frames counted on an upgraded connection, per direction. */
export interface UpgradeCounts {
  /** Frames from the visitor to the service. */
  framesIn: number;
  /** Frames from the service to the visitor. */
  framesOut: number;
  /** Bytes from the visitor to the service after the upgrade. */
  bytesIn: number;
  /** Bytes from the service to the visitor after the upgrade. */
  bytesOut: number;
}

/** One recorded HTTP exchange. */
export interface Exchange {
  /** Increasing from 1 within this inspector. */
  readonly id: number;
  /** The exchange this one replays, when the inspector sent it. */
  readonly replayOf?: number;
  /** The HTTP tunnel's host name (as the client asked for it). */
  readonly tunnel: string;
  /** The local service it went to (`host:port`). */
  readonly local: string;
  /** The visitor's address as the daemon saw it (`replay` for a replay). */
  readonly remote: string;
  /** The connection to the local service it came on (exchanges of one connection share it). */
  readonly connection: number;
  method: string;
  /** The request target as sent (path and query). */
  target: string;
  /** `HTTP/1.1` or `HTTP/1.0`. */
  version: string;
  /** Request fields as sent, with secrets redacted unless that was turned off. */
  requestHeaders: [string, string][];
  requestBody: CapturedBody;
  status?: number;
  reason?: string;
  responseHeaders?: [string, string][];
  responseBody: CapturedBody;
  /** Wall-clock time the request's first byte arrived (ms since the epoch). */
  startedAt: number;
  /** From the first request byte to the first response byte, ms. */
  firstByteMs?: number;
  /** From the first request byte to the response's end (or the failure), ms. */
  endMs?: number;
  state: ExchangeState;
  /** Frames counted after a 101 (WebSocket). */
  upgrade?: UpgradeCounts;
  /** Why it failed, or why the inspector stopped following the connection. */
  error?: string;
  /** Bytes of heads and captured bodies, as counted against the ring. */
  bytes: number;
  /** Pushed out of the ring: captures nothing more. */
  evicted: boolean;
}

/** What the ring tells its subscribers. */
export interface RecorderEvent {
  /** `added`: a new exchange; `updated`: it moved on; `evicted`: it left the ring. */
  type: "added" | "updated" | "evicted";
  exchange: Exchange;
}

/** The ring's bounds. */
export interface RecorderLimits {
  /** Exchanges kept at most (default 500). */
  maxExchanges?: number;
  /** Head and body bytes kept at most over all exchanges (default 32 MiB). */
  maxBytes?: number;
  /** Body bytes captured per body at most (default 64 KiB); longer ones are recorded cut. */
  bodyLimit?: number;
}

/** Fields every exchange is counted for, beyond its heads and bodies. */
const HEAD_OVERHEAD = 256;

/** A new, empty captured body. */
export function emptyBody(): CapturedBody {
  return { size: 0, chunks: [], kept: 0, truncated: false };
}

/** The captured bytes of `body` in one array (a copy). */
export function bodyBytes(body: CapturedBody): Uint8Array {
  const out = new Uint8Array(body.kept);
  let at = 0;
  for (const chunk of body.chunks) {
    out.set(chunk, at);
    at += chunk.length;
  }
  return out;
}

/** Bytes a list of fields is counted for. */
export function fieldsBytes(fields: readonly [string, string][]): number {
  let n = 0;
  for (const [name, value] of fields) n += name.length + value.length + 4;
  return n;
}

/** The ring of exchanges, bounded in count and bytes, with subscribers for live updates. */
export class Recorder {
  /** Exchanges kept at most. */
  readonly maxExchanges: number;
  /** Bytes kept at most. */
  readonly maxBytes: number;
  /** Body bytes captured per body at most. */
  readonly bodyLimit: number;
  #ring: Exchange[] = [];
  #byId = new Map<number, Exchange>();
  #bytes = 0;
  #nextId = 1;
  #nextConnection = 1;
  #listeners = new Set<(event: RecorderEvent) => void>();

  /** A ring with `limits`; a limit that is not a positive integer is an error. */
  constructor(limits: RecorderLimits = {}) {
    this.maxExchanges = positive(limits.maxExchanges ?? 500, "maxExchanges");
    this.maxBytes = positive(limits.maxBytes ?? 32 * 1024 * 1024, "maxBytes");
    this.bodyLimit = positive(limits.bodyLimit ?? 64 * 1024, "bodyLimit");
    if (this.bodyLimit * 2 + HEAD_OVERHEAD > this.maxBytes) {
      throw new RangeError("maxBytes must hold at least one exchange's two bodies");
    }
  }

  /** Bytes held now. */
  get bytes(): number {
    return this.#bytes;
  }

  /** Exchanges held now. */
  get size(): number {
    return this.#ring.length;
  }

  /** A new connection number for exchanges that share one connection. */
  connection(): number {
    return this.#nextConnection++;
  }

  /** The exchanges held, oldest first. */
  list(): readonly Exchange[] {
    return this.#ring;
  }

  /** The exchange `id`, while it is held. */
  get(id: number): Exchange | undefined {
    return this.#byId.get(id);
  }

  /** Records a new exchange (its fields filled in by the caller) and tells the subscribers. */
  add(fields: Omit<Exchange, "id" | "bytes" | "evicted">): Exchange {
    const exchange: Exchange = { ...fields, id: this.#nextId++, bytes: 0, evicted: false };
    this.#ring.push(exchange);
    this.#byId.set(exchange.id, exchange);
    this.#emit({ type: "added", exchange });
    this.grow(
      exchange,
      HEAD_OVERHEAD + exchange.method.length + exchange.target.length +
        fieldsBytes(exchange.requestHeaders),
    );
    return exchange;
  }

  /**
   * Counts `n` more bytes for `exchange`, evicting the oldest others to make room. False (and
   * nothing counted) when the exchange was evicted or cannot fit even alone.
   */
  grow(exchange: Exchange, n: number): boolean {
    if (exchange.evicted) return false;
    this.#bytes += n;
    exchange.bytes += n;
    while (this.#ring.length > this.maxExchanges || this.#bytes > this.maxBytes) {
      const oldest = this.#ring[0] === exchange ? this.#ring[1] : this.#ring[0];
      if (oldest === undefined) break;
      this.#evict(oldest);
    }
    if (this.#bytes > this.maxBytes) {
      this.#bytes -= n;
      exchange.bytes -= n;
      return false;
    }
    return !exchange.evicted;
  }

  /**
   * Copies `bytes[start, end)` into `body` of `exchange`, as far as the body limit and the ring
   * allow; the rest is only counted. The copy is what makes keeping them safe: relayed chunks
   * may be pooled buffers reused once the relay's callback returns.
   */
  capture(exchange: Exchange, body: CapturedBody, bytes: Uint8Array, start: number, end: number) {
    const n = end - start;
    body.size += n;
    if (body.truncated) return;
    const take = Math.min(n, this.bodyLimit - body.kept);
    if (take > 0 && this.grow(exchange, take)) {
      body.chunks.push(bytes.slice(start, start + take));
      body.kept += take;
      if (take < n) body.truncated = true;
    } else if (n > 0) body.truncated = true;
  }

  /** Tells the subscribers that `exchange` moved on. */
  updated(exchange: Exchange): void {
    if (!exchange.evicted) this.#emit({ type: "updated", exchange });
  }

  /** Calls `listener` for every event from now on; returns the function that stops it. */
  subscribe(listener: (event: RecorderEvent) => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  /** Subscribers now (for tests). */
  get subscribers(): number {
    return this.#listeners.size;
  }

  /** Forgets every exchange. */
  clear(): void {
    for (const exchange of [...this.#ring]) this.#evict(exchange);
  }

  #evict(exchange: Exchange): void {
    const at = this.#ring.indexOf(exchange);
    if (at >= 0) this.#ring.splice(at, 1);
    this.#byId.delete(exchange.id);
    this.#bytes -= exchange.bytes;
    exchange.evicted = true;
    // Its captured bytes go with it: an exchange still in flight keeps only counts.
    for (const body of [exchange.requestBody, exchange.responseBody]) {
      if (body.kept > 0) {
        body.chunks = [];
        body.kept = 0;
        body.truncated = true;
      }
    }
    this.#emit({ type: "evicted", exchange });
  }

  #emit(event: RecorderEvent): void {
    for (const listener of this.#listeners) {
      try {
        listener(event);
      } catch {
        // A subscriber's failure is its own; the relay path must not see it.
      }
    }
  }
}

function positive(value: number, name: string): number {
  if (!Number.isSafeInteger(value) || value <= 0) {
    throw new RangeError(`${name} must be a positive integer, got ${value}`);
  }
  return value;
}
