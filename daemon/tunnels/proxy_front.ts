/**
 * Visitors that come through a trusted front (a load balancer listed in `trustedProxies`) with a
 * PROXY protocol header (v1 or v2) before their bytes: the header is read and taken off, and the
 * visitor goes on as a transport whose `remoteAddress` is the one the header names, so a tunnel's
 * visitor policy (and the client's own PROXY header, and logs) judge the visitor, not the front.
 * A connection from a trusted front whose header is malformed, too long or late is closed, as the
 * spec says; one from anyone else is never read for a header.
 *
 * @module
 */

import type { Transport, TransportHandlers } from "../../protocol/transport.ts";
import {
  decodeProxyHeader,
  type ProxyHeader,
  ProxyProtocolError,
} from "../../tunnel/proxy_protocol/proxy_protocol_decoder.ts";
import { visitorIp } from "../../tunnel/policy/visitor_gate.ts";
import type { AddressRules } from "../../tunnel/policy/visitor_policy.ts";
import { concat } from "../../util/bytes/bytes.ts";
import type { Preamble } from "../../transport/tls/front.ts";

/** The longest header read: a v2 header with TLVs of a usual size (HAProxy reads 536 at most). */
export const MAX_PROXY_HEADER = 1024;

/** Whether the connection `transport` came from a front in `trusted`. */
export function fromTrustedFront(transport: Transport, trusted: AddressRules | undefined): boolean {
  return isTrustedFront(transport.remoteAddress, trusted);
}

/** Whether a connection from `remoteAddress` (`host:port`) came from a front in `trusted`. */
export function isTrustedFront(remoteAddress: string, trusted: AddressRules | undefined): boolean {
  if (!trusted) return false;
  const ip = visitorIp(remoteAddress);
  return ip !== undefined && trusted.admits(ip);
}

/**
 * The PROXY header at the start of `bytes` as the HTTPS port's preamble (before the ClientHello):
 * null while incomplete; throws when malformed or longer than {@linkcode MAX_PROXY_HEADER}.
 */
export function proxyPreamble(bytes: Uint8Array): Preamble | null {
  const header = decodeProxyHeader(bytes);
  if (!header) {
    if (bytes.length > MAX_PROXY_HEADER) throw new ProxyProtocolError("PROXY header too long");
    return null;
  }
  return {
    length: header.length,
    remoteAddress: header.source,
    localAddress: header.destination,
  };
}

/**
 * Reads the PROXY header of `transport` (a trusted front's connection) within `timeoutMs`:
 * resolves with the visitor's transport (the header taken off, its addresses from the header), or
 * with why it was closed instead. Never rejects.
 */
export function readProxyHeader(
  transport: Transport,
  timeoutMs: number,
): Promise<{ ok: true; visitor: Transport } | { ok: false; reason: string }> {
  return new Promise((resolve) => {
    let pending: Uint8Array = new Uint8Array(0);
    let visitor: ProxiedTransport | undefined;
    const fail = (reason: string) => {
      clearTimeout(timer);
      if (visitor) return;
      transport.close();
      resolve({ ok: false, reason });
    };
    const timer = setTimeout(() => fail("no PROXY header in time"), timeoutMs);
    // Chunks here are never pooled (no `releases`): they may be kept as long as needed.
    transport.start({
      data(chunk) {
        if (visitor) return visitor.deliver(chunk);
        pending = pending.length === 0 ? chunk : concat([pending, chunk]);
        let header: ProxyHeader | null;
        try {
          header = decodeProxyHeader(pending);
        } catch (error) {
          if (!(error instanceof ProxyProtocolError)) throw error;
          return fail(error.message);
        }
        if (!header) {
          if (pending.length > MAX_PROXY_HEADER) fail("PROXY header too long");
          return;
        }
        clearTimeout(timer);
        transport.pause();
        visitor = new ProxiedTransport(transport, header, pending.subarray(header.length));
        resolve({ ok: true, visitor });
      },
      drain: () => visitor?.handlers?.drain(),
      end() {
        if (visitor) visitor.ended();
        else fail("closed before its PROXY header");
      },
      close(error) {
        if (visitor) visitor.closed(error);
        else fail("closed before its PROXY header");
      },
    });
  });
}

/** A front's connection after its PROXY header: the visitor's addresses, the rest of its bytes. */
class ProxiedTransport implements Transport {
  readonly remoteAddress: string;
  readonly localAddress: string;
  handlers: TransportHandlers | undefined;
  readonly #inner: Transport;
  #held: Uint8Array[] = [];
  #end = false;
  #close: { error?: Error } | undefined;
  #paused = false;

  constructor(inner: Transport, header: ProxyHeader, rest: Uint8Array) {
    this.#inner = inner;
    // LOCAL, UNKNOWN and families without addresses: the connection's own endpoints.
    this.remoteAddress = header.source ?? inner.remoteAddress;
    this.localAddress = header.destination ?? inner.localAddress;
    if (rest.length > 0) this.#held.push(rest);
  }

  get bufferedAmount(): number {
    return this.#inner.bufferedAmount;
  }

  start(handlers: TransportHandlers): void {
    this.handlers = handlers;
    // What came with the header (and any read after the pause) goes first, then end and close.
    for (const chunk of this.#held.splice(0)) handlers.data(chunk);
    if (this.#end) handlers.end();
    if (this.#close) return handlers.close(this.#close.error);
    if (!this.#paused) this.#inner.resume();
  }

  /** @internal Bytes from the front after the header. */
  deliver(chunk: Uint8Array): void {
    if (this.handlers) this.handlers.data(chunk);
    else this.#held.push(chunk);
  }

  /** @internal The front half-closed. */
  ended(): void {
    if (this.handlers) this.handlers.end();
    else this.#end = true;
  }

  /** @internal The front's connection closed. */
  closed(error?: Error): void {
    if (this.handlers) this.handlers.close(error);
    else this.#close = { error };
  }

  write(chunk: Uint8Array): boolean {
    return this.#inner.write(chunk);
  }

  pause(): void {
    this.#paused = true;
    this.#inner.pause();
  }

  resume(): void {
    this.#paused = false;
    if (this.handlers) this.#inner.resume();
  }

  end(): void {
    this.#inner.end();
  }

  close(): void {
    this.#inner.close();
  }
}
