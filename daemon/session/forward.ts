/**
 * Forward streams: a client asks the daemon to connect it to `host:port`. The target must match
 * the client's allowlist, its name is resolved and every resolved address checked, and the daemon
 * dials exactly the address it checked, so DNS cannot change the answer in between. Refusals go
 * back as a reset with a reason code, and are logged. A stream that asked for it (`confirm`) gets
 * one byte, 0, once the target is connected: a SOCKS front answers its client only then.
 *
 * @module
 */

import type { Stream } from "../../protocol/stream.ts";
import { ResetReason } from "../../tunnel/stream/reset_reasons.ts";
import { dialFailureOf, dialTcp, resetReasonForDial } from "../../tunnel/dial.ts";
import { splice, type SpliceResult, streamEnd, transportEnd } from "../../tunnel/splice.ts";
import type { ClientPolicy, DenyCode } from "../policy/policy.ts";
import { type LookupFn, resolveTarget } from "../policy/resolve.ts";
import { unbracketHost } from "../../util/net/address.ts";
import type { Logger } from "../../util/log.ts";

/** What a forward needs from the daemon. */
export interface ForwardContext {
  /** The requesting client's current permissions (read at each open, so reloads apply). */
  policy: ClientPolicy;
  /** Dial deadline. */
  dialTimeoutMs: number;
  /** Logger with the session's context. */
  log: Logger;
  /** Name lookup, replaceable for tests. */
  lookup?: LookupFn;
  /** Counts refusals and dial failures by reason, for metrics. */
  count?: (reason: string) => void;
}

/** Which reset reason tells the client about a policy denial. */
export function resetReasonForDenial(code: DenyCode): number {
  switch (code) {
    case "loopback_denied":
      return ResetReason.LoopbackDenied;
    case "metadata_denied":
      return ResetReason.MetadataDenied;
    case "link_local_denied":
    case "multicast_denied":
    case "unspecified_denied":
    case "reserved_denied":
      return ResetReason.AddressDenied;
    case "resolve_failed":
      return ResetReason.ResolveFailed;
    default:
      return ResetReason.NotAllowed;
  }
}

/**
 * Serves one forward stream to `target` (`host:port` as the client wrote it). `rest` is payload that
 * arrived with the stream header; with `confirm`, the byte 0 goes back before the target's bytes.
 * Resolves when the stream is done.
 */
export async function serveForward(
  stream: Stream,
  target: string,
  rest: Uint8Array,
  context: ForwardContext,
  confirm = false,
): Promise<SpliceResult | undefined> {
  const log = context.log.child({ stream: stream.id, target });
  const split = /^(.*):(\d{1,5})$/.exec(target);
  const host = split ? unbracketHost(split[1]) : undefined;
  const port = Number(split?.[2]);
  if (!host || !(port >= 1 && port <= 65535)) {
    return refuse(
      stream,
      ResetReason.BadHeader,
      "invalid_target",
      `"${target}" is not HOST:PORT`,
      log,
      context,
    );
  }
  const resolved = await resolveTarget(host, port, context.policy, { lookup: context.lookup });
  if (!resolved.ok) {
    return refuse(
      stream,
      resetReasonForDenial(resolved.code),
      resolved.code,
      resolved.message,
      log,
      context,
    );
  }
  let socket;
  try {
    socket = await dialTcp(resolved.ip, port, context.dialTimeoutMs);
  } catch (error) {
    return refuse(
      stream,
      resetReasonForDial(error),
      `dial_${dialFailureOf(error)}`,
      (error as Error).message,
      log,
      context,
    );
  }
  log.debug("forward connected", { ip: resolved.ip, rule: resolved.rule.text });
  // A fresh byte each time: a written chunk is the stream's, which may frame it in place.
  if (confirm) stream.write(Uint8Array.of(0));
  return splice(streamEnd(stream), transportEnd(socket), { aFirst: rest });
}

function refuse(
  stream: Stream,
  resetReason: number,
  code: string,
  message: string,
  log: Logger,
  context: ForwardContext,
): undefined {
  // Info, not a warning: a policy doing its job (the session's logger names the client).
  log.info("forward refused", { reason: code, detail: message });
  context.count?.(code);
  stream.reset(resetReason);
  return undefined;
}
