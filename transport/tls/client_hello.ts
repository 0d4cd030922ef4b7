/**
 * Reads what a TLS server needs to route a connection before terminating it (or without
 * terminating it at all): the server name (SNI, RFC 6066 §3) and the ALPN protocols (RFC 7301)
 * of the ClientHello (RFC 8446 §4.1.2), from the first bytes of the connection, which are then
 * passed on untouched. Bounded: a ClientHello may span several TLS records, up to
 * {@linkcode MAX_CLIENT_HELLO}; anything else is refused.
 *
 * @module
 */

/** The largest ClientHello we wait for (the handshake message, across records). */
export const MAX_CLIENT_HELLO = 16 * 1024;

/** What a ClientHello says about where it wants to go. */
export interface ClientHelloInfo {
  /** The host name of the `server_name` extension, lower-cased; undefined without one. */
  serverName?: string;
  /** The ALPN protocol names offered, in order (empty without the extension). */
  alpn: string[];
  /** How many bytes of the input the records holding the ClientHello took. */
  length: number;
}

/** Why bytes are not a ClientHello we accept. */
export class ClientHelloError extends Error {
  /** Bytes that are not the start of a TLS ClientHello, or a malformed one. */
  constructor(message: string) {
    super(message);
    this.name = "ClientHelloError";
  }
}

const RECORD_HANDSHAKE = 22;
const HANDSHAKE_CLIENT_HELLO = 1;
const EXT_SERVER_NAME = 0;
const EXT_ALPN = 16;
const NAME_TYPE_HOST = 0;

/**
 * Parses the ClientHello at the start of `bytes`: the info when it is complete, undefined when
 * more bytes are needed, a {@linkcode ClientHelloError} when they are not one (another protocol,
 * a malformed or oversized hello).
 *
 * @example
 * ```ts ignore
 * const info = parseClientHello(firstBytes);
 * if (info) route(info.serverName); // then pass firstBytes on as they are
 * ```
 */
export function parseClientHello(bytes: Uint8Array): ClientHelloInfo | undefined {
  // Gather the handshake bytes from consecutive handshake records.
  const handshake: Uint8Array[] = [];
  let gathered = 0;
  let at = 0;
  let needed = -1; // the ClientHello's length, once its header is in
  while (needed < 0 || gathered < needed) {
    if (bytes.length < at + 5) return undefined;
    if (bytes[at] !== RECORD_HANDSHAKE) throw new ClientHelloError("not a TLS handshake record");
    if (bytes[at + 1] !== 3) throw new ClientHelloError("not a TLS record version");
    const recordLength = (bytes[at + 3] << 8) | bytes[at + 4];
    if (recordLength === 0) throw new ClientHelloError("empty handshake record");
    // No record is longer than 2^14 bytes of plaintext (RFC 8446 §5.1).
    if (recordLength > 16384) throw new ClientHelloError("handshake record too long");
    if (bytes.length < at + 5 + recordLength) return undefined;
    handshake.push(bytes.subarray(at + 5, at + 5 + recordLength));
    gathered += recordLength;
    at += 5 + recordLength;
    if (needed < 0 && gathered >= 4) {
      const head = joined(handshake, 4);
      if (head[0] !== HANDSHAKE_CLIENT_HELLO) throw new ClientHelloError("not a ClientHello");
      needed = 4 + ((head[1] << 16) | (head[2] << 8) | head[3]);
      if (needed > MAX_CLIENT_HELLO) throw new ClientHelloError("ClientHello too large");
    }
  }
  const info = readHello(joined(handshake, needed).subarray(4));
  return { ...info, length: at };
}

/** The first `n` bytes of `parts` as one array. */
function joined(parts: Uint8Array[], n: number): Uint8Array {
  if (parts[0].length >= n) return parts[0].subarray(0, n);
  const out = new Uint8Array(n);
  let at = 0;
  for (const part of parts) {
    const take = Math.min(part.length, n - at);
    out.set(part.subarray(0, take), at);
    at += take;
    if (at === n) break;
  }
  return out;
}

/** A bounds-checked reader over the ClientHello body. */
class Reader {
  readonly bytes: Uint8Array;
  #at = 0;

  constructor(bytes: Uint8Array) {
    this.bytes = bytes;
  }

  get done(): boolean {
    return this.#at === this.bytes.length;
  }

  skip(n: number): void {
    if (this.#at + n > this.bytes.length) throw new ClientHelloError("truncated ClientHello");
    this.#at += n;
  }

  take(n: number): Uint8Array {
    const at = this.#at;
    this.skip(n);
    return this.bytes.subarray(at, at + n);
  }

  u8(): number {
    return this.take(1)[0];
  }

  u16(): number {
    const b = this.take(2);
    return (b[0] << 8) | b[1];
  }

  /** A vector with an `n`-byte length prefix. */
  vector(n: 1 | 2): Reader {
    return new Reader(this.take(n === 1 ? this.u8() : this.u16()));
  }
}

function readHello(body: Uint8Array): Omit<ClientHelloInfo, "length"> {
  const hello = new Reader(body);
  hello.skip(2 + 32); // legacy_version, random
  hello.vector(1); // legacy_session_id
  hello.vector(2); // cipher_suites
  hello.vector(1); // legacy_compression_methods
  const info: Omit<ClientHelloInfo, "length"> = { alpn: [] };
  if (hello.done) return info; // no extensions (an old client)
  const extensions = hello.vector(2);
  const seen = new Set<number>();
  while (!extensions.done) {
    const type = extensions.u16();
    const data = extensions.vector(2);
    if (seen.has(type)) throw new ClientHelloError(`extension ${type} twice`);
    seen.add(type);
    if (type === EXT_SERVER_NAME) info.serverName = readServerName(data);
    else if (type === EXT_ALPN) info.alpn = readAlpn(data);
  }
  return info;
}

function readServerName(data: Reader): string | undefined {
  const list = data.vector(2);
  let name: string | undefined;
  while (!list.done) {
    const type = list.u8();
    const value = list.vector(2);
    if (type !== NAME_TYPE_HOST) continue;
    if (name !== undefined) throw new ClientHelloError("two host names in server_name");
    const bytes = value.take(value.bytes.length);
    // A DNS host name: letters, digits, hyphens, dots; no trailing dot (RFC 6066 §3).
    const text = new TextDecoder().decode(bytes).toLowerCase();
    if (
      !/^(?=.{1,253}$)[a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9_])?(\.[a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9_])?)*$/
        .test(text)
    ) {
      throw new ClientHelloError("server_name is not a host name");
    }
    name = text;
  }
  return name;
}

function readAlpn(data: Reader): string[] {
  const list = data.vector(2);
  const out: string[] = [];
  while (!list.done) {
    const protocol = list.vector(1);
    if (protocol.bytes.length === 0) throw new ClientHelloError("empty ALPN protocol");
    out.push(new TextDecoder().decode(protocol.bytes));
  }
  return out;
}
