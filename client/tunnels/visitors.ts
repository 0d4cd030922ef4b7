/**
 * Streams the daemon opens to the client: a visitor of one of its reverse tunnels (header kind
 * `visitor`), a flow of one of its UDP tunnels (`udpVisitor`, served by `udp_flow.ts`), or a user
 * of a service it offers (kind `service`). Each is read for its header,
 * matched to the local service it is for, and spliced to a TCP connection to that service, after
 * a PROXY protocol header when the tunnel asks for one. A stream that cannot be served is reset
 * with the reason, so the daemon (and the visitor's side) learns why.
 *
 * @module
 */

import type { Stream } from "../../protocol/stream.ts";
import { dialTcpThen, resetReasonForDial } from "../../tunnel/dial.ts";
import { encodeProxyV1, encodeProxyV2 } from "../../tunnel/proxy_protocol/proxy_protocol.ts";
import { onStreamHeader } from "../../tunnel/stream/read_stream_header.ts";
import { ResetReason } from "../../tunnel/stream/reset_reasons.ts";
import { type SpliceObserver, spliceThen, streamEnd, transportEnd } from "../../tunnel/splice.ts";
import type { StreamHeader } from "../../tunnel/stream/stream_header.ts";
import { type HostPort, parseHostPort } from "../../util/net/address.ts";
import { ClientError } from "../errors.ts";
import { serveUdpFlow, type UdpCounters } from "../../tunnel/udp/udp_flow.ts";

/** Where incoming streams go, and what to do when their local service cannot be reached. */
export interface VisitorRoutes {
  /** The tunnel the daemon knows as `id`: its local service and PROXY protocol version. */
  tunnel(id: string):
    | {
      local: string;
      proxyProtocol?: "v1" | "v2";
      http?: string;
      /** A UDP tunnel's counters: its visitors come as `udpVisitor` flows, never as `visitor`. */
      udp?: UdpCounters;
    }
    | undefined;
  /** The local service of the offered service `name`. */
  service(name: string): string | undefined;
  /**
   * Deadlines, read for each stream: for its header (`connectTimeoutMs`) and for dialing the
   * local service (`dialTimeoutMs`), 10 s each by default.
   */
  readonly deadlines: { readonly connectTimeoutMs?: number; readonly dialTimeoutMs?: number };
  /** The local service could not be dialed (a `local_dial_failed` error). */
  onDialError(error: ClientError): void;
  /** The request inspector, watching HTTP tunnels' visitors; absent: nothing looks at them. */
  readonly inspector?: VisitorInspector;
}

/** What watches an HTTP tunnel's visitor: the request inspector (`client/inspector/`). */
export interface VisitorInspector {
  /** An observer for one visitor's stream of the HTTP tunnel named `tunnel`. */
  observe(visit: { tunnel: string; local: string; remote: string }): VisitorObserver;
}

/** Sees one visitor's bytes: the request direction is `aToB` (visitor to service). */
export interface VisitorObserver extends SpliceObserver {
  /** The stream is done; `error` when it failed (the local service unreachable, a reset). */
  close(error?: Error): void;
}

/**
 * Serves a stream the daemon opened: reads its header, finds the local service, and pipes the
 * stream to it. An unknown tunnel or service, another kind of stream or a bad header resets it
 * with the reason.
 */
export function acceptIncoming(stream: Stream, routes: VisitorRoutes): void {
  onStreamHeader(stream, routes.deadlines.connectTimeoutMs ?? 10_000, (error, read) => {
    if (error) return stream.reset(ResetReason.BadHeader);
    try {
      serve(stream, read!.header, read!.rest, routes);
    } catch {
      // Called from the stream's data, so a throw would reach the session: whatever fails while
      // one stream is served (the request inspector, say) costs that stream only.
      stream.reset(ResetReason.BadHeader);
    }
  });
}

/** Serves a stream by what its header says, in the turn the header arrived (no promise). */
function serve(stream: Stream, header: StreamHeader, rest: Uint8Array, routes: VisitorRoutes) {
  let local: string | undefined;
  let first = rest;
  let observer: VisitorObserver | undefined;
  if (header.kind === "visitor") {
    const tunnel = routes.tunnel(header.tunnel);
    if (!tunnel) return stream.reset(ResetReason.UnknownTunnel);
    if (tunnel.udp) return stream.reset(ResetReason.BadHeader);
    local = tunnel.local;
    if (tunnel.proxyProtocol) first = withProxyHeader(tunnel.proxyProtocol, header, rest);
    if (tunnel.http !== undefined && routes.inspector) {
      observer = routes.inspector.observe({ tunnel: tunnel.http, local, remote: header.remote });
      // The bytes that came with the header, seen here: the splice shows only later ones.
      observer.aToB(rest);
    }
  } else if (header.kind === "udpVisitor") {
    const tunnel = routes.tunnel(header.tunnel);
    if (!tunnel) return stream.reset(ResetReason.UnknownTunnel);
    if (!tunnel.udp) return stream.reset(ResetReason.BadHeader);
    return void serveUdpVisitor(stream, tunnel.local, rest, tunnel.udp, routes);
  } else if (header.kind === "service") {
    local = routes.service(header.service);
    if (!local) return stream.reset(ResetReason.UnknownService);
  } else {
    return stream.reset(ResetReason.BadHeader);
  }
  pipeToLocalThen(stream, local, first, routes, observer);
}

/**
 * Serves one flow of a UDP tunnel: its datagrams go to UDP `local` from a socket of the flow's
 * own, whose replies come back on the stream. A socket that cannot be opened resets the stream
 * and is reported as `local_dial_failed`.
 */
async function serveUdpVisitor(
  stream: Stream,
  local: string,
  rest: Uint8Array,
  counters: UdpCounters,
  routes: Pick<VisitorRoutes, "onDialError">,
): Promise<void> {
  const { hostname, port } = parseHostPort(local);
  try {
    await serveUdpFlow(stream, { hostname, port, rest, counters });
  } catch (error) {
    routes.onDialError(
      new ClientError(
        "local_dial_failed",
        `cannot open a UDP socket for ${local}: ${(error as Error).message}`,
      ),
    );
  }
}

/**
 * A PROXY protocol header (`version`) naming the visitor's address and the address it reached,
 * followed by `rest` (payload that came with the stream header), in one buffer.
 */
export function withProxyHeader(
  version: "v1" | "v2",
  header: Extract<StreamHeader, { kind: "visitor" }>,
  rest: Uint8Array,
): Uint8Array {
  const encode = version === "v2" ? encodeProxyV2 : encodeProxyV1;
  const proxyHeader = encode(header.remote, header.local);
  const first = new Uint8Array(proxyHeader.length + rest.length);
  first.set(proxyHeader);
  first.set(rest, proxyHeader.length);
  return first;
}

/** Local services as configured → their host and port, parsed once (a few per client). */
const locals = new Map<string, HostPort>();
const LOCALS = 64;

/** `local` as host and port: every visitor of a tunnel dials the same one. */
function localAddress(local: string): HostPort {
  let address = locals.get(local);
  if (address === undefined) {
    address = parseHostPort(local);
    if (locals.size >= LOCALS) locals.clear();
    locals.set(local, address);
  }
  return address;
}

/**
 * Dials `local` and pipes `stream` to it, writing `first` (PROXY header, early payload) first.
 * A failed dial resets the stream with its reason (refused, timed out, failed) and is reported to
 * `routes.onDialError`. `observer` (the inspector's) sees the bytes after `first` and is told
 * the end. Resolves when the stream is done.
 */
export function pipeToLocal(
  stream: Stream,
  local: string,
  first: Uint8Array,
  routes: Pick<VisitorRoutes, "deadlines" | "onDialError">,
  observer?: VisitorObserver,
): Promise<void> {
  return new Promise((resolve) => pipeToLocalThen(stream, local, first, routes, observer, resolve));
}

/**
 * {@linkcode pipeToLocal} with callbacks all the way (`done`, if given, when the stream is done):
 * every visitor comes this way, and a promise per step would be work for nothing.
 */
function pipeToLocalThen(
  stream: Stream,
  local: string,
  first: Uint8Array,
  routes: Pick<VisitorRoutes, "deadlines" | "onDialError">,
  observer?: VisitorObserver,
  done?: () => void,
): void {
  const { hostname, port } = localAddress(local);
  dialTcpThen(hostname, port, routes.deadlines.dialTimeoutMs ?? 10_000, (error, socket) => {
    if (error) {
      // A DialError names the address already.
      const failure = new ClientError(
        "local_dial_failed",
        `cannot reach the local service: ${error.message}`,
      );
      observer?.close(failure);
      routes.onDialError(failure);
      stream.reset(resetReasonForDial(error));
      return done?.();
    }
    const options = observer ? { aFirst: first, observer } : { aFirst: first };
    spliceThen(streamEnd(stream), transportEnd(socket!), options, (result) => {
      observer?.close(result.error);
      done?.();
    });
  });
}
