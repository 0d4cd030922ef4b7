import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { chooseRoute, type RouteCandidate } from "./route_choice.ts";

type Named = RouteCandidate & { name: string };

function route(name: string, fields: Partial<RouteCandidate> = {}): Named {
  return { name, local: true, healthy: true, active: 0, ...fields };
}

/** The names chosen for turns 0 to `turns - 1`. */
function picks(routes: Named[], balance: "round_robin" | "least_connections", turns: number) {
  return Array.from({ length: turns }, (_, turn) => chooseRoute(routes, balance, turn)?.name);
}

describe("chooseRoute", () => {
  it("takes no route when there is none, or none is healthy", () => {
    assert.equal(chooseRoute([], "round_robin", 0), undefined);
    const down = [route("a", { healthy: false }), route("b", { healthy: false, local: false })];
    assert.equal(chooseRoute(down, "round_robin", 0), undefined);
    assert.equal(chooseRoute(down, "least_connections", 3), undefined);
  });

  it("takes the healthy routes in turn, round robin, skipping the unhealthy", () => {
    // However busy each is: round robin does not look at connections in flight.
    const routes = [
      route("a", { active: 9 }),
      route("sick", { healthy: false }),
      route("b"),
      route("c", { active: 4 }),
    ];
    assert.deepEqual(picks(routes, "round_robin", 6), ["a", "b", "c", "a", "b", "c"]);
  });

  it("prefers this node's healthy routes, and takes other nodes' only when none is up", () => {
    const remote = route("remote", { local: false });
    const local = route("local", { active: 50 });
    assert.deepEqual(picks([remote, local], "round_robin", 3), ["local", "local", "local"]);
    assert.deepEqual(picks([remote, local], "least_connections", 2), ["local", "local"]);
    const sickLocal = route("local", { healthy: false });
    assert.deepEqual(picks([remote, sickLocal], "round_robin", 2), ["remote", "remote"]);
  });

  it("takes the route with the fewest connections in flight, least_connections", () => {
    const routes = [
      route("busy", { active: 7 }),
      route("idle", { active: 1 }),
      route("mid", { active: 3 }),
    ];
    assert.deepEqual(picks(routes, "least_connections", 3), ["idle", "idle", "idle"]);
  });

  it("breaks least_connections ties in turn", () => {
    const routes = [
      route("a", { active: 1 }),
      route("b", { active: 1 }),
      route("c", { active: 5 }),
    ];
    // From the turn's place in the list on, the first of the fewest.
    assert.deepEqual(picks(routes, "least_connections", 3), ["a", "b", "a"]);
  });
});
