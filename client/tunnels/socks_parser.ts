/**
 * The server side of a SOCKS5 handshake (RFC 1928, with RFC 1929 username/password), as a small
 * synchronous state machine over bytes: feed it whatever arrived, in any split (a byte at a time,
 * or greeting, credentials, request and the first payload bytes in one chunk), and it says what to
 * answer, and when the request is complete, where to connect and which bytes came after it. It
 * keeps no view of the chunks it is given, except the payload after the request it returns.
 *
 * CONNECT and UDP ASSOCIATE are served. BIND and SOCKS4 get a refusal in their own protocol's
 * words. The header of UDP ASSOCIATE's datagrams (RFC 1928, section 7) has its own pair of
 * functions: {@linkcode parseSocksUdp} and {@linkcode encodeSocksUdp}.
 *
 * @example
 * ```ts
 * import { SocksParser } from "./socks_parser.ts";
 * const parser = new SocksParser();
 * const step = parser.push(Uint8Array.of(5, 1, 0, 5, 1, 0, 1, 10, 0, 0, 5, 0x15, 0x38, 42));
 * console.assert(step.connect?.address === "10.0.0.5:5432" && step.rest?.[0] === 42);
 * ```
 *
 * @module
 */

import { formatIp, parseIp } from "../../util/net/address.ts";

/** SOCKS5 reply codes (RFC 1928, section 6). */
export const SocksReply = {
  /** The connection is up. */
  Succeeded: 0x00,
  /** Anything else: the tunnel is down, the daemon refused the stream, a malformed request. */
  GeneralFailure: 0x01,
  /** The target is not on the allowlist (or its address class is not allowed). */
  NotAllowed: 0x02,
  /** The network of the target cannot be reached. */
  NetworkUnreachable: 0x03,
  /** The target cannot be reached, or its name does not resolve. */
  HostUnreachable: 0x04,
  /** The target refused the connection. */
  ConnectionRefused: 0x05,
  /** The target did not answer in time. */
  TtlExpired: 0x06,
  /** BIND, or an unknown command. */
  CommandNotSupported: 0x07,
  /** An address type other than IPv4, a domain name or IPv6. */
  AddressTypeNotSupported: 0x08,
} as const;

/** Where a CONNECT goes, where a UDP datagram goes, or where UDP ASSOCIATE's client sends from. */
export interface SocksTarget {
  /** How the client named it. */
  readonly type: "ipv4" | "ipv6" | "name";
  /** The address (canonical text) or the name, unresolved. */
  readonly host: string;
  /** 1 to 65535; 0 only in a UDP ASSOCIATE request (the client's port is not known yet). */
  readonly port: number;
  /** `host:port`, IPv6 in brackets: what a forward stream's header carries. */
  readonly address: string;
}

/** What one {@linkcode SocksParser.push} found. */
export interface SocksStep {
  /** Bytes to send to the SOCKS client, in order (method choice, auth status, a refusal). */
  readonly replies: Uint8Array[];
  /** Set once a CONNECT request is complete: the handshake is done. */
  readonly connect?: SocksTarget;
  /**
   * Set once a UDP ASSOCIATE request is complete: the address and port the client says it will send
   * datagrams from (all zero when it does not know yet). The handshake is done.
   */
  readonly associate?: SocksTarget;
  /** With `connect` or `associate`: the bytes that came after the request (a view of the chunk), maybe empty. */
  readonly rest?: Uint8Array;
  /** Set when the handshake failed: send `replies`, then close. Says why, for the log. */
  readonly failure?: string;
  /** With `failure`: the credentials were wrong (worth a warning, unlike a confused client). */
  readonly badCredentials?: boolean;
}

/** Options of a {@linkcode SocksParser}. */
export interface SocksParserOptions {
  /**
   * Require username/password (RFC 1929) and check them with this; without it, only "no
   * authentication" is accepted.
   */
  readonly credentials?: (user: Uint8Array, password: Uint8Array) => boolean;
}

/**
 * The SOCKS5 reply (`code`) with the bound address `bound` (an IP address and port), or an
 * unspecified one (0.0.0.0:0) without it.
 */
export function socksReply(code: number, bound?: { host: string; port: number }): Uint8Array {
  const ip = bound ? parseIp(bound.host) : undefined;
  if (!bound || !ip) return Uint8Array.of(5, code, 0, 1, 0, 0, 0, 0, 0, 0);
  const type = ip.family === 4 ? AddressType.ipv4 : AddressType.ipv6;
  return Uint8Array.of(5, code, 0, type, ...ip.bytes, bound.port >> 8, bound.port & 0xff);
}

/** A SOCKS4 "request rejected or failed" reply: a SOCKS4 client's own words for no. */
const SOCKS4_REJECTED = [0, 0x5b, 0, 0, 0, 0, 0, 0];
const NO_ACCEPTABLE_METHOD = [5, 0xff];
const AUTH_OK = [1, 0];
const AUTH_FAILED = [1, 1];

const Method = { none: 0x00, password: 0x02 } as const;
const Command = { connect: 1, bind: 2, udpAssociate: 3 } as const;
const AddressType = { ipv4: 1, name: 3, ipv6: 4 } as const;

/** A host name as SOCKS clients send one (ASCII, IDNs in punycode), or an address in the name. */
const HOST_NAME = /^[A-Za-z0-9._-]+$/;

type State =
  | "version"
  | "method-count"
  | "methods"
  | "auth-version"
  | "user-length"
  | "user"
  | "password-length"
  | "password"
  | "request"
  | "name-length"
  | "address"
  | "done";

/** The SOCKS5 handshake of one connection; see the module notes. */
export class SocksParser {
  readonly #credentials: SocksParserOptions["credentials"];
  #state: State = "version";
  /** The field being collected, and how much of it is in. */
  #field = new Uint8Array(0);
  #have = 0;
  #user = new Uint8Array(0);
  #command = 0;
  #addressType = 0;

  /** A parser at the start of a connection. */
  constructor(options: SocksParserOptions = {}) {
    this.#credentials = options.credentials;
  }

  /** Whether the handshake is over (a CONNECT came, or it failed). */
  get done(): boolean {
    return this.#state === "done";
  }

  /**
   * Consumes `chunk` up to the end of the request (or of a failure) and says what to do. Bytes
   * after a complete request are returned as `rest`; once done, every chunk is `rest`.
   */
  push(chunk: Uint8Array): SocksStep {
    const replies: Uint8Array[] = [];
    const fail = (failure: string, reply?: number[] | Uint8Array, badCredentials = false) => {
      this.#state = "done";
      if (reply) replies.push(Uint8Array.from(reply));
      return { replies, failure, ...(badCredentials ? { badCredentials } : {}) };
    };
    if (this.#state === "done") return { replies, rest: chunk };
    let i = 0;
    while (i < chunk.length) {
      switch (this.#state) {
        case "version": {
          const version = chunk[i++];
          if (version === 4) return fail("SOCKS4 is not served: use SOCKS5", SOCKS4_REJECTED);
          if (version !== 5) {
            return fail(`not a SOCKS5 client (first byte 0x${version.toString(16)})`);
          }
          this.#state = "method-count";
          break;
        }
        case "method-count": {
          const count = chunk[i++];
          if (count === 0) return fail("no authentication method offered", NO_ACCEPTABLE_METHOD);
          this.#collect("methods", count);
          break;
        }
        case "methods":
        case "user":
        case "password":
        case "request":
        case "address": {
          i = this.#fill(chunk, i);
          if (this.#have < this.#field.length) break;
          const step = this.#fieldDone(replies, fail);
          if (step?.connect || step?.associate) {
            return { ...step, replies, rest: chunk.subarray(i) };
          }
          if (step) return step;
          break;
        }
        case "auth-version": {
          const version = chunk[i++];
          if (version !== 1) {
            return fail(`username/password version ${version}, not 1`, AUTH_FAILED);
          }
          this.#state = "user-length";
          break;
        }
        case "user-length":
        case "password-length": {
          const length = chunk[i++];
          if (length === 0) return fail("an empty username or password", AUTH_FAILED, true);
          this.#collect(this.#state === "user-length" ? "user" : "password", length);
          break;
        }
        case "name-length": {
          const length = chunk[i++];
          if (length === 0) {
            return fail("an empty host name", socksReply(SocksReply.HostUnreachable));
          }
          this.#collect("address", length + 2);
          break;
        }
      }
    }
    return { replies };
  }

  /** Starts collecting `length` bytes of a field in state `state`. */
  #collect(state: State, length: number): void {
    this.#state = state;
    this.#field = new Uint8Array(length);
    this.#have = 0;
  }

  /** Copies what `chunk` has of the current field from `i` on; returns where it stopped. */
  #fill(chunk: Uint8Array, i: number): number {
    const n = Math.min(this.#field.length - this.#have, chunk.length - i);
    this.#field.set(chunk.subarray(i, i + n), this.#have);
    this.#have += n;
    return i + n;
  }

  /** A field is complete: act on it. Returns a step when the handshake ends here. */
  #fieldDone(
    replies: Uint8Array[],
    fail: (failure: string, reply?: number[] | Uint8Array, bad?: boolean) => SocksStep,
  ): SocksStep | undefined {
    const field = this.#field;
    switch (this.#state) {
      case "methods": {
        const wanted = this.#credentials ? Method.password : Method.none;
        if (!field.includes(wanted)) {
          return fail(
            this.#credentials
              ? "the client offers no username/password authentication, which is required"
              : "the client offers only authentication methods that are not set up here",
            NO_ACCEPTABLE_METHOD,
          );
        }
        replies.push(Uint8Array.of(5, wanted));
        if (this.#credentials) this.#state = "auth-version";
        else this.#collect("request", 4);
        return undefined;
      }
      case "user":
        this.#user = field;
        this.#state = "password-length";
        return undefined;
      case "password": {
        const ok = this.#credentials!(this.#user, field);
        this.#user = new Uint8Array(0);
        field.fill(0); // the password lives no longer than it must
        if (!ok) return fail("wrong username or password", AUTH_FAILED, true);
        replies.push(Uint8Array.from(AUTH_OK));
        this.#collect("request", 4);
        return undefined;
      }
      case "request": {
        const [version, command, , addressType] = field;
        if (version !== 5) {
          return fail(`request version ${version}, not 5`, socksReply(SocksReply.GeneralFailure));
        }
        this.#command = command;
        this.#addressType = addressType;
        if (addressType === AddressType.ipv4) this.#collect("address", 4 + 2);
        else if (addressType === AddressType.ipv6) this.#collect("address", 16 + 2);
        else if (addressType === AddressType.name) this.#state = "name-length";
        else {
          return fail(
            `address type ${addressType} is not supported`,
            socksReply(SocksReply.AddressTypeNotSupported),
          );
        }
        return undefined;
      }
      case "address":
        return this.#request(field, fail);
    }
    return undefined;
  }

  /** The request's address is in: refuse what is not served, or say where to connect. */
  #request(
    field: Uint8Array,
    fail: (failure: string, reply?: number[] | Uint8Array) => SocksStep,
  ): SocksStep {
    this.#state = "done";
    const command = this.#command;
    if (command !== Command.connect && command !== Command.udpAssociate) {
      const what = command === Command.bind
        ? "BIND is not served"
        : `command ${command} is not a SOCKS5 command`;
      return fail(what, socksReply(SocksReply.CommandNotSupported));
    }
    const target = decodeAddress(this.#addressType, field);
    if (typeof target === "string") return fail(target, socksReply(SocksReply.HostUnreachable));
    if (command === Command.udpAssociate) {
      // The client's own address: a name there says nothing we could check a sender against.
      if (target.type === "name") {
        return fail(
          `UDP ASSOCIATE from a name (${JSON.stringify(target.host)}), not an address`,
          socksReply(SocksReply.AddressTypeNotSupported),
        );
      }
      return { replies: [], associate: target };
    }
    if (target.port === 0) {
      return fail(`port 0 of ${target.host}`, socksReply(SocksReply.GeneralFailure));
    }
    return { replies: [], connect: target };
  }
}

/**
 * An address field of type `addressType` (its bytes, then 2 of port) as a target, or why it is
 * not one. Port 0 is returned as it is: only the caller knows whether it may be 0.
 */
function decodeAddress(addressType: number, field: Uint8Array): SocksTarget | string {
  const port = (field[field.length - 2] << 8) | field[field.length - 1];
  const raw = field.subarray(0, field.length - 2);
  let type: SocksTarget["type"];
  let host: string;
  if (addressType === AddressType.name) {
    const name = String.fromCharCode(...raw);
    // Clients that resolve nothing themselves put an address in the name field too.
    const ip = parseIp(name);
    if (!ip && !HOST_NAME.test(name)) return `${JSON.stringify(name)} is not a host name`;
    type = ip ? (ip.family === 4 ? "ipv4" : "ipv6") : "name";
    host = ip ? formatIp(ip) : name;
  } else {
    type = addressType === AddressType.ipv4 ? "ipv4" : "ipv6";
    host = formatIp({ family: type === "ipv4" ? 4 : 6, bytes: raw.slice() });
  }
  const address = `${type === "ipv6" ? `[${host}]` : host}:${port}`;
  return { type, host, port, address };
}

/** One datagram of a UDP association, its header read (RFC 1928, section 7). */
export interface SocksUdpDatagram {
  /** The fragment number: 0 for a whole datagram (fragments are not served: drop the rest). */
  readonly frag: number;
  /** Where the payload goes (port 1 to 65535). */
  readonly target: SocksTarget;
  /** The payload: a view of the datagram given. */
  readonly data: Uint8Array;
}

/**
 * Reads the SOCKS5 UDP request header of `datagram` (RSV, FRAG, ATYP, DST.ADDR, DST.PORT, then
 * DATA). Returns why it is not one as a string (too short, an unknown address type, a bad name,
 * port 0); never throws.
 */
export function parseSocksUdp(datagram: Uint8Array): SocksUdpDatagram | string {
  if (datagram.length < 4) return `a UDP request of ${datagram.length} bytes has no header`;
  const frag = datagram[2];
  const addressType = datagram[3];
  let start = 4, length: number;
  if (addressType === AddressType.ipv4) length = 4;
  else if (addressType === AddressType.ipv6) length = 16;
  else if (addressType === AddressType.name) {
    if (datagram.length < 5 || datagram[4] === 0) return "a UDP request with an empty host name";
    length = datagram[4];
    start = 5;
  } else return `address type ${addressType} is not supported`;
  const end = start + length + 2;
  if (datagram.length < end) return "a UDP request's header is cut short";
  const target = decodeAddress(addressType, datagram.subarray(start, end));
  if (typeof target === "string") return target;
  if (target.port === 0) return `port 0 of ${target.host}`;
  return { frag, target, data: datagram.subarray(end) };
}

/**
 * `data` behind a SOCKS5 UDP header naming `from` (FRAG 0): how a reply from a target goes back
 * to the client. A name is written as a name (at most 255 bytes), an address as an address.
 */
export function encodeSocksUdp(from: SocksTarget, data: Uint8Array): Uint8Array {
  let address: number[];
  if (from.type === "name") {
    const name = new TextEncoder().encode(from.host);
    if (name.length > 255) throw new RangeError(`host name of ${name.length} bytes`);
    address = [AddressType.name, name.length, ...name];
  } else {
    const ip = parseIp(from.host);
    if (!ip) throw new RangeError(`${from.host} is not an address`);
    address = [ip.family === 4 ? AddressType.ipv4 : AddressType.ipv6, ...ip.bytes];
  }
  const header = [0, 0, 0, ...address, from.port >> 8, from.port & 0xff];
  const out = new Uint8Array(header.length + data.length);
  out.set(header);
  out.set(data, header.length);
  return out;
}
