/**
 * Why the tunnel layer reset a stream. The code travels in the RST frame's length field (see
 * `Stream.reset(code)`), so a refused forward or a failed local dial reaches the other side as a
 * reason, not just a closed stream. Codes are part of the wire format: never renumber them.
 *
 * @module
 */

/** Reset reason codes. */
export const ResetReason = {
  /** No reason given (a plain reset). */
  None: 0,
  /** The client is not allowed to do this (policy). */
  NotAllowed: 1,
  /** The target refused the connection. */
  DialRefused: 2,
  /** The target did not answer within the dial timeout. */
  DialTimeout: 3,
  /** Dialing failed for another reason (unreachable, reset, ...). */
  DialFailed: 4,
  /** The stream names a reverse tunnel that does not exist (any more). */
  UnknownTunnel: 5,
  /** The stream names a service nobody offers. */
  UnknownService: 6,
  /** A limit was reached (streams, tunnels, connections). */
  LimitReached: 7,
  /** The stream header was missing, malformed or of an unknown version or kind. */
  BadHeader: 8,
  /** The session has not completed its handshake. */
  NotAuthenticated: 9,
  /** The daemon is draining or stopping. */
  ShuttingDown: 10,
  /** The target resolves to a loopback address and the rule does not allow loopback. */
  LoopbackDenied: 11,
  /** The target is a cloud metadata address. */
  MetadataDenied: 12,
  /** The target is link-local, unspecified or multicast. */
  AddressDenied: 13,
  /** The target's name did not resolve. */
  ResolveFailed: 14,
  /** The connection sat idle past the idle timeout. */
  IdleTimeout: 15,
  /** The target's network could not be reached (no route to it). */
  NetworkUnreachable: 16,
} as const;

/** A reset reason code. */
export type ResetReason = typeof ResetReason[keyof typeof ResetReason];

const NAMES = new Map<number, string>(
  Object.entries(ResetReason).map(([name, code]) => [code, name]),
);

const TEXT: Record<number, string> = {
  [ResetReason.None]: "reset without a reason",
  [ResetReason.NotAllowed]: "not allowed for this client",
  [ResetReason.DialRefused]: "the target refused the connection",
  [ResetReason.DialTimeout]: "the target did not answer in time",
  [ResetReason.DialFailed]: "the target could not be reached",
  [ResetReason.UnknownTunnel]: "no such tunnel",
  [ResetReason.UnknownService]: "no such service",
  [ResetReason.LimitReached]: "a limit was reached",
  [ResetReason.BadHeader]: "bad stream header",
  [ResetReason.NotAuthenticated]: "the session is not authenticated",
  [ResetReason.ShuttingDown]: "the daemon is shutting down",
  [ResetReason.LoopbackDenied]: "loopback targets are not allowed",
  [ResetReason.MetadataDenied]: "cloud metadata addresses are not allowed",
  [ResetReason.AddressDenied]: "link-local, unspecified and multicast targets are not allowed",
  [ResetReason.ResolveFailed]: "the target name did not resolve",
  [ResetReason.IdleTimeout]: "idle for too long",
  [ResetReason.NetworkUnreachable]: "the target's network could not be reached",
};

/**
 * A short name and a sentence for a reset code, e.g. `DialRefused: the target refused the
 * connection`. Unknown codes (from a newer or foreign peer) are named by number.
 *
 * @example
 * ```ts
 * import { describeResetReason, ResetReason } from "./reset_reasons.ts";
 * console.assert(describeResetReason(ResetReason.DialTimeout).startsWith("DialTimeout"));
 * ```
 */
export function describeResetReason(code: number): string {
  const name = NAMES.get(code);
  return name === undefined ? `reason ${code}` : `${name}: ${TEXT[code]}`;
}
