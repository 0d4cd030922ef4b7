/**
 * One public port of this node and the routes that serve it. A reverse tunnel's port may be
 * served by several routes: the sessions of a client that keeps sessions to several nodes, the
 * members of a group, and, in a cluster, the routes held on other nodes (reached over relay
 * sessions). The port is bound once; each visitor goes to one route, chosen when it arrives by
 * {@linkcode chooseRoute} (healthy routes only, this node's first, then by the balance). A
 * visitor that no route can take is closed at once.
 *
 * @module
 */

import type { AddressRules } from "../../tunnel/policy/visitor_policy.ts";
import { fromTrustedFront, readProxyHeader } from "./proxy_front.ts";
import type { Transport, TransportListener } from "../../protocol/transport.ts";
import { listenTcp } from "../../transport/tcp.ts";
import type { Logger } from "../../util/log.ts";
import { type Balance, chooseRoute, type RouteCandidate } from "../registry/route_choice.ts";

export type { Balance };

/** One way to a client that serves the port. */
export interface Route extends RouteCandidate {
  /** The route's tunnel id (unique in its node). */
  readonly id: string;
  /** Takes a visitor. */
  visitor(visitor: Transport): void;
}

/**
 * Which visitor connections come through a trusted front (`trustedProxies`), whose PROXY header
 * names the visitor, and how long to wait for that header; read at each connection (a reload
 * applies to the next one).
 */
export type Front = () => { trusted: AddressRules | undefined; timeoutMs: number };

/** A bound public port. Create with {@linkcode PortListener.bind}. */
export class PortListener {
  /** The bound address. */
  readonly bindHost: string;
  /** The bound port. */
  readonly port: number;
  /** How visitors are spread. */
  balance: Balance = "round_robin";
  readonly #routes: Route[] = [];
  readonly #log: Logger;
  readonly #front: Front | undefined;
  #listener: TransportListener | undefined;
  #next = 0;
  #accepting = true;

  private constructor(bindHost: string, port: number, log: Logger, front: Front | undefined) {
    this.bindHost = bindHost;
    this.port = port;
    this.#log = log;
    this.#front = front;
  }

  /**
   * Binds `bindHost:port` (port 0 picks one); `front`: see {@linkcode Front}. Rejects if it
   * cannot be bound.
   */
  static async bind(
    bindHost: string,
    port: number,
    log: Logger,
    front?: Front,
  ): Promise<PortListener> {
    // A visitor may arrive before the object exists (it needs the bound port): hold it.
    const early: { listener?: PortListener; pending: Transport[] } = { pending: [] };
    const bound = await listenTcp({ hostname: bindHost, port }, (t) => {
      if (early.listener) early.listener.#visitor(t);
      else early.pending.push(t);
    });
    const listener = new PortListener(
      bindHost,
      bound.port,
      log.child({ port: bound.port }),
      front,
    );
    listener.#listener = bound;
    early.listener = listener;
    for (const t of early.pending) listener.#visitor(t);
    return listener;
  }

  /** The routes, in the order they came. */
  get routes(): readonly Route[] {
    return this.#routes;
  }

  /** Adds a route. */
  attach(route: Route): void {
    if (!this.#routes.includes(route)) this.#routes.push(route);
  }

  /** Removes a route; returns how many are left. */
  detach(route: Route): number {
    const at = this.#routes.indexOf(route);
    if (at >= 0) this.#routes.splice(at, 1);
    return this.#routes.length;
  }

  /** Stops accepting visitors (a drain); those connected go on. */
  stopAccepting(): void {
    void this.close();
  }

  /**
   * Stops listening; resolves once the port can be bound again (on Deno a turn after the close).
   * Idempotent.
   */
  close(): Promise<void> {
    this.#accepting = false;
    return this.#listener?.close() ?? Promise.resolve();
  }

  /** The route the next visitor goes to, or undefined when none can take it. */
  choose(): Route | undefined {
    return chooseRoute(this.#routes, this.balance, this.#next++);
  }

  #visitor(visitor: Transport): void {
    if (!this.#accepting) return visitor.close();
    const front = this.#front?.();
    if (front && fromTrustedFront(visitor, front.trusted)) {
      void readProxyHeader(visitor, front.timeoutMs).then((read) => {
        if (read.ok) return this.#route(read.visitor);
        this.#log.warn("a trusted front's connection closed", {
          front: visitor.remoteAddress,
          detail: read.reason,
        });
      });
      return;
    }
    this.#route(visitor);
  }

  #route(visitor: Transport): void {
    if (!this.#accepting) return visitor.close();
    const route = this.choose();
    if (!route) {
      this.#log.warn("visitor refused: no route is up", { visitor: visitor.remoteAddress });
      return visitor.close();
    }
    route.visitor(visitor);
  }
}
