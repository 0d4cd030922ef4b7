/**
 * The public ports this node listens on for reverse tunnels, one {@linkcode PortListener} per
 * TCP `bindHost:port` and one {@linkcode UdpPort} per UDP one, whatever number of routes serve
 * it. A port is bound when its first route comes (a session's tunnel, or, in a cluster, a relay
 * to a tunnel held on another node) and closed when its last route goes.
 *
 * @module
 */

import type { Front } from "./port_listener.ts";
import type { Logger } from "../../util/log.ts";
import { formatHostPort } from "../../util/net/address.ts";
import { type Balance, PortListener, type Route } from "./port_listener.ts";
import { UdpPort, type UdpRoute } from "./udp_port.ts";

/** A bound port of either protocol. */
type Bound = PortListener | UdpPort;

/** The node's port listeners. */
export class TunnelPorts {
  readonly #listeners = new Map<string, PortListener>();
  readonly #binding = new Map<string, Promise<PortListener>>();
  /** Listeners closed with their last route, until their port can be bound again. */
  readonly #closing = new Map<string, Promise<void>>();
  readonly #routes = new Map<Route | UdpRoute, Bound>();
  /** UDP ports, by `bindHost:port`, and those being bound. */
  readonly #udp = new Map<string, UdpPort>();
  readonly #udpBinding = new Map<string, Promise<UdpPort>>();
  readonly #log: Logger;
  readonly #front: Front | undefined;
  #accepting = true;

  /** No ports yet; `front` says which connections come through a trusted front (PROXY header). */
  constructor(log: Logger, front?: Front) {
    this.#log = log;
    this.#front = front;
  }

  /**
   * The listener of `bindHost:port`, bound now if it is not (port 0 binds a free one). Rejects if
   * the port cannot be bound.
   */
  async open(bindHost: string, port: number, balance?: Balance): Promise<PortListener> {
    const key = formatHostPort(bindHost, port);
    const existing = port !== 0 ? this.#listeners.get(key) : undefined;
    if (existing) return existing;
    const binding = port !== 0 ? this.#binding.get(key) : undefined;
    if (binding) return await binding;
    // A route that replaces the port's last one (its owner went, another claimed it) binds the
    // port again at once: wait until the old listener has let go of it.
    const closing = port !== 0 ? this.#closing.get(key) : undefined;
    const bound = closing
      ? closing.then(() => PortListener.bind(bindHost, port, this.#log, this.#front))
      : PortListener.bind(bindHost, port, this.#log, this.#front);
    if (port !== 0) this.#binding.set(key, bound);
    try {
      const listener = await bound;
      if (balance) listener.balance = balance;
      this.#listeners.set(formatHostPort(bindHost, listener.port), listener);
      if (!this.#accepting) listener.stopAccepting();
      return listener;
    } finally {
      this.#binding.delete(key);
    }
  }

  /**
   * The UDP port `bindHost:port`, bound now if it is not (port 0 binds a free one), with the
   * flows' idle time and the balance its first route brings. Rejects if it cannot be bound.
   */
  async openUdp(
    bindHost: string,
    port: number,
    options: { idleMs?: number; balance?: Balance } = {},
  ): Promise<UdpPort> {
    const key = formatHostPort(bindHost, port);
    const existing = port !== 0 ? this.#udp.get(key) : undefined;
    if (existing) return existing;
    const binding = port !== 0 ? this.#udpBinding.get(key) : undefined;
    if (binding) return await binding;
    const closing = port !== 0 ? this.#closing.get(`udp/${key}`) : undefined;
    const open = () => UdpPort.open({ bindHost, port, ...options });
    const bound = closing ? closing.then(open) : open();
    if (port !== 0) this.#udpBinding.set(key, bound);
    try {
      const udp = await bound;
      this.#udp.set(formatHostPort(bindHost, udp.port), udp);
      if (!this.#accepting) udp.stopAccepting();
      return udp;
    } finally {
      this.#udpBinding.delete(key);
    }
  }

  /** Puts `route` on `listener` (a TCP route) or on `port` (a UDP route). */
  attach(listener: PortListener, route: Route): void;
  attach(port: UdpPort, route: UdpRoute): void;
  attach(bound: Bound, route: Route | UdpRoute): void {
    if (bound instanceof UdpPort) bound.attach(route as UdpRoute);
    else bound.attach(route as Route);
    this.#routes.set(route, bound);
  }

  /** Takes `route` off its port, closing the port when it was the last route. */
  detach(route: Route | UdpRoute): void {
    const listener = this.#routes.get(route);
    if (!listener) return;
    this.#routes.delete(route);
    const left = listener instanceof UdpPort
      ? listener.detach(route as UdpRoute)
      : listener.detach(route as Route);
    if (left > 0) return;
    let key = formatHostPort(listener.bindHost, listener.port);
    if (listener instanceof UdpPort) {
      if (this.#udp.get(key) === listener) this.#udp.delete(key);
      key = `udp/${key}`;
    } else if (this.#listeners.get(key) === listener) this.#listeners.delete(key);
    const closed = listener.close();
    this.#closing.set(key, closed);
    const settled = () => {
      if (this.#closing.get(key) === closed) this.#closing.delete(key);
    };
    closed.then(settled, settled);
  }

  /** The listener of `bindHost:port`, if bound. */
  listener(bindHost: string, port: number): PortListener | undefined {
    return this.#listeners.get(formatHostPort(bindHost, port));
  }

  /** Every bound listener. */
  listeners(): PortListener[] {
    return [...this.#listeners.values()];
  }

  /** The UDP port `bindHost:port`, if bound. */
  udpPort(bindHost: string, port: number): UdpPort | undefined {
    return this.#udp.get(formatHostPort(bindHost, port));
  }

  /** Stops accepting visitors on every port (a drain); connected visitors go on. */
  stopAccepting(): void {
    this.#accepting = false;
    for (const listener of this.#listeners.values()) listener.stopAccepting();
    for (const udp of this.#udp.values()) udp.stopAccepting();
  }
}
