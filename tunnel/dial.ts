/**
 * Dialing a TCP target with a deadline, and telling apart why a dial failed so the reason can be
 * sent back to whoever asked (as a reset reason) and counted.
 *
 * @module
 */

import { connectTcp } from "../transport/tcp.ts";
import type { Transport } from "../protocol/transport.ts";
import { ResetReason } from "./stream/reset_reasons.ts";
import { sharedDeadlines } from "../util/timing/deadlines.ts";

/** Why a dial failed. */
export type DialFailure = "refused" | "timeout" | "unreachable" | "failed";

/** A dial that did not produce a connection. */
export class DialError extends Error {
  /** Why. */
  readonly reason: DialFailure;

  /** Creates the error. */
  constructor(reason: DialFailure, message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = "DialError";
    this.reason = reason;
  }
}

/** Why a dial that threw `error` failed: a {@linkcode DialError}'s reason, anything else `failed`. */
export function dialFailureOf(error: unknown): DialFailure {
  return error instanceof DialError ? error.reason : "failed";
}

const DIAL_RESET = {
  refused: ResetReason.DialRefused,
  timeout: ResetReason.DialTimeout,
  unreachable: ResetReason.NetworkUnreachable,
  failed: ResetReason.DialFailed,
} as const satisfies Record<DialFailure, ResetReason>;

/**
 * The reset reason that tells a stream's opener why its target could not be dialed: refused,
 * timed out, its network unreachable, or `DialFailed` for anything else (a host unreachable, a
 * name not found, not a DialError).
 *
 * @example
 * ```ts
 * import { DialError, resetReasonForDial } from "./dial.ts";
 * import { ResetReason } from "./stream/reset_reasons.ts";
 * console.assert(resetReasonForDial(new DialError("refused", "no")) === ResetReason.DialRefused);
 * ```
 */
export function resetReasonForDial(error: unknown): ResetReason {
  return DIAL_RESET[dialFailureOf(error)];
}

/**
 * Connects to `hostname:port` or fails with a {@linkcode DialError} within `timeoutMs`. A connection
 * that completes after the deadline is closed, never leaked. `connect` is replaceable for tests.
 *
 * @example
 * ```ts ignore
 * const socket = await dialTcp("127.0.0.1", 5432, 10_000);
 * ```
 */
export function dialTcp(
  hostname: string,
  port: number,
  timeoutMs: number,
  connect: typeof connectTcp = connectTcp,
): Promise<Transport> {
  return new Promise((resolve, reject) =>
    dialTcpThen(hostname, port, timeoutMs, (error, transport) => {
      if (error) reject(error);
      else resolve(transport!);
    }, connect)
  );
}

/**
 * {@linkcode dialTcp} with a callback, called once with the connection or the
 * {@linkcode DialError}: what a visitor's path uses, where a promise of our own around the
 * runtime's is work for nothing.
 */
export function dialTcpThen(
  hostname: string,
  port: number,
  timeoutMs: number,
  done: (error: DialError | undefined, transport?: Transport) => void,
  connect: typeof connectTcp = connectTcp,
): void {
  let settled = false;
  const deadline = sharedDeadlines.add(timeoutMs, () => {
    settled = true;
    done(new DialError("timeout", `${hostname}:${port} did not answer within ${timeoutMs} ms`));
  });
  let connecting: Promise<Transport>;
  try {
    connecting = connect({ hostname, port });
  } catch (error) {
    // Reported as a failed connect, as from inside a promise.
    connecting = Promise.reject(error);
  }
  connecting.then(
    (transport) => {
      deadline.cancel();
      if (settled) return transport.close();
      settled = true;
      done(undefined, transport);
    },
    (error: Error & { code?: string }) => {
      deadline.cancel();
      if (settled) return;
      settled = true;
      // Deno names the error class, Node and Bun set an errno code.
      const refused = error.name === "ConnectionRefused" || error.code === "ECONNREFUSED";
      const unreachable = error.name === "NetworkUnreachable" || error.code === "ENETUNREACH";
      // The runtime's own message repeats the address (Node: "connect ECONNREFUSED host:port").
      const message = refused
        ? `${hostname}:${port} refused the connection`
        : `${hostname}:${port}: ${error.message}`;
      const reason = refused ? "refused" : unreachable ? "unreachable" : "failed";
      done(new DialError(reason, message, { cause: error }));
    },
  );
}
