/**
 * The header every tunnel-layer stream starts with, saying what the stream is: the control
 * channel, a forward to a target, a visitor of a reverse tunnel, a connection to a named service,
 * the echo service, or a UDP flow (datagrams framed by `udp_framing.ts`). Documented in docs/protocol.md.
 *
 * Layout (version 1):
 *
 * | bytes | field                                       |
 * | ----- | ------------------------------------------- |
 * | 0     | header version, 1                           |
 * | 1     | kind (see {@linkcode StreamKind})           |
 * | 2–3   | body length, big-endian, at most 4096       |
 * | 4…    | body: a UTF-8 JSON object, fields per kind  |
 *
 * @module
 */

import { encodeUtf8 } from "../../util/bytes/utf8.ts";

/** The header version this code writes and reads. */
export const STREAM_HEADER_VERSION = 1;

/** Largest header body; a bigger declared length is refused before anything is buffered. */
export const MAX_STREAM_HEADER_BODY = 4096;

/** Kind numbers on the wire. */
export const StreamKind = {
  /** The client's control channel: framed control messages (see `control.ts`). */
  control: 1,
  /**
   * Client → daemon: connect me to `target`. With `confirm: "1"` the daemon sends one byte, 0,
   * once the target is connected and before any of its bytes (a SOCKS front needs to know).
   */
  forward: 2,
  /** Daemon → client: a visitor arrived on reverse tunnel `tunnel`. */
  visitor: 3,
  /** Client → daemon: connect me to named service `service`; daemon → offering client: a user of it. */
  service: 4,
  /** Client → daemon: echo everything back (diagnostics and benchmarks). */
  echo: 5,
  /** Daemon → client: a visitor flow on UDP reverse tunnel `tunnel`; datagrams follow length-prefixed. */
  udpVisitor: 6,
  /** Client → daemon: send this flow's length-prefixed datagrams to UDP `target`. */
  udpForward: 7,
} as const;

/** What a stream is. */
export type StreamHeader =
  | { kind: "control" }
  | { kind: "forward"; target: string; confirm?: "1" }
  | { kind: "visitor"; tunnel: string; remote: string; local: string }
  | { kind: "service"; service: string; from?: string }
  | { kind: "echo" }
  | { kind: "udpVisitor"; tunnel: string; remote: string; local: string }
  | { kind: "udpForward"; target: string };

/** The header could not be read: bad version, kind, length, JSON or fields. */
export class StreamHeaderError extends Error {
  /** Creates the error. */
  constructor(message: string) {
    super(message);
    this.name = "StreamHeaderError";
  }
}

const KIND_NAMES = new Map<number, StreamHeader["kind"]>(
  Object.entries(StreamKind).map(([name, code]) => [code, name as StreamHeader["kind"]]),
);

/** The string fields each kind requires (and may have). */
const FIELDS: Record<StreamHeader["kind"], { required: string[]; optional: string[] }> = {
  control: { required: [], optional: [] },
  forward: { required: ["target"], optional: ["confirm"] },
  visitor: { required: ["tunnel", "remote", "local"], optional: [] },
  service: { required: ["service"], optional: ["from"] },
  echo: { required: [], optional: [] },
  udpVisitor: { required: ["tunnel", "remote", "local"], optional: [] },
  udpForward: { required: ["target"], optional: [] },
};

const MAX_FIELD_LENGTH = 512;

/** Fields that are flags rather than free text, and the one value each may have. */
const FLAG_VALUES: Record<string, string> = { confirm: "1" };

// One per process: every visitor's stream header is read through it.
const strictDecoder = new TextDecoder("utf-8", { fatal: true });

/**
 * Encodes a header.
 *
 * @example
 * ```ts
 * import { decodeStreamHeader, encodeStreamHeader } from "./stream_header.ts";
 * const bytes = encodeStreamHeader({ kind: "forward", target: "db.internal:5432" });
 * console.assert(decodeStreamHeader(bytes)?.header.kind === "forward");
 * ```
 */
export function encodeStreamHeader(header: StreamHeader): Uint8Array {
  const { kind, ...fields } = header;
  // Every visitor's stream goes through here: no TextEncoder, no ArrayBuffer of its own.
  const bytes = encodeUtf8(JSON.stringify(fields), 4);
  const length = bytes.length - 4;
  if (length > MAX_STREAM_HEADER_BODY) throw new StreamHeaderError("stream header too large");
  bytes[0] = STREAM_HEADER_VERSION;
  bytes[1] = StreamKind[kind];
  bytes[2] = length >>> 8;
  bytes[3] = length & 0xff;
  return bytes;
}

/**
 * Decodes a header from the start of `bytes`. Returns null while more bytes are needed, or the
 * header and the bytes after it. Throws {@linkcode StreamHeaderError} as soon as the bytes cannot
 * be a valid header (checked on the first four bytes before waiting for the body).
 */
export function decodeStreamHeader(
  bytes: Uint8Array,
): { header: StreamHeader; rest: Uint8Array } | null {
  if (bytes.length >= 1 && bytes[0] !== STREAM_HEADER_VERSION) {
    throw new StreamHeaderError(`unsupported stream header version ${bytes[0]}`);
  }
  if (bytes.length < 4) return null;
  const kind = KIND_NAMES.get(bytes[1]);
  if (kind === undefined) throw new StreamHeaderError(`unknown stream kind ${bytes[1]}`);
  const length = (bytes[2] << 8) | bytes[3];
  if (length > MAX_STREAM_HEADER_BODY) {
    throw new StreamHeaderError(`stream header body of ${length} bytes is too large`);
  }
  if (bytes.length < 4 + length) return null;
  let fields: unknown;
  try {
    fields = JSON.parse(strictDecoder.decode(bytes.subarray(4, 4 + length)));
  } catch {
    throw new StreamHeaderError("stream header body is not UTF-8 JSON");
  }
  return { header: checkFields(kind, fields), rest: bytes.subarray(4 + length) };
}

function checkFields(kind: StreamHeader["kind"], fields: unknown): StreamHeader {
  if (typeof fields !== "object" || fields === null || Array.isArray(fields)) {
    throw new StreamHeaderError("stream header body must be a JSON object");
  }
  const { required, optional } = FIELDS[kind];
  // Every stream starts with a header: its fields are checked where JSON.parse put them (no
  // entries array, no second object), and `kind` is added to them.
  const header = fields as Record<string, unknown>;
  for (const name in header) {
    const value = header[name];
    if (!required.includes(name) && !optional.includes(name)) {
      throw new StreamHeaderError(`unexpected field "${name}" in a ${kind} header`);
    }
    if (typeof value !== "string" || value.length === 0 || value.length > MAX_FIELD_LENGTH) {
      throw new StreamHeaderError(`field "${name}" must be a non-empty string`);
    }
    if (name in FLAG_VALUES && value !== FLAG_VALUES[name]) {
      throw new StreamHeaderError(`field "${name}" must be "${FLAG_VALUES[name]}"`);
    }
  }
  for (const name of required) {
    if (!Object.hasOwn(header, name)) {
      throw new StreamHeaderError(`a ${kind} header needs "${name}"`);
    }
  }
  header.kind = kind;
  return header as unknown as StreamHeader;
}
