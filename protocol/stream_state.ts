/**
 * The eight stream states of hashicorp/yamux and the flag events that move between them. A stream
 * consults this table only when a frame carries SYN, ACK, FIN or RST, never for plain data.
 *
 * @module
 */

/** Where a stream is in its life. */
export enum StreamState {
  /** Created locally; SYN not yet sent. */
  Init = "init",
  /** SYN sent; waiting for the peer's ACK. */
  SynSent = "syn_sent",
  /** Peer's SYN received; our ACK not yet sent (waiting in the accept backlog). */
  SynReceived = "syn_received",
  /** Both sides may send. */
  Established = "established",
  /** We sent FIN; the peer may still send. */
  LocalClose = "local_close",
  /** The peer sent FIN; we may still send. */
  RemoteClose = "remote_close",
  /** Both sides sent FIN. */
  Closed = "closed",
  /** Reset by either side; all buffered data discarded. */
  Reset = "reset",
}

/** What moves a stream between states. */
export type StreamEvent =
  | "send_syn"
  | "recv_syn"
  | "send_ack"
  | "recv_ack"
  | "send_fin"
  | "recv_fin"
  | "reset";

const S = StreamState;

/** `STREAM_TRANSITIONS[state][event]` is the next state; missing means the event is ignored there. */
export const STREAM_TRANSITIONS: Readonly<
  Record<StreamState, Partial<Record<StreamEvent, StreamState>>>
> = {
  [S.Init]: { send_syn: S.SynSent, recv_syn: S.SynReceived, reset: S.Reset },
  [S.SynSent]: {
    recv_ack: S.Established,
    send_fin: S.LocalClose,
    recv_fin: S.RemoteClose,
    reset: S.Reset,
  },
  [S.SynReceived]: {
    send_ack: S.Established,
    send_fin: S.LocalClose,
    recv_fin: S.RemoteClose,
    reset: S.Reset,
  },
  [S.Established]: { send_fin: S.LocalClose, recv_fin: S.RemoteClose, reset: S.Reset },
  [S.LocalClose]: {
    recv_ack: S.LocalClose,
    send_ack: S.LocalClose,
    recv_fin: S.Closed,
    reset: S.Reset,
  },
  [S.RemoteClose]: {
    recv_ack: S.RemoteClose,
    send_ack: S.RemoteClose,
    send_fin: S.Closed,
    reset: S.Reset,
  },
  [S.Closed]: {},
  [S.Reset]: {},
};

/** The state after `event`, or undefined when the event does not apply in `state`. */
export function nextStreamState(state: StreamState, event: StreamEvent): StreamState | undefined {
  return STREAM_TRANSITIONS[state][event];
}
