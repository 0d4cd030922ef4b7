import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { PortListener, type Route } from "./port_listener.ts";
import { Logger } from "../../util/log.ts";

const log = new Logger({ level: "error", format: "json", sink: () => {} });

function route(id: string, fields: Partial<Route> = {}): Route {
  return { id, local: true, healthy: true, active: 0, visitor: () => {}, ...fields };
}

describe("PortListener.choose", () => {
  it("takes the routes in turn (round robin)", async () => {
    const listener = await PortListener.bind("127.0.0.1", 0, log);
    try {
      listener.attach(route("a"));
      listener.attach(route("b"));
      const picks = Array.from({ length: 4 }, () => listener.choose()?.id);
      assert.deepEqual(picks.sort(), ["a", "a", "b", "b"]);
    } finally {
      listener.close();
    }
  });

  it("prefers routes of this node, and uses other nodes' when none is local", async () => {
    const listener = await PortListener.bind("127.0.0.1", 0, log);
    try {
      const remote = route("remote", { local: false });
      listener.attach(remote);
      listener.attach(route("local"));
      assert.deepEqual([listener.choose()?.id, listener.choose()?.id], ["local", "local"]);
      listener.detach(listener.routes.find((r) => r.id === "local")!);
      assert.equal(listener.choose()?.id, "remote");
    } finally {
      listener.close();
    }
  });

  it("skips unhealthy routes, and takes none when no route is up", async () => {
    const listener = await PortListener.bind("127.0.0.1", 0, log);
    try {
      const sick = { ...route("sick"), healthy: false };
      listener.attach(sick);
      assert.equal(listener.choose(), undefined);
      listener.attach(route("well"));
      assert.deepEqual([listener.choose()?.id, listener.choose()?.id], ["well", "well"]);
    } finally {
      listener.close();
    }
  });

  it("least_connections takes the route with the fewest visitors in flight", async () => {
    const listener = await PortListener.bind("127.0.0.1", 0, log);
    try {
      listener.balance = "least_connections";
      listener.attach(route("busy", { active: 5 }));
      listener.attach(route("idle", { active: 1 }));
      assert.deepEqual([listener.choose()?.id, listener.choose()?.id], ["idle", "idle"]);
    } finally {
      listener.close();
    }
  });
});
