import { afterEach, describe, it } from "node:test";
import assert from "node:assert/strict";
import { Session } from "../../protocol/session.ts";
import { memoryPair } from "../../transport/memory.ts";
import { serviceOffer } from "./services.ts";
import { Fixture, GROUP_KEY, UnreachableRegistry } from "./_handler_fixture.ts";
import { offer, type OfferMessage, withdraw, type WithdrawMessage } from "./offer.ts";

let f: Fixture;

/** Offers `service` as request 5 and returns the answer. */
async function ask(service: string, fields: Partial<OfferMessage> = {}) {
  const message: OfferMessage = { type: "offer", id: 5, service, ...fields };
  f.sent.length = 0;
  await offer(f.context, f.client, message, f.answer(message));
  assert.equal(f.sent.length, 1);
  return f.sent[0] as Record<string, unknown>;
}

/** Withdraws `service` as request 6 and returns the answer. */
async function take(service: string) {
  const message: WithdrawMessage = { type: "withdraw", id: 6, service };
  f.sent.length = 0;
  await withdraw(f.context, message, f.answer(message));
  assert.equal(f.sent.length, 1);
  return f.sent[0] as Record<string, unknown>;
}

/** Registers an offer of `name` by bob's session s2, owned by bob. */
async function bobOffers(name: string): Promise<() => void> {
  const [a, b] = memoryPair();
  const yamux = new Session(a, { client: false, config: { enableKeepAlive: false } });
  const record = { name, client: "bob", session: "s2", node: "n1" };
  assert.ok((await f.registry.offerService(serviceOffer(record, yamux))).ok);
  return () => {
    yamux.destroy();
    b.close();
  };
}

describe("offer", () => {
  afterEach(() => f.close());

  it("registers the session's offer, owned by its client, and answers ok", async () => {
    f = new Fixture();
    assert.deepEqual(await ask("db"), { type: "ok", id: 5 });
    const [offered] = f.registry.services();
    assert.equal(offered.name, "db");
    assert.equal(offered.client, "alice");
    assert.equal(offered.session, "s1");
    assert.equal(offered.node, "n1");
    assert.equal(offered.owner, "client:alice");
    assert.equal(offered.balance, undefined);
    assert.equal(offered.healthy, true);
    assert.equal(f.registry.service("db"), offered);
    assert.deepEqual(f.logged("service offered").map((l) => [l.service, l.owner]), [
      ["db", "client:alice"],
    ]);
  });

  it("offers as a group, given the group's key", async () => {
    f = new Fixture();
    assert.deepEqual(await ask("web-1", { group: "team", groupKey: GROUP_KEY }), {
      type: "ok",
      id: 5,
    });
    const [offered] = f.registry.services();
    assert.equal(offered.owner, "group:team");
    assert.equal(offered.balance, "least_connections");
  });

  it("refuses a service the client may not offer", async () => {
    f = new Fixture();
    const answer = await ask("mail");
    assert.equal(answer.code, "not_allowed");
    assert.equal(answer.message, "client alice may not offer service mail");
    assert.equal(f.logged("offer refused")[0].reason, "not_allowed");
    assert.deepEqual(f.registry.services(), []);
  });

  it("refuses a group the client may not join, or a wrong key", async () => {
    f = new Fixture();
    assert.equal(
      (await ask("db", { group: "other" })).message,
      "this client may not join group other",
    );
    assert.equal(
      (await ask("db", { group: "team", groupKey: "nope" })).message,
      "wrong key for group team",
    );
    assert.deepEqual(f.registry.services(), []);
  });

  it("refuses a name another owner offers, naming its client", async () => {
    f = new Fixture();
    const done = await bobOffers("db");
    try {
      assert.deepEqual(await ask("db"), {
        type: "error",
        id: 5,
        code: "conflict",
        message: "service db is offered by another owner (by client bob)",
      });
      assert.deepEqual(f.registry.services().map((o) => o.client), ["bob"]);
    } finally {
      done();
    }
  });

  it("refuses when the registry cannot be reached", async () => {
    f = new Fixture({ registry: new UnreachableRegistry() });
    assert.deepEqual(await ask("db"), {
      type: "error",
      id: 5,
      code: "unavailable",
      message: "the cluster registry cannot be reached; try again",
    });
  });
});

describe("withdraw", () => {
  afterEach(() => f.close());

  it("withdraws the session's offer and answers ok", async () => {
    f = new Fixture();
    await ask("db");
    assert.deepEqual(await take("db"), { type: "ok", id: 6 });
    assert.deepEqual(f.registry.services(), []);
  });

  it("refuses a service this session does not offer, another session's too", async () => {
    f = new Fixture();
    const done = await bobOffers("db");
    try {
      assert.deepEqual(await take("db"), {
        type: "error",
        id: 6,
        code: "not_found",
        message: "this session does not offer db",
      });
      assert.equal(f.logged("withdraw refused").length, 1);
      assert.deepEqual(f.registry.services().map((o) => o.session), ["s2"]);
    } finally {
      done();
    }
  });
});
