/**
 * The tunnelmux client SDK: connect to a daemon, expose local services through it (reverse
 * tunnels), reach targets through it (forwards), offer and use named services, with reconnects.
 *
 * @example Expose a local web server and forward a local port to a database
 * ```ts ignore
 * import { connect } from "tunnelmux/client";
 * const client = await connect("ws://127.0.0.1:7080/tunnel", { token: "…" });
 * const web = await client.expose({ local: "127.0.0.1:3000", remotePort: 8080 });
 * const db = await client.forward({ listen: "127.0.0.1:15432", target: "db.internal:5432" });
 * const proxy = await client.socks({ listen: "127.0.0.1:1080" }); // targets on its allowlist
 * client.on("error", (error) => console.error(error.message));
 * ```
 *
 * @module
 */

export { Client, CLIENT_TRANSITIONS, connect } from "./client.ts";
export type {
  ClientEvent,
  ClientEvents,
  ClientState,
  ConnectOptions,
  ExposeOptions,
  Forward,
  HealthInfo,
  OfferOptions,
  RetryInfo,
  SocksOptions,
  SocksServer,
  Tunnel,
} from "./client.ts";
export type { UdpForward } from "./tunnels/forward_udp.ts";
export type { UdpCounters, UdpDrop } from "../tunnel/udp/udp_flow.ts";
export { connectHa, HaClient } from "./ha_client.ts";
export { HealthMonitor, probe } from "./tunnels/health_check.ts";
export { hashPassword } from "../tunnel/policy/password_hash.ts";
export type {
  BasicAuthUser,
  HeaderRules,
  HttpPolicy,
  JwtRule,
  OidcRule,
} from "../tunnel/policy/http_policy.ts";
export type { HealthCheck, HealthOptions } from "./tunnels/health_check.ts";
export type { Bandwidth, VisitorPolicy } from "../tunnel/policy/visitor_policy.ts";
export type { HaEvents, HaOptions, HaSession } from "./ha_client.ts";
export { Backoff } from "./connect/backoff.ts";
export { Emitter } from "./emitter.ts";
export type { HostResolver } from "./connect/dial_server.ts";
export type { BackoffOptions } from "./connect/backoff.ts";
export { ClientError, describeStreamError } from "./errors.ts";
export { DEFAULT_SOCKS_LISTEN } from "./tunnels/socks.ts";
export type { SocksUdpDrop, SocksUdpStats } from "./tunnels/socks_udp.ts";
export type { ClientErrorCode, StreamResetCode } from "./errors.ts";
export { Stream } from "../protocol/stream.ts";
export type { VisitorInspector, VisitorObserver } from "./tunnels/visitors.ts";
export type { InspectorServer, StartInspectorOptions } from "./inspector/start.ts";
export type { InspectorOptions } from "./inspector/inspector.ts";
export type { RecorderLimits } from "./inspector/recorder.ts";

/**
 * Starts the request inspector (docs/inspector.md): give the result to {@linkcode connect} as
 * `inspector`. Its modules, web app included, load on the first call, not with the SDK.
 */
export async function startInspector(
  options?: import("./inspector/start.ts").StartInspectorOptions,
): Promise<import("./inspector/start.ts").InspectorServer> {
  const { startInspector } = await import("./inspector/start.ts");
  return await startInspector(options);
}
