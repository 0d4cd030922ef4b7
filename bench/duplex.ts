/**
 * The one byte-stream shape the benchmark workloads drive: a mux stream or a plain connection,
 * whatever the implementation. Each worker adapts its library to it, so the workload code (and its
 * verification) is the same for every implementation and differences come from the library alone.
 *
 * @module
 */

/** Callbacks a {@linkcode Duplex} delivers to. */
export interface DuplexHandlers {
  /** Bytes arrived (the receiver may keep the chunk). */
  data(chunk: Uint8Array): void;
  /** Writing may continue after `write` returned false. */
  drain(): void;
  /** The peer half-closed: no more data. */
  end(): void;
  /** The stream failed (reset, connection lost). */
  error(error: Error): void;
}

/** A bidirectional byte stream with write backpressure and half-close. */
export interface Duplex {
  /** Starts delivering events; called once, before the first write. */
  start(handlers: DuplexHandlers): void;
  /** Queues bytes (never mutated afterwards); false asks the writer to wait for `drain`. */
  write(chunk: Uint8Array): boolean;
  /** Half-closes our side. */
  end(): void;
  /**
   * Set when the library never reports the peer's half-close (yamux-js 0.2.0): the workload then
   * takes the expected byte count as the end of the echo.
   */
  readonly endless?: boolean;
  /** Releases the stream or connection after the workload is done with it. */
  close(): void;
}

/** Opens one stream (a mux stream, or a new connection for raw TCP scenarios S1–S3). */
export type Opener = () => Promise<Duplex>;
