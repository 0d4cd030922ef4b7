/**
 * The tunnel layer: tunnelmux's own protocol on top of the yamux engine, and what the daemon and
 * the client share to carry it. Every yamux stream starts with a stream header saying what it is
 * (control, visitor, forward, service, echo); the control stream carries newline-free JSON
 * messages (hello, expose, offer, …); a refused stream is reset with a reason code in the RST
 * frame's length. See docs/protocol.md for the wire format.
 *
 * @example Open a forward stream to a target through a daemon
 * ```ts ignore
 * import { Session } from "tunnelmux/protocol";
 * import { encodeStreamHeader } from "tunnelmux/tunnel";
 * declare const session: Session; // an authenticated client session
 * const stream = session.open();
 * stream.write(encodeStreamHeader({ kind: "forward", target: "127.0.0.1:5432" }));
 * ```
 *
 * @module
 */

export * from "./ack_delay.ts";
export * from "./control/control.ts";
export * from "./control/control_channel.ts";
export * from "./dial.ts";
export * from "./echo.ts";
export {
  encodeProxyV1,
  encodeProxyV2,
  PROXY_V2_SIGNATURE,
} from "./proxy_protocol/proxy_protocol.ts";
export * from "./stream/read_stream_header.ts";
export * from "./stream/reset_reasons.ts";
export * from "./splice.ts";
export * from "./stream/stream_header.ts";
export * from "./policy/visitor_policy.ts";
export * from "./policy/visitor_gate.ts";
export type { IpAddress } from "../util/net/address.ts";
