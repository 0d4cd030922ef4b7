import { describe, it } from "node:test";
import assert from "node:assert/strict";
import fc from "fast-check";
import { type Balance, chooseRoute, type RouteCandidate } from "./route_choice.ts";

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

/** The choice as the rules state it, with the candidates listed first. */
function byDefinition(routes: Named[], balance: Balance, turn: number): Named | undefined {
  const up = routes.filter((r) => r.healthy);
  const local = up.filter((r) => r.local);
  const candidates = local.length > 0 ? local : up;
  if (candidates.length === 0) return undefined;
  const start = turn % candidates.length;
  if (balance === "round_robin") return candidates[start];
  let best = candidates[start];
  for (let i = 1; i < candidates.length; i++) {
    const next = candidates[(start + i) % candidates.length];
    if (next.active < best.active) best = next;
  }
  return best;
}

describe("chooseRoute against the rules as stated", () => {
  it("picks what listing the candidates first would, for any routes and turn", () => {
    const candidate = fc.record({
      local: fc.boolean(),
      healthy: fc.boolean(),
      active: fc.integer({ min: 0, max: 3 }),
    });
    fc.assert(
      fc.property(
        fc.array(candidate, { maxLength: 9 }),
        fc.constantFrom<Balance>("round_robin", "least_connections"),
        fc.nat(1000),
        (fields, balance, turn) => {
          const routes = fields.map((f, i) => route(`r${i}`, f));
          assert.equal(chooseRoute(routes, balance, turn), byDefinition(routes, balance, turn));
        },
      ),
      { numRuns: 2000 },
    );
  });
});
