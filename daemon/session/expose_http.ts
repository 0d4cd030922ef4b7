/**
 * Tunnels by host name: an `expose` request naming `http`. The name the client asks for (a label
 * under the base domain, or a full name its `expose.hosts` allows) is held on the daemon's HTTP
 * port, whose requests are routed to it by `Host`, or, with `passthrough`, on the HTTPS port,
 * whose connections are passed to it undecrypted by their TLS server name. One holder per name,
 * in the whole cluster.
 *
 * @module
 */

import type { Session } from "../../protocol/session.ts";
import type { ClientMessage } from "../../tunnel/control/control.ts";
import type { Logger } from "../../util/log.ts";
import type { ClientConfig, Config } from "../config/mod.ts";
import { claimableHost } from "../policy/host_names.ts";
import type { Registry } from "../registry/registry.ts";
import { newTunnelId } from "../tunnels/open_tunnel.ts";
import { ReverseTunnel } from "../tunnels/reverse_tunnel.ts";
import type { Answer } from "./answer.ts";
import type { VisitorLimit } from "../tunnels/visitor_limit.ts";
import type { SessionTunnels } from "./session_tunnels.ts";
import type { VisitorPolicy } from "../../tunnel/policy/visitor_policy.ts";

/** An `expose` request. */
export type ExposeMessage = Extract<ClientMessage, { type: "expose" }>;

/** What a tunnel by host name needs from the session and the daemon. */
export interface ExposeHttpContext {
  /** The session's id. */
  readonly sessionId: string;
  /** The client's yamux session, which visitors are sent through. */
  readonly yamux: Pick<Session, "open">;
  /** Where the name is claimed and the tunnel listed (read at each use). */
  readonly registry: Registry;
  /** The session's tunnels. */
  readonly tunnels: Pick<SessionTunnels, "add" | "hostClaim">;
  /** The session's logger. */
  readonly log: Logger;
  /** What a tunnel of `client` checks its visitors against (see `tunnels/visitor_limit.ts`). */
  visitorLimit(client: string): VisitorLimit;
  /** Whether the session has ended (it may while the name is being claimed). */
  ended(): boolean;
  /** The configuration in force now: its base domain. */
  config(): Pick<Config, "http">;
  /** The bound HTTP port, or undefined while `listen.http` is off. */
  httpPort(): number | undefined;
  /** The bound HTTPS port, or undefined while `listen.https` is off. */
  httpsPort(): number | undefined;
  /** Whether the HTTPS port terminates TLS for `host` (a certificate, or ACME, serves it). */
  terminates(host: string): boolean;
  /** A tunnel now holds `host` for HTTP: asks ACME for its certificate if none serves it. */
  wantCertificate(host: string): void;
}

/**
 * Opens an HTTP (or, with `passthrough`, TLS) tunnel holding the host `name` for `client`, and
 * answers `exposed` with its URL; `expose` calls it once the checks every tunnel passes are done.
 */
export async function exposeHttp(
  context: ExposeHttpContext,
  client: ClientConfig,
  message: ExposeMessage,
  name: string,
  answer: Answer,
  effective: { policy?: VisitorPolicy; requestedPolicy?: VisitorPolicy } = {},
): Promise<void> {
  const passthrough = message.passthrough === true;
  const httpPort = context.httpPort();
  const httpsPort = context.httpsPort();
  if (passthrough && httpsPort === undefined) {
    return answer.fail("not_allowed", "this daemon has no HTTPS listener for TLS tunnels");
  }
  if (httpPort === undefined && httpsPort === undefined) {
    return answer.fail("not_allowed", "this daemon has no HTTP or HTTPS listener");
  }
  if (message.port !== 0 || message.group !== undefined) {
    return answer.fail("not_allowed", "an HTTP tunnel takes a name, not a port or a group");
  }
  const named = claimableHost(name, client.expose.hosts, context.config().http.domain);
  if (!named.ok) return answer.fail("not_allowed", named.message);
  // The HTTP rules in force (the operator's narrowed by the client's: see expose.ts).
  const http = effective.policy?.http;
  if (http !== undefined && passthrough) {
    return answer.fail("not_allowed", "policy.http: a TLS tunnel's requests are not seen");
  }
  const prefix = http?.pathPrefix;
  if (prefix !== undefined && !context.registry.pathPrefixes) {
    return answer.fail("not_allowed", "policy.http.pathPrefix: not available with this registry");
  }
  // Visitors are sent where TLS works for the name, else to plain HTTP.
  const secure = passthrough || httpPort === undefined ||
    (httpsPort !== undefined && context.terminates(named.host));
  const port = (secure ? httpsPort : httpPort) as number;
  const url = webUrl(secure, named.host, port, prefix);
  // Requests by name reach it on the HTTP port too, when its visitors are sent to HTTPS.
  const urls = secure && !passthrough && httpPort !== undefined
    ? [webUrl(false, named.host, httpPort, prefix), url]
    : [url];
  const tunnel = new ReverseTunnel({
    id: newTunnelId(),
    client: client.name,
    session: context.yamux,
    bindHost: named.host,
    port,
    host: named.host,
    passthrough,
    urls,
    httpPolicy: http,
    gate: http && new (await import("../http/http_gate.ts")).HttpGate(http),
    label: message.label,
    visitorLimit: context.visitorLimit(client.name),
    log: context.log,
    ...effective,
  });
  const claimed = await context.registry.claimHost(context.tunnels.hostClaim(tunnel), tunnel);
  if (!claimed.ok) {
    return claimed.reason === "taken"
      ? answer.fail("conflict", `${named.host}${prefix ?? ""} is held by another tunnel`)
      : answer.fail("unavailable", "the cluster registry cannot be reached; try again");
  }
  // The session may have ended while the name was being claimed.
  if (context.ended()) {
    tunnel.close();
    return void context.registry.releaseHost(context.tunnels.hostClaim(tunnel), tunnel);
  }
  context.tunnels.add(tunnel, passthrough ? `tls://${named.host}:${port}` : url);
  if (!passthrough && httpsPort !== undefined) context.wantCertificate(named.host);
  answer.send({
    type: "exposed",
    id: message.id,
    tunnel: tunnel.id,
    bindHost: named.host,
    port,
    url,
  });
}

/** `http://HOST[:PORT]/[PREFIX/]` or `https://…`, the scheme's default port left out. */
function webUrl(secure: boolean, host: string, port: number, prefix = "/"): string {
  const path = prefix.endsWith("/") ? prefix : `${prefix}/`;
  return `${secure ? "https" : "http"}://${host}${
    port === (secure ? 443 : 80) ? "" : `:${port}`
  }${path}`;
}
