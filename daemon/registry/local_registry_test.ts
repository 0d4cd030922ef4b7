import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { Session } from "../../protocol/session.ts";
import { memoryPair } from "../../transport/memory.ts";
import type { ReverseTunnel } from "../reverse_tunnel.ts";
import { serviceOffer } from "../services.ts";
import type { TokenRegistry } from "../tokens/store.ts";
import { LocalRegistry } from "./local_registry.ts";
import type { PortClaim, RegistryChange, SessionHandle } from "./registry.ts";

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

describe("LocalRegistry: services", () => {
  it("gives a name to one session; others get false; withdraw is the owner's", async () => {
    const [a] = memoryPair();
    const yamux = new Session(a, { client: false, config: { enableKeepAlive: false } });
    try {
      const r = registry();
      const offer = (s: string) =>
        serviceOffer({ name: "db", client: "c", session: s, node: "n1" }, yamux);
      assert.equal(await r.offerService(offer("s1")), true);
      assert.equal(await r.offerService(offer("s1")), true, "the same session again: fine");
      assert.equal(await r.offerService(offer("s2")), false);
      assert.equal(await r.withdrawService("db", "s2"), false);
      assert.equal(r.service("db")?.session, "s1");
      await r.offerService(
        serviceOffer({ name: "app", client: "c", session: "s1", node: "n1" }, yamux),
      );
      assert.deepEqual(r.services().map((o) => o.name), ["app", "db"]);
      await r.withdrawServices("s1");
      assert.deepEqual(r.services(), []);
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
