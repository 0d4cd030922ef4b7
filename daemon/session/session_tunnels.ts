/**
 * A client session's reverse tunnels, port tunnels and tunnels by host name alike: the session's
 * table of them, the registry records they are claimed under, and taking one down, which releases
 * its port or name and tells the daemon's feed with the tunnel's final counts.
 *
 * @module
 */

import type { Logger } from "../../util/log.ts";
import type { DaemonEventType } from "../events.ts";
import type { HostClaim, PortClaim, Registry } from "../registry/registry.ts";
import type { ReverseTunnel } from "../tunnels/reverse_tunnel.ts";
import type { TunnelPorts } from "../tunnels/tunnel_ports.ts";
import type { UdpCounters } from "../../tunnel/udp/udp_flow.ts";

/** A UDP tunnel's final counts, as its `tunnel_down` event carries them. */
function udpFields(udp: Readonly<UdpCounters>): Record<string, string | number> {
  const dropped = Object.values(udp.drops).reduce((a, b) => a + b, 0);
  return {
    protocol: "udp",
    datagramsFromVisitors: udp.datagramsIn,
    datagramsToVisitors: udp.datagramsOut,
    datagramsDropped: dropped,
  };
}

/** What a session's tunnel table needs from the session and the daemon. */
export interface SessionTunnelsContext {
  /** The session's id, written into every claim. */
  readonly sessionId: string;
  /** Where tunnels are listed and their ports and names claimed (read at each use). */
  readonly registry: Registry;
  /** This node's port listeners: a port tunnel leaves its listener when it goes down. */
  readonly ports: Pick<TunnelPorts, "detach">;
  /** The session's logger (read at each use: the session names its client once it is known). */
  readonly log: Logger;
  /** Publishes an event to the daemon's feed. */
  publish(type: DaemonEventType, fields: Record<string, string | number | undefined>): void;
}

/** One session's reverse tunnels, by id. */
export class SessionTunnels {
  readonly #context: SessionTunnelsContext;
  readonly #tunnels = new Map<string, ReverseTunnel>();

  /** No tunnels yet. */
  constructor(context: SessionTunnelsContext) {
    this.#context = context;
  }

  /** How many tunnels the session holds. */
  get size(): number {
    return this.#tunnels.size;
  }

  /** The session's tunnel `id`, if it holds one. */
  get(id: string): ReverseTunnel | undefined {
    return this.#tunnels.get(id);
  }

  /** Ids of the session's tunnels, oldest first. */
  ids(): string[] {
    return [...this.#tunnels.keys()];
  }

  /**
   * Adds `tunnel`, whose port or name is already claimed, here and to the registry, and tells
   * the log and the daemon's feed that it is up at `bind` (as the client's reply shows it).
   */
  add(tunnel: ReverseTunnel, bind: string): void {
    const { sessionId, log, publish } = this.#context;
    this.#tunnels.set(tunnel.id, tunnel);
    this.#context.registry.addTunnel(tunnel, sessionId);
    // Rules changed in place go into the tunnel's cluster record, for the other nodes' routes.
    tunnel.onPolicy = () => {
      const { registry } = this.#context;
      const written = tunnel.host !== undefined
        ? registry.updateHost?.(this.hostClaim(tunnel))
        : registry.updatePort?.(this.portClaim(tunnel));
      written?.catch(() => {});
    };
    log.info("tunnel up", { tunnel: tunnel.id, bind });
    publish("tunnel_up", {
      tunnel: tunnel.id,
      client: tunnel.client,
      session: sessionId,
      bind,
      ...(tunnel.protocol ? { protocol: tunnel.protocol } : {}),
    });
  }

  /**
   * Takes `tunnel` down: closed, forgotten here and by the registry, its port (or name) released,
   * `tunnel_down` published. The promise settles once the release is done (it never rejects).
   */
  remove(tunnel: ReverseTunnel): Promise<void> {
    const { registry, log } = this.#context;
    tunnel.close();
    this.#tunnels.delete(tunnel.id);
    registry.removeTunnel(tunnel.id);
    let released: Promise<void>;
    if (tunnel.host !== undefined) {
      released = registry.releaseHost(this.hostClaim(tunnel), tunnel);
    } else {
      this.#context.ports.detach(tunnel);
      released = registry.releasePort(this.portClaim(tunnel));
    }
    log.info("tunnel down", { tunnel: tunnel.id });
    // The final counts go with the event: the tunnel leaves the daemon's tables right after.
    this.#context.publish("tunnel_down", {
      tunnel: tunnel.id,
      client: tunnel.client,
      session: this.#context.sessionId,
      connections: tunnel.stats.connections,
      bytesToClient: tunnel.stats.aToB,
      bytesToVisitor: tunnel.stats.bToA,
      errors: tunnel.stats.errors,
      ...(tunnel.udp ? udpFields(tunnel.udp) : {}),
    });
    return released.catch(() => {});
  }

  /** Takes every tunnel down (the session ended), without waiting for the releases. */
  removeAll(): void {
    for (const tunnel of [...this.#tunnels.values()]) void this.remove(tunnel);
  }

  /** The registry's record of `tunnel`'s host name, as claimed for it by this session. */
  hostClaim(tunnel: ReverseTunnel): HostClaim {
    return {
      host: tunnel.host!,
      passthrough: tunnel.passthrough,
      ...(tunnel.httpPolicy ? { http: tunnel.httpPolicy } : {}),
      ...(tunnel.httpPolicy?.pathPrefix ? { pathPrefix: tunnel.httpPolicy.pathPrefix } : {}),
      tunnel: tunnel.id,
      session: this.#context.sessionId,
      client: tunnel.client,
      node: this.#context.registry.node,
      ...(Object.keys(tunnel.policy).length > 0 ? { policy: tunnel.policy } : {}),
    };
  }

  /** The registry's record of `tunnel`'s port, as claimed for it by this session. */
  portClaim(tunnel: ReverseTunnel): PortClaim {
    return {
      bindHost: tunnel.bindHost,
      port: tunnel.port,
      tunnel: tunnel.id,
      session: this.#context.sessionId,
      client: tunnel.client,
      node: this.#context.registry.node,
      ...(tunnel.protocol ? { protocol: tunnel.protocol } : {}),
      ...(Object.keys(tunnel.policy).length > 0 ? { policy: tunnel.policy } : {}),
    };
  }
}
