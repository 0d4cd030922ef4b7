/**
 * The yamux engine: frame codec, sessions, streams, flow control, keepalive and GoAway, following
 * hashicorp's spec.md and wire-compatible with hashicorp/yamux, go-yamux, rust-yamux and
 * @chainsafe/libp2p-yamux. Pure logic: it runs over any {@linkcode Transport}.
 *
 * @example
 * ```ts ignore
 * import { Session } from "tunnelmux/protocol";
 * import { connectTcp } from "tunnelmux/transport";
 * const session = new Session(await connectTcp({ hostname: "127.0.0.1", port: 7000 }), { client: true });
 * const stream = session.open();
 * stream.onData = (chunk) => console.log(new TextDecoder().decode(chunk));
 * stream.write(new TextEncoder().encode("hello"));
 * stream.end();
 * ```
 *
 * @module
 */

export * from "./constants.ts";
export * from "./config.ts";
export * from "./errors.ts";
export * from "./frame_decoder.ts";
export * from "./header.ts";
export { Session, SESSION_TRANSITIONS } from "./session.ts";
export type { SessionEvent, SessionOptions, SessionState, StreamRefusal } from "./session.ts";
export * from "./stats.ts";
export { Stream } from "./stream.ts";
export type { DataHandler, StreamHost } from "./stream.ts";
export * from "./stream_state.ts";
export * from "./transport.ts";
export { toReadable, toWritable } from "./web_streams.ts";
export type { CallbackStream } from "./web_streams.ts";
