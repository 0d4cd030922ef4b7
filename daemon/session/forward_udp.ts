/**
 * UDP forward streams (`udpForward` header): a client's flow of datagrams to `host:port`. The
 * target is checked against the client's `forward` allowlist exactly as a TCP forward's is (the
 * same rules: a UDP forward is a forward), resolved, and every datagram goes to the address that
 * was checked. Refusals are a reset with the same reason codes as TCP forwards.
 *
 * @module
 */

import type { Stream } from "../../protocol/stream.ts";
import { ResetReason } from "../../tunnel/stream/reset_reasons.ts";
import { serveUdpFlow, type UdpCounters } from "../../tunnel/udp/udp_flow.ts";
import { resolveTarget } from "../policy/resolve.ts";
import { unbracketHost } from "../../util/net/address.ts";
import { type ForwardContext, resetReasonForDenial } from "./forward.ts";

/** What a UDP forward needs: a forward's context, and the counters its flows add to. */
export interface UdpForwardContext extends Omit<ForwardContext, "dialTimeoutMs"> {
  /** Counters of all UDP forwards (flows, datagrams, bytes, drops). */
  counters?: UdpCounters;
  /** Idle time after which a flow closes (default `UDP_FLOW_IDLE_MS`). */
  idleMs?: number;
}

/**
 * Serves one UDP forward stream to `target` (`host:port` as the client wrote it); `rest` holds
 * datagrams that came with the header. Resolves true once the flow is served, false when refused.
 */
export async function serveUdpForward(
  stream: Stream,
  target: string,
  rest: Uint8Array,
  context: UdpForwardContext,
): Promise<boolean> {
  const log = context.log.child({ stream: stream.id, target, protocol: "udp" });
  const refuse = (reason: number, code: string, message: string): false => {
    log.info("forward refused", { reason: code, detail: message });
    context.count?.(code);
    stream.reset(reason);
    return false;
  };
  const split = /^(.*):(\d{1,5})$/.exec(target);
  const host = split ? unbracketHost(split[1]) : undefined;
  const port = Number(split?.[2]);
  if (!host || !(port >= 1 && port <= 65535)) {
    return refuse(ResetReason.BadHeader, "invalid_target", `"${target}" is not HOST:PORT`);
  }
  const resolved = await resolveTarget(host, port, context.policy, { lookup: context.lookup });
  if (!resolved.ok) {
    return refuse(resetReasonForDenial(resolved.code), resolved.code, resolved.message);
  }
  try {
    await serveUdpFlow(stream, {
      hostname: resolved.ip,
      port,
      rest,
      idleMs: context.idleMs,
      counters: context.counters,
    });
  } catch (error) {
    return refuse(ResetReason.DialFailed, "dial_failed", (error as Error).message);
  }
  log.debug("udp forward open", { ip: resolved.ip, rule: resolved.rule.text });
  return true;
}
