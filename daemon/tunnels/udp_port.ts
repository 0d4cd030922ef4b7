/**
 * One public UDP port of this node and the routes that serve it (docs/design/udp.md): the
 * members of a group, the sessions of a client with several, and, in a cluster, relays to routes
 * on other nodes. The port is one socket; each new flow (a visitor address) goes to one route,
 * chosen as a new TCP visitor's is ({@linkcode chooseRoute}: healthy routes only, this node's
 * first, then by the balance), and stays on it for its life, so a visitor's datagrams keep
 * reaching one backend. The route admits the flow by its own rules and limits and counts it.
 *
 * @module
 */

import type { UdpCounters, UdpFlowWay } from "../../tunnel/udp/udp_flow.ts";
import { UdpFlowTable } from "../../tunnel/udp/udp_flow.ts";
import { type Balance, chooseRoute, type RouteCandidate } from "../registry/route_choice.ts";

/** One way to a client that serves a UDP port. */
export interface UdpRoute extends RouteCandidate {
  /** The route's tunnel id (unique in its node). */
  readonly id: string;
  /** Its flows, datagrams and drops (live). */
  readonly udp: UdpCounters;
  /**
   * A new flow of `remote` given to this route: its way, or undefined when the route refuses it
   * (the route counts the drop).
   */
  flow(remote: string): UdpFlowWay | undefined;
}

/** How to bind a {@linkcode UdpPort}. */
export interface UdpPortOptions {
  /** Address to bind. */
  bindHost: string;
  /** Port to bind (0: any free one). */
  port: number;
  /** A flow with no datagram either way for this long ends (default: the table's). */
  idleMs?: number;
  /** How new flows are spread over the routes (default `round_robin`). */
  balance?: Balance;
}

/** A bound UDP port. Create with {@linkcode UdpPort.open}. */
export class UdpPort {
  /** The bound address. */
  readonly bindHost: string;
  /** The bound port. */
  readonly port: number;
  /** How new flows are spread. */
  balance: Balance;
  readonly #routes: UdpRoute[] = [];
  #table: UdpFlowTable | undefined;
  #next = 0;
  #accepting = true;

  private constructor(bindHost: string, port: number, balance: Balance) {
    this.bindHost = bindHost;
    this.port = port;
    this.balance = balance;
  }

  /** Binds UDP `bindHost:port`; rejects when it cannot be bound (in use, not an address here). */
  static async open(options: UdpPortOptions): Promise<UdpPort> {
    // Datagrams may come before the object exists (it needs the bound port): no route yet.
    const ref: { port?: UdpPort } = {};
    const table = await UdpFlowTable.open({
      hostname: options.bindHost,
      port: options.port,
      idleMs: options.idleMs,
      // Each route keeps its own flow limit; all of them together bound the table.
      maxFlows: Number.MAX_SAFE_INTEGER,
      route: (remote) => ref.port ? ref.port.#route(remote) : undefined,
    });
    const port = new UdpPort(
      options.bindHost,
      table.local.port,
      options.balance ?? "round_robin",
    );
    port.#table = table;
    ref.port = port;
    return port;
  }

  /** The routes, in the order they came. */
  get routes(): readonly UdpRoute[] {
    return this.#routes;
  }

  /** The visitor addresses with a flow now. */
  get flows(): string[] {
    return this.#table?.flows ?? [];
  }

  /** Adds a route. */
  attach(route: UdpRoute): void {
    if (!this.#routes.includes(route)) this.#routes.push(route);
  }

  /** Removes a route (its flows are its own to end); returns how many are left. */
  detach(route: UdpRoute): number {
    const at = this.#routes.indexOf(route);
    if (at >= 0) this.#routes.splice(at, 1);
    return this.#routes.length;
  }

  /** Takes no new flow (a drain); open ones go on until they end. */
  stopAccepting(): void {
    this.#accepting = false;
  }

  /** Ends every flow and releases the port; resolves once it is free. Idempotent. */
  close(): Promise<void> {
    this.#accepting = false;
    this.#table?.close();
    // Deno lets go of a closed socket's port a turn later.
    return new Promise((resolve) => setTimeout(resolve, 0));
  }

  /** The route a new flow goes to, or undefined when none can take it. */
  choose(): UdpRoute | undefined {
    return chooseRoute(this.#routes, this.balance, this.#next++);
  }

  #route(remote: string): UdpFlowWay | undefined {
    const route = this.#accepting ? this.choose() : undefined;
    if (route) return route.flow(remote);
    // No route can take it (draining, or none is up): refused, counted by the port's first
    // route, so that a port with a single route counts its drops as before.
    const first = this.#routes[0];
    if (first) first.udp.drops.refused++;
    return undefined;
  }
}
