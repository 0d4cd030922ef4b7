/**
 * UDP datagrams over a yamux stream: each datagram is a 2-byte big-endian length and that many
 * bytes, so boundaries survive the byte stream (docs/design/udp.md). The sender never waits: a
 * flow whose stream cannot take more queues a bounded number of datagrams and drops the rest,
 * counted, so one slow flow cannot hold up another flow or the session.
 *
 * @module
 */

/** Largest datagram carried: the IPv4 UDP payload limit, which the 2-byte length can hold. */
export const MAX_UDP_DATAGRAM = 65_507;

/** Datagrams a flow may queue while its stream cannot take more. */
export const UDP_FLOW_QUEUE_DATAGRAMS = 64;

/** Bytes (with their length prefixes) a flow may queue while its stream cannot take more. */
export const UDP_FLOW_QUEUE_BYTES = 256 * 1024;

/** Why a datagram was dropped instead of carried. */
export type UdpDropReason = "queue_full" | "too_large";

/** A length on the stream says a datagram larger than {@linkcode MAX_UDP_DATAGRAM}. */
export class UdpFramingError extends Error {
  /** Creates the error. */
  constructor(message: string) {
    super(message);
    this.name = "UdpFramingError";
  }
}

/** Returns `payload` with its 2-byte length prefix; throws {@linkcode UdpFramingError} when too large. */
export function encodeDatagram(payload: Uint8Array): Uint8Array {
  if (payload.length > MAX_UDP_DATAGRAM) {
    throw new UdpFramingError(`datagram of ${payload.length} bytes exceeds ${MAX_UDP_DATAGRAM}`);
  }
  const framed = new Uint8Array(2 + payload.length);
  framed[0] = payload.length >>> 8;
  framed[1] = payload.length & 0xff;
  framed.set(payload, 2);
  return framed;
}

/** Splits a stream's chunks back into datagrams, whatever the chunks' boundaries. */
export class DatagramDecoder {
  // Holds at most one partial datagram (with its prefix), so a byte-at-a-time peer costs linear time.
  #partial = new Uint8Array(2 + MAX_UDP_DATAGRAM);
  #held = 0;

  /** Bytes held that do not yet make a whole datagram. */
  get pendingBytes(): number {
    return this.#held;
  }

  /**
   * Returns the datagrams `chunk` completes (each a plain `Uint8Array` copy the caller owns).
   * Throws {@linkcode UdpFramingError} on a length above {@linkcode MAX_UDP_DATAGRAM}; the stream
   * is then unusable and should be reset.
   */
  push(chunk: Uint8Array): Uint8Array[] {
    const out: Uint8Array[] = [];
    let at = 0;
    while (at < chunk.length) {
      if (this.#held < 2) {
        this.#partial[this.#held++] = chunk[at++];
        if (this.#held < 2) continue;
        const length = (this.#partial[0] << 8) | this.#partial[1];
        if (length > MAX_UDP_DATAGRAM) {
          this.#held = 0;
          throw new UdpFramingError(`datagram length ${length} exceeds ${MAX_UDP_DATAGRAM}`);
        }
      }
      const length = (this.#partial[0] << 8) | this.#partial[1];
      const missing = 2 + length - this.#held;
      const take = Math.min(missing, chunk.length - at);
      this.#partial.set(chunk.subarray(at, at + take), this.#held);
      this.#held += take;
      at += take;
      if (this.#held === 2 + length) {
        out.push(this.#partial.slice(2, 2 + length));
        this.#held = 0;
      }
    }
    return out;
  }
}

/** Where a {@linkcode DatagramSender} writes: a yamux `Stream` fits (`write` false = wait for drain). */
export interface DatagramSink {
  /** Queues bytes; false once the sink wants no more until it drains. */
  write(chunk: Uint8Array): boolean;
}

/** Counts of a sender's datagrams. */
export interface DatagramSenderStats {
  /** Datagrams handed to the sink. */
  sent: number;
  /** Payload bytes handed to the sink. */
  sentBytes: number;
  /** Datagrams dropped, by reason. */
  dropped: Record<UdpDropReason, number>;
}

/**
 * Frames datagrams onto a sink without ever waiting: while the sink wants no more, datagrams wait
 * in a bounded queue; beyond it they are dropped and counted. Call {@linkcode drained} from the
 * sink's drain signal (a yamux stream's `onDrain`).
 */
export class DatagramSender {
  readonly #sink: DatagramSink;
  readonly #maxDatagrams: number;
  readonly #maxBytes: number;
  #queue: Uint8Array[] = [];
  #queuedBytes = 0;
  #blocked = false;
  /** What this sender did so far. */
  readonly stats: DatagramSenderStats = {
    sent: 0,
    sentBytes: 0,
    dropped: { queue_full: 0, too_large: 0 },
  };

  /** Wraps `sink`; the queue limits default to {@linkcode UDP_FLOW_QUEUE_DATAGRAMS} / {@linkcode UDP_FLOW_QUEUE_BYTES}. */
  constructor(
    sink: DatagramSink,
    limits: { datagrams?: number; bytes?: number } = {},
  ) {
    this.#sink = sink;
    this.#maxDatagrams = limits.datagrams ?? UDP_FLOW_QUEUE_DATAGRAMS;
    this.#maxBytes = limits.bytes ?? UDP_FLOW_QUEUE_BYTES;
  }

  /** Datagrams waiting for the sink to drain. */
  get queuedDatagrams(): number {
    return this.#queue.length;
  }

  /** Sends, queues or drops `payload`; returns what happened. Never throws for size, never waits. */
  send(payload: Uint8Array): "sent" | "queued" | UdpDropReason {
    if (payload.length > MAX_UDP_DATAGRAM) {
      this.stats.dropped.too_large++;
      return "too_large";
    }
    const framed = encodeDatagram(payload);
    if (!this.#blocked) {
      this.#hand(framed);
      return "sent";
    }
    if (
      this.#queue.length >= this.#maxDatagrams || this.#queuedBytes + framed.length > this.#maxBytes
    ) {
      this.stats.dropped.queue_full++;
      return "queue_full";
    }
    this.#queue.push(framed);
    this.#queuedBytes += framed.length;
    return "queued";
  }

  /** The sink drained: hands it queued datagrams until it wants no more again. */
  drained(): void {
    this.#blocked = false;
    while (this.#queue.length > 0 && !this.#blocked) {
      const framed = this.#queue.shift()!;
      this.#queuedBytes -= framed.length;
      this.#hand(framed);
    }
  }

  #hand(framed: Uint8Array): void {
    this.stats.sent++;
    this.stats.sentBytes += framed.length - 2;
    if (!this.#sink.write(framed)) this.#blocked = true;
  }
}
