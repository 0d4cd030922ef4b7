/**
 * Wire constants of the yamux protocol, as fixed by hashicorp's spec.md. Everything here is part of
 * the wire format and must not change.
 *
 * @module
 */

/** The only protocol version: a header with any other version is a protocol error. */
export const PROTOCOL_VERSION = 0;

/** Every frame starts with a 12-byte header: version, type, flags, stream id, length. */
export const HEADER_LENGTH = 12;

/** Frame types (header byte 1). */
export const FrameType = {
  /** Carries stream payload; `length` is the payload size. */
  Data: 0,
  /** Grants send credit; `length` is the window delta. */
  WindowUpdate: 1,
  /** Liveness and RTT on stream 0; `length` is an opaque value echoed back. */
  Ping: 2,
  /** Ends the session; `length` is a {@linkcode GoAwayCode}. */
  GoAway: 3,
} as const;

/** A frame type number. */
export type FrameType = typeof FrameType[keyof typeof FrameType];

/** Flag bits (header bytes 2-3). Unknown bits are ignored on receipt. */
export const Flag = {
  /** Opens a stream (or asks for a ping reply). */
  SYN: 0x1,
  /** Accepts a stream (or answers a ping). */
  ACK: 0x2,
  /** Half-closes the sender's side of a stream. */
  FIN: 0x4,
  /** Resets a stream at once. */
  RST: 0x8,
} as const;

/** GoAway codes (the `length` field of a GoAway frame). */
export const GoAwayCode = {
  /** Normal termination: no new streams; existing streams may finish. */
  Normal: 0,
  /** The peer broke the protocol. */
  ProtocolError: 1,
  /** The sender failed internally. */
  InternalError: 2,
} as const;

/** A GoAway code number. */
export type GoAwayCode = typeof GoAwayCode[keyof typeof GoAwayCode];

/** Every stream starts with this much credit in each direction (spec: 256 KiB). */
export const INITIAL_STREAM_WINDOW = 256 * 1024;

/** Stream ids, window credit and ping values are unsigned 32-bit numbers. */
export const MAX_UINT32 = 0xffff_ffff;
