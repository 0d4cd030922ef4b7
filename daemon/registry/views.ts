/**
 * The registry's handles as JSON: plain objects built from live sessions, tunnels and offers when
 * asked, which the admin API answers with and cluster nodes send each other (`cluster/answers.ts`;
 * nodes of different versions read them, so a shape only grows). Kept in one place so the shapes
 * are reviewed together, and so that nothing secret (tokens, hashes) can reach a response by
 * passing a config object through whole.
 *
 * @module
 */

import type { VisitorPolicy } from "../../tunnel/policy/visitor_policy.ts";
import { httpPolicyView } from "../../tunnel/policy/http_policy.ts";
import type { ServedCertificate } from "../tls/certificates.ts";
import type { SessionHandle } from "./registry.ts";
import type { TunnelHandle } from "./registry.ts";
import type { Registry, ServiceOffer } from "./registry.ts";
import type { Stream } from "../../protocol/stream.ts";
import { formatHostPort } from "../../util/net/address.ts";
import type { UdpCounters } from "../../tunnel/udp/udp_flow.ts";

/** What a client is told when an operator closes its tunnel, from this node or another. */
export const OPERATOR_CLOSE = "closed by an operator";

/** One stream of a session, with its flow-control state. */
export function streamView(stream: Readonly<Stream>, now: number) {
  return {
    id: stream.id,
    state: stream.state,
    bytesIn: stream.bytesIn,
    bytesOut: stream.bytesOut,
    sendWindow: stream.sendWindow,
    receiveWindow: stream.receiveWindow,
    bufferedBytes: stream.bufferedBytes,
    queuedBytes: stream.queuedBytes,
    ageMs: now - stream.createdAt,
  };
}

/** A session as listed: who, from where, over what, since when, and its traffic. */
export function sessionSummary(session: SessionHandle) {
  return {
    id: session.id,
    client: session.client ?? null,
    state: session.state,
    transport: session.transportKind,
    remoteAddress: session.remoteAddress,
    since: new Date(session.since).toISOString(),
    // rtt is 0 until the first keepalive ping was answered; null says "not measured yet".
    rttMs: session.rtt > 0 ? session.rtt : null,
    bytesIn: session.stats.bytesIn,
    bytesOut: session.stats.bytesOut,
    streamCount: session.streamCount,
    tunnelCount: session.tunnelIds().length,
    ha: session.ha,
  };
}

/** A session in detail: the summary plus every stream, its tunnels and its frame counters. */
export function sessionDetail(session: SessionHandle) {
  const now = Date.now();
  const stats = session.stats;
  return {
    ...sessionSummary(session),
    frames: { in: stats.framesIn, out: stats.framesOut },
    resets: { sent: stats.resetsSent, received: stats.resetsReceived },
    streams: [...session.streams()].sort((a, b) => a.id - b.id).map((s) => streamView(s, now)),
    tunnels: session.tunnelIds().sort(),
    // Its UDP forwards' flows: `in` from the targets (toward the client), `out` to them.
    udpForwards: session.udpForwards ? udpForwardView(session.udpForwards) : null,
  };
}

/** A session's UDP forward counters as the admin API shows them. */
export function udpForwardView(udp: Readonly<UdpCounters>) {
  return {
    flowsOpen: udp.flowsOpen,
    flows: udp.flows,
    datagramsToTargets: udp.datagramsOut,
    datagramsFromTargets: udp.datagramsIn,
    bytesToTargets: udp.bytesOut,
    bytesFromTargets: udp.bytesIn,
    drops: { ...udp.drops },
  };
}

/** A certificate of the HTTPS port, without its key. */
export function certificateView(served: ServedCertificate) {
  return {
    names: [...served.names],
    notBefore: new Date(served.notBefore).toISOString(),
    notAfter: new Date(served.notAfter).toISOString(),
    source: served.source,
  };
}

/**
 * A reverse tunnel with its counters; `sessionId` is the owning session, if still known, and
 * `certificate` what the HTTPS port terminates its host with.
 */
export function tunnelView(
  tunnel: TunnelHandle,
  sessionId: string | null,
  certificate?: ServedCertificate,
) {
  return {
    id: tunnel.id,
    client: tunnel.client,
    session: sessionId,
    bind: formatHostPort(tunnel.bindHost, tunnel.port),
    protocol: tunnelProtocol(tunnel),
    host: tunnel.host ?? null,
    // An HTTP tunnel may be reached on both web ports; `bind` names the one visitors are sent to.
    urls: [...tunnel.urls],
    passthrough: tunnel.passthrough,
    certificate: certificate && !tunnel.passthrough ? certificateView(certificate) : null,
    label: tunnel.label ?? null,
    createdAt: new Date(tunnel.createdAt).toISOString(),
    connections: tunnel.stats.connections,
    active: tunnel.stats.active,
    // aToB is visitor → client, bToA client → visitor (see TunnelStats).
    bytesFromVisitors: tunnel.stats.aToB,
    bytesToVisitors: tunnel.stats.bToA,
    errors: tunnel.stats.errors,
    healthy: tunnel.healthy,
    policy: policyView(tunnel.policy),
    // A UDP tunnel's flows, datagrams and drops: its connections above count flows, its bytes
    // payload bytes.
    udp: tunnel.udp ? udpView(tunnel.udp) : null,
  };
}

/** What a tunnel carries: `tcp` or `udp` for a port, `http` or `tls` for a host name. */
export function tunnelProtocol(tunnel: TunnelHandle): "tcp" | "udp" | "http" | "tls" {
  if (tunnel.protocol === "udp") return "udp";
  if (tunnel.host === undefined) return "tcp";
  return tunnel.passthrough ? "tls" : "http";
}

/** UDP counters as the admin API shows them: `in` is from visitors (toward the client). */
export function udpView(udp: Readonly<UdpCounters>) {
  return {
    flowsOpen: udp.flowsOpen,
    flows: udp.flows,
    datagramsFromVisitors: udp.datagramsIn,
    datagramsToVisitors: udp.datagramsOut,
    bytesFromVisitors: udp.bytesIn,
    bytesToVisitors: udp.bytesOut,
    drops: { ...udp.drops },
  };
}

/**
 * A tunnel's visitor policy in force, as the operator sees it: every rule, but no secret (password
 * hashes and an OIDC client secret show as set, not as they are: `httpPolicyView`).
 */
export function policyView(policy: VisitorPolicy): VisitorPolicy | Record<string, unknown> {
  return policy?.http ? { ...policy, http: httpPolicyView(policy.http) } : policy;
}

/**
 * This node's tunnels as listed, oldest first, each with its owning session and the certificate
 * `certificates` has for its host name.
 */
export function tunnelList(
  registry: Registry,
  certificates: { find(host: string): ServedCertificate | undefined },
) {
  return registry.tunnels().sort((a, b) => a.createdAt - b.createdAt)
    .map((t) =>
      tunnelView(
        t,
        registry.tunnelOwner(t.id)?.id ?? null,
        t.host === undefined ? undefined : certificates.find(t.host),
      )
    );
}

/** A named service offer with its counters. */
export function serviceView(offer: ServiceOffer) {
  return {
    name: offer.name,
    client: offer.client,
    session: offer.session,
    node: offer.node,
    owner: offer.owner ?? `client:${offer.client}`,
    healthy: offer.healthy,
    connections: offer.stats.connections,
    active: offer.stats.active,
    // aToB is user → offerer, bToA the other way (see ServiceOffer).
    bytesToOfferer: offer.stats.aToB,
    bytesFromOfferer: offer.stats.bToA,
  };
}
