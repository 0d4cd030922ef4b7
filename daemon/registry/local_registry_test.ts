import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { Session } from "../../protocol/session.ts";
import { memoryPair } from "../../transport/memory.ts";
import type { ReverseTunnel } from "../tunnels/reverse_tunnel.ts";
import { serviceOffer } from "../session/services.ts";
import type { TokenRegistry } from "../tokens/store.ts";
import { LocalRegistry } from "./local_registry.ts";
import type { PortClaim, RegistryChange, SessionHandle } from "./registry.ts";
import { fakeSession, fakeTunnel } from "./_fake_handles.ts";

/** The registry does not look into tokens; a stand-in that is never called. */
const NO_TOKENS = {} as TokenRegistry;

function registry(): LocalRegistry {
  return new LocalRegistry({ node: "n1", tokens: NO_TOKENS });
}

function claim(port: number, tunnel: string, session = "s1"): PortClaim {
  return { bindHost: "127.0.0.1", port, tunnel, session, client: "c", node: "n1" };
}

function session(id: string): SessionHandle {
  return { id, client: "c", state: "ready" } as SessionHandle;
}

function tunnel(id: string, createdAt: number): ReverseTunnel {
  return { id, client: "c", createdAt } as ReverseTunnel;
}

describe("LocalRegistry: ports", () => {
  it("gives a port to exactly one of many concurrent claims", async () => {
    const r = registry();
    const results = await Promise.all(
      Array.from({ length: 20 }, (_, i) => r.claimPort(claim(9000, `t${i}`))),
    );
    assert.equal(results.filter((x) => x.ok).length, 1);
    const winner = results.findIndex((x) => x.ok);
    for (const result of results) {
      if (!result.ok) {
        assert.equal(result.reason, "taken");
        assert.equal(result.holder?.tunnel, `t${winner}`);
      }
    }
    assert.equal((await r.portHolder("127.0.0.1", 9000))?.tunnel, `t${winner}`);
  });

  it("keeps ports apart by address", async () => {
    const r = registry();
    assert.ok((await r.claimPort(claim(9000, "a"))).ok);
    assert.ok((await r.claimPort({ ...claim(9000, "b"), bindHost: "::1" })).ok);
  });

  it("keeps a UDP port apart from the TCP port of the same number", async () => {
    const r = registry();
    const udp = { ...claim(9000, "u"), protocol: "udp" as const };
    assert.ok((await r.claimPort(claim(9000, "a"))).ok);
    assert.ok((await r.claimPort(udp)).ok);
    assert.equal((await r.claimPort({ ...claim(9000, "v"), protocol: "udp" })).ok, false);
    await r.releasePort(udp);
    assert.equal((await r.portHolder("127.0.0.1", 9000))?.tunnel, "a", "TCP's holder stays");
    assert.ok((await r.claimPort({ ...claim(9000, "v"), protocol: "udp" })).ok);
  });

  it("releases only for the holder: a stale release leaves the new holder in place", async () => {
    const r = registry();
    await r.claimPort(claim(9000, "old"));
    await r.releasePort(claim(9000, "old"));
    assert.equal(await r.portHolder("127.0.0.1", 9000), undefined);
    await r.claimPort(claim(9000, "new"));
    await r.releasePort(claim(9000, "old")); // late, from the old tunnel's teardown
    assert.equal((await r.portHolder("127.0.0.1", 9000))?.tunnel, "new");
    await r.releasePort({ ...claim(9000, "new"), node: "n2" }); // another node's claim of it
    assert.equal((await r.portHolder("127.0.0.1", 9000))?.tunnel, "new");
  });
});

describe("LocalRegistry: sessions and tunnels", () => {
  it("lists sessions oldest first, counts them, and forgets removed ones", () => {
    const r = registry();
    for (const id of ["s1", "s2", "s3"]) r.addSession(session(id));
    r.removeSession("s2");
    r.removeSession("s9"); // unknown: nothing happens
    assert.deepEqual(r.sessions().map((s) => s.id), ["s1", "s3"]);
    assert.equal(r.sessionCount, 2);
    assert.equal(r.session("s3")?.id, "s3");
    assert.equal(r.session("s2"), undefined);
  });

  it("knows each tunnel's owning session without a scan by the caller", () => {
    const r = registry();
    r.addSession(session("s1"));
    r.addTunnel(tunnel("t1", 1), "s1");
    r.addTunnel(tunnel("t2", 2), "s9"); // its session already gone
    assert.equal(r.tunnelOwner("t1")?.id, "s1");
    assert.equal(r.tunnelOwner("t2"), undefined);
    assert.deepEqual(r.tunnels().map((t) => t.id), ["t1", "t2"]);
    assert.equal(r.removeTunnel("t1")?.id, "t1");
    assert.equal(r.removeTunnel("t1"), undefined);
    assert.equal(r.tunnel("t1"), undefined);
  });
});

describe("LocalRegistry: closeTunnel", () => {
  it("closes a tunnel through its owning session, which tells the client the reason", () => {
    const r = registry();
    const owner = fakeSession("s1", { tunnels: ["t-1"] });
    const tunnel = fakeTunnel("t-1");
    r.addSession(owner);
    r.addTunnel(tunnel, "s1");
    assert.equal(r.closeTunnel("t-1", "closed by an operator"), true);
    assert.deepEqual(owner.calls, ["closeTunnel t-1 closed by an operator"]);
    // The session's own teardown closes and removes it, not the registry behind its back.
    assert.deepEqual(tunnel.calls, []);
    assert.equal(r.tunnel("t-1"), tunnel);
  });

  it("closes and forgets an orphan: a tunnel whose session is gone or disowns it", () => {
    const r = registry();
    const seen: string[] = [];
    r.watch((change) => seen.push(`${change.kind}:${change.op}`));
    const gone = fakeTunnel("t-1");
    r.addTunnel(gone, "s9"); // its session already removed
    const disowned = fakeTunnel("t-2");
    const session = fakeSession("s1", { tunnels: [] });
    r.addSession(session);
    r.addTunnel(disowned, "s1"); // the session no longer lists it
    assert.equal(r.closeTunnel("t-1", "why"), true);
    assert.equal(r.closeTunnel("t-2", "why"), true);
    assert.deepEqual(gone.calls, ["close"]);
    assert.deepEqual(disowned.calls, ["close"]);
    assert.deepEqual(session.calls, ["closeTunnel t-2 why"]);
    assert.equal(r.tunnel("t-1"), undefined);
    assert.equal(r.tunnel("t-2"), undefined);
    assert.deepEqual(seen.filter((c) => c.startsWith("tunnel:")), [
      "tunnel:added",
      "tunnel:added",
      "tunnel:removed",
      "tunnel:removed",
    ]);
  });

  it("answers false for a tunnel it does not have, and changes nothing", () => {
    const r = registry();
    const session = fakeSession("s1", { tunnels: ["t-1"] });
    r.addSession(session);
    assert.equal(r.closeTunnel("t-1", "why"), false);
    assert.deepEqual(session.calls, []);
  });
});

describe("LocalRegistry: services", () => {
  const offerOf = (yamux: Session, session: string, client = "c", owner?: string) =>
    serviceOffer({ name: "db", client, session, node: "n1", owner }, yamux);

  it("gives a name to one owner: its sessions serve it together, another owner is refused", async () => {
    const [a] = memoryPair();
    const yamux = new Session(a, { client: false, config: { enableKeepAlive: false } });
    try {
      const r = registry();
      assert.deepEqual(await r.offerService(offerOf(yamux, "s1")), { ok: true });
      assert.deepEqual(await r.offerService(offerOf(yamux, "s1")), { ok: true }, "again: fine");
      assert.deepEqual(await r.offerService(offerOf(yamux, "s2")), { ok: true }, "its HA session");
      const refused = await r.offerService(offerOf(yamux, "s3", "other"));
      assert.equal(refused.ok, false);
      assert.equal(!refused.ok && refused.holder?.client, "c");
      assert.equal(await r.withdrawService("db", "s3"), false);
      assert.deepEqual(r.services().map((o) => o.session), ["s1", "s2"]);
      await r.offerService(
        serviceOffer({ name: "app", client: "c", session: "s1", node: "n1" }, yamux),
      );
      assert.deepEqual(r.services().map((o) => o.name), ["app", "db", "db"]);
      await r.withdrawServices("s1");
      assert.deepEqual(r.services().map((o) => `${o.name}/${o.session}`), ["db/s2"]);
      assert.equal(r.service("db")?.session, "s2");
      await r.withdrawServices("s2");
      assert.deepEqual(r.services(), []);
      assert.equal(r.service("db"), undefined);
    } finally {
      yamux.destroy();
    }
  });

  it("spreads users over a group's members in turn and skips unhealthy ones", async () => {
    const [a] = memoryPair();
    const yamux = new Session(a, { client: false, config: { enableKeepAlive: false } });
    try {
      const r = registry();
      for (const [session, client] of [["s1", "m1"], ["s2", "m2"]]) {
        const result = await r.offerService(offerOf(yamux, session, client, "group:g"));
        assert.deepEqual(result, { ok: true });
      }
      const picks = Array.from({ length: 4 }, () => r.service("db")?.session);
      assert.deepEqual(picks.sort(), ["s1", "s1", "s2", "s2"]);
      assert.equal(await r.setServiceHealth("db", "s1", false), true);
      assert.deepEqual(Array.from({ length: 3 }, () => r.service("db")?.session), [
        "s2",
        "s2",
        "s2",
      ]);
      await r.setServiceHealth("db", "s2", false);
      assert.equal(r.service("db"), undefined, "no healthy member: nobody");
      await r.setServiceHealth("db", "s1", true);
      assert.equal(r.service("db")?.session, "s1");
      assert.equal(await r.setServiceHealth("db", "s9", true), false);
    } finally {
      yamux.destroy();
    }
  });
});

describe("LocalRegistry: watch", () => {
  it("delivers every change until unsubscribed, and survives a throwing watcher", async () => {
    const r = registry();
    const seen: RegistryChange[] = [];
    r.watch(() => {
      throw new Error("a broken watcher");
    });
    const stop = r.watch((change) => seen.push(change));
    r.addSession(session("s1"));
    await r.claimPort(claim(9000, "t1"));
    await r.claimPort(claim(9000, "t2")); // refused: no change
    r.addTunnel(tunnel("t1", 1), "s1");
    r.removeTunnel("t1");
    await r.releasePort(claim(9000, "t1"));
    r.removeSession("s1");
    stop();
    r.addSession(session("s2"));
    assert.deepEqual(seen.map((c) => `${c.kind}:${c.op}`), [
      "session:added",
      "port:claimed",
      "tunnel:added",
      "tunnel:removed",
      "port:released",
      "session:removed",
    ]);
  });
});

describe("LocalRegistry: host names and their path prefixes", () => {
  const claim = (host: string, tunnel: string, client = "alice", pathPrefix?: string) => ({
    host,
    passthrough: false,
    tunnel,
    session: "s1",
    client,
    node: "local",
    ...(pathPrefix ? { pathPrefix } : {}),
  });

  it("routes a path to the longest prefix it lies under, else to the name's own tunnel", async () => {
    const hosts = registry();
    const root = fakeTunnel("root", { host: "a.test" });
    const api = fakeTunnel("api", { host: "a.test" });
    const v1 = fakeTunnel("v1", { host: "a.test" });
    assert.ok((await hosts.claimHost(claim("a.test", "api", "alice", "/api"), api)).ok);
    assert.equal(hosts.hostRoute("a.test", "/"), undefined, "no tunnel of the name's own yet");
    assert.ok((await hosts.claimHost(claim("a.test", "root"), root)).ok);
    assert.ok((await hosts.claimHost(claim("a.test", "v1", "alice", "/api/v1"), v1)).ok);
    const routed = (path?: string) => hosts.hostRoute("a.test", path)?.id;
    assert.deepEqual(
      ["/", "/apix", "/api", "/api/v1/x", "/api/v10", undefined].map(routed),
      ["root", "root", "api", "v1", "api", "root"],
    );
    await hosts.releaseHost(claim("a.test", "v1", "alice", "/api/v1"), v1);
    assert.equal(routed("/api/v1/x"), "api");
    await hosts.releaseHost(claim("a.test", "api", "alice", "/api"), api);
    assert.equal(routed("/api/v1/x"), "root");
  });

  it("keeps every path of a name to the client holding it", async () => {
    const hosts = registry();
    const mine = fakeTunnel("mine", { host: "a.test" });
    const theirs = fakeTunnel("theirs", { host: "a.test", client: "bob" });
    assert.ok((await hosts.claimHost(claim("a.test", "mine", "alice", "/x"), mine)).ok);
    const taken = [
      await hosts.claimHost(claim("a.test", "theirs", "bob", "/y"), theirs),
      await hosts.claimHost(claim("a.test", "theirs", "bob"), theirs),
      await hosts.claimHost(claim("a.test", "theirs", "bob", "/x"), theirs),
    ];
    assert.deepEqual(taken.map((r) => r.ok), [false, false, false]);
    assert.equal(hosts.hostRoute("a.test", "/y"), undefined);
  });
});
