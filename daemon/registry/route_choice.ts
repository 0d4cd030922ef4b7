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
  // Every visitor comes through here: counted and indexed in place, no array built per choice.
  let up = 0;
  let local = 0;
  // Indexed, not for-of: an iterator and its results per visitor until the code is optimized.
  for (let i = 0; i < routes.length; i++) {
    const route = routes[i];
    if (!route.healthy) continue;
    up++;
    if (route.local) local++;
  }
  const onlyLocal = local > 0;
  const count = onlyLocal ? local : up;
  if (count === 0) return undefined;
  const start = turn % count;
  // One pass: the candidate at `start` for round robin; for least connections the fewest in
  // flight, a tie going to the one that comes first counting from `start`.
  let best: R | undefined;
  let bestDistance = 0;
  let k = 0;
  for (let i = 0; i < routes.length; i++) {
    const route = routes[i];
    if (!route.healthy || (onlyLocal && !route.local)) continue;
    const distance = (k++ - start + count) % count;
    if (balance === "round_robin") {
      if (distance === 0) return route;
      continue;
    }
    if (
      best === undefined || route.active < best.active ||
      (route.active === best.active && distance < bestDistance)
    ) {
      best = route;
      bestDistance = distance;
    }
  }
  return best;
}
