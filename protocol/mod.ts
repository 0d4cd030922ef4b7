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

// The engine's whole public surface, by name: the frame codec, the decoder and the stats
// helpers stay inside (the daemon imports them from their files where it needs them).
export { GoAwayCode, INITIAL_STREAM_WINDOW, PROTOCOL_VERSION } from "./constants.ts";
export { DEFAULT_SESSION_CONFIG, streamWindowConfig } from "./config.ts";
export type { SessionConfig } from "./config.ts";
export { YamuxError } from "./errors.ts";
export type { YamuxErrorCode } from "./errors.ts";
export { Session, SESSION_TRANSITIONS } from "./session.ts";
export type { SessionEvent, SessionOptions, SessionState, StreamRefusal } from "./session.ts";
export { goAwayCodeName } from "./stats.ts";
export type { FrameCounts, SessionStats } from "./stats.ts";
export { Stream } from "./stream.ts";
export type { DataHandler } from "./stream.ts";
// The two sides Session plays for its decoder and its streams; named so its type is complete.
export type { FrameSink } from "./frame_decoder.ts";
export type { StreamHost } from "./stream.ts";
export { STREAM_TRANSITIONS } from "./stream_state.ts";
export type { StreamEvent, StreamState } from "./stream_state.ts";
export type { Transport, TransportHandlers, TransportListener } from "./transport.ts";
export { toReadable, toWritable } from "./web_streams.ts";
export type { CallbackStream } from "./web_streams.ts";
