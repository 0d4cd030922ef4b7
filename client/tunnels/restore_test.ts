import { describe, it } from "node:test";
import assert from "node:assert/strict";
import {
  RESTORE_RETRY_MS,
  restoreAll,
  type RestoreContext,
  restoreOffer,
  restoreTunnel,
} from "./restore.ts";
import { ClientError } from "../errors.ts";
import { newTunnelRecord, type TunnelRecord } from "./expose.ts";
import { newOfferRecord, type OfferRecord } from "./offers.ts";

/** What a fake client saw: requests, errors, health watches, pauses. */
interface Seen {
  log: string[];
  errors: ClientError[];
  sleeps: number[];
}

/**
 * A client for restore to talk to: `expose` answers from `exposeAnswers` (by tunnel label, in
 * turn; missing means success), `offer` fails for the names in `refusedOffers`. Its clock moves
 * only when restore sleeps.
 */
function fakeClient(
  options: {
    exposeAnswers?: Record<string, (ClientError | undefined)[]>;
    refusedOffers?: string[];
    offers?: Map<string, OfferRecord>;
    restoreTimeoutMs?: number;
    isCurrent?: () => boolean;
  } = {},
): { context: RestoreContext; seen: Seen } {
  const seen: Seen = { log: [], errors: [], sleeps: [] };
  let clock = 1_000;
  const context: RestoreContext = {
    isCurrent: options.isCurrent ?? (() => true),
    expose: async (record, port) => {
      const label = record.request.label ?? "?";
      seen.log.push(`expose ${label} ${port}`);
      // Each expose settles a turn later, so parallel ones interleave as on a real channel.
      await Promise.resolve();
      const failure = options.exposeAnswers?.[label]?.shift();
      if (failure) throw failure;
      seen.log.push(`exposed ${label}`);
    },
    offer: async (name) => {
      seen.log.push(`offer ${name}`);
      await Promise.resolve();
      if (options.refusedOffers?.includes(name)) {
        throw new ClientError("not_allowed", `no ${name}`);
      }
    },
    offered: (name) => void seen.log.push(`watch ${name}`),
    offers: options.offers ?? new Map(),
    onError: (error) => void seen.errors.push(error),
    restoreTimeoutMs: options.restoreTimeoutMs ?? 30_000,
    now: () => clock,
    sleep: (ms) => {
      seen.sleeps.push(ms);
      clock += ms;
      return Promise.resolve();
    },
  };
  return { context, seen };
}

/** A tunnel exposed before on `port`, labelled so the fake can tell it apart. */
function held(label: string, port: number): TunnelRecord {
  const record = newTunnelRecord({ local: "127.0.0.1:3000", label }, false);
  Object.assign(record, { id: `old-${label}`, remoteHost: "0.0.0.0", remotePort: port });
  return record;
}

const portInUse = () => new ClientError("port_in_use", "daemon: port in use (port_in_use)");

describe("restoreAll", () => {
  it("asks for every tunnel together, then each offer in turn, once the tunnels are done", async () => {
    const offers = new Map([
      ["first", newOfferRecord("127.0.0.1:4000", {})],
      ["second", newOfferRecord("127.0.0.1:4001", {})],
    ]);
    const { context, seen } = fakeClient({ offers });
    await restoreAll([held("a", 8080), held("b", 8081)], context);
    assert.deepEqual(seen.log, [
      "expose a 8080",
      "expose b 8081",
      "exposed a",
      "exposed b",
      "offer first",
      "watch first",
      "offer second",
      "watch second",
    ]);
    assert.deepEqual(seen.errors, []);
  });

  it("a refused request is an error event; the others are still asked for", async () => {
    const offers = new Map([
      ["denied", newOfferRecord("127.0.0.1:4000", {})],
      ["fine", newOfferRecord("127.0.0.1:4001", {})],
    ]);
    const limit = new ClientError("limit_reached", "daemon: too many tunnels (limit_reached)");
    const { context, seen } = fakeClient({
      offers,
      refusedOffers: ["denied"],
      exposeAnswers: { a: [limit] },
    });
    await restoreAll([held("a", 8080), held("b", 8081)], context);
    assert.deepEqual(seen.errors.map((e) => e.code), ["limit_reached", "not_allowed"]);
    assert.ok(seen.log.includes("exposed b"));
    assert.ok(!seen.log.includes("watch denied"), "a refused offer is not watched");
    assert.ok(seen.log.includes("watch fine"));
  });
});

describe("restoreTunnel", () => {
  it("asks again for a port still held for the lost session, until it is free", async () => {
    const record = held("a", 8080);
    const { context, seen } = fakeClient({ exposeAnswers: { a: [portInUse(), portInUse()] } });
    await restoreTunnel(record, context);
    assert.deepEqual(seen.log, ["expose a 8080", "expose a 8080", "expose a 8080", "exposed a"]);
    assert.deepEqual(seen.sleeps, [RESTORE_RETRY_MS, RESTORE_RETRY_MS]);
    assert.deepEqual(seen.errors, []);
  });

  it("gives up on port_in_use once restoreTimeoutMs has passed, with an error event", async () => {
    const record = held("a", 8080);
    const answers = Array.from({ length: 10 }, portInUse);
    const { context, seen } = fakeClient({
      exposeAnswers: { a: answers },
      restoreTimeoutMs: 2 * RESTORE_RETRY_MS,
    });
    await restoreTunnel(record, context);
    // Asked at 0, 1 and 2 pauses (not yet past the deadline), then once more past it.
    assert.equal(seen.log.length, 4);
    assert.deepEqual(seen.errors.map((e) => e.code), ["port_in_use"]);
  });

  it("does not wait on port_in_use when any port was asked for", async () => {
    const record = newTunnelRecord({ local: "127.0.0.1:3000", label: "a" }, true);
    const { context, seen } = fakeClient({ exposeAnswers: { a: [portInUse()] } });
    await restoreTunnel(record, context);
    assert.deepEqual(seen.log, ["expose a 0"]);
    assert.deepEqual(seen.sleeps, []);
    assert.deepEqual(seen.errors.map((e) => e.code), ["port_in_use"]);
  });

  it("asks for the port the script asked for when the tunnel was never exposed", async () => {
    const record = newTunnelRecord({ local: "127.0.0.1:3000", label: "a", remotePort: 9000 }, true);
    const { context, seen } = fakeClient();
    await restoreTunnel(record, context);
    assert.deepEqual(seen.log, ["expose a 9000", "exposed a"]);
  });

  it("skips a closed tunnel, one never exposed nor kept, and stops when the session changed", async () => {
    const closed = held("closed", 8080);
    closed.closed = true;
    const never = newTunnelRecord({ local: "127.0.0.1:3000", label: "never" }, false);
    const { context, seen } = fakeClient();
    await restoreTunnel(closed, context);
    await restoreTunnel(never, context);
    assert.deepEqual(seen.log, []);

    // The session is lost while the port is still held: no further asks.
    let current = true;
    const lost = fakeClient({
      exposeAnswers: { a: [portInUse(), portInUse()] },
      isCurrent: () => current,
    });
    const sleep = lost.context.sleep!;
    lost.context.sleep = (ms) => {
      current = false;
      return sleep(ms);
    };
    await restoreTunnel(held("a", 8080), lost.context);
    assert.deepEqual(lost.seen.log, ["expose a 8080"]);
    assert.deepEqual(lost.seen.errors, []);
  });
});

describe("restoreOffer", () => {
  it("does not watch an offer withdrawn or replaced while it was asked for", async () => {
    const offers = new Map<string, OfferRecord>();
    const { context, seen } = fakeClient({ offers });
    const record = newOfferRecord("127.0.0.1:4000", {});
    offers.set("box", record);
    const asked = restoreOffer("box", record, context);
    offers.set("box", newOfferRecord("127.0.0.1:4001", {}));
    await asked;
    assert.deepEqual(seen.log, ["offer box"]);
  });
});
