/**
 * Which route the next visitor or service user goes to, when several serve one port or name:
 *
 * - routes that are down (their client reports its local service unhealthy) take none;
 * - routes of this node come first (no relay hop), then routes on other nodes;
 * - among the candidates, `round_robin` takes them in turn, `least_connections` the one with the
 *   fewest connections in flight (ties in turn).
 *
 * @example
 * ```ts
 * import { chooseRoute } from "./route_choice.ts";
 * const routes = [
 *   { local: false, healthy: true, active: 0 },
 *   { local: true, healthy: false, active: 0 },
 *   { local: true, healthy: true, active: 3 },
 * ];
 * console.assert(chooseRoute(routes, "round_robin", 0) === routes[2]);
 * ```
 *
 * @module
 */

/** How connections are spread over the candidate routes. */
export type Balance = "round_robin" | "least_connections";

/** What the choice looks at. */
export interface RouteCandidate {
  /** True for a session of this node; false for a route on another node (a relay hop). */
  readonly local: boolean;
  /** False while the route's local service fails its health check. */
  readonly healthy: boolean;
  /** Connections in flight on this route now. */
  readonly active: number;
}

/**
 * The route to use, or undefined when none can take a connection. `turn` is the caller's
 * counter (incremented per choice), so that routes are taken in turn.
 */
export function chooseRoute<R extends RouteCandidate>(
  routes: readonly R[],
  balance: Balance,
  turn: number,
): R | undefined {
  const up = routes.filter((r) => r.healthy);
  const local = up.filter((r) => r.local);
  const candidates = local.length > 0 ? local : up;
  if (candidates.length === 0) return undefined;
  const start = turn % candidates.length;
  if (balance === "round_robin") return candidates[start];
  let best = candidates[start];
  for (let i = 1; i < candidates.length; i++) {
    const route = candidates[(start + i) % candidates.length];
    if (route.active < best.active) best = route;
  }
  return best;
}
