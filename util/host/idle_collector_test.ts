import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { fullCollection, IdleCollector } from "./idle_collector.ts";
import { currentRuntime } from "./runtime.ts";

const MiB = 1024 * 1024;

/** A process whose CPU time and RSS the test sets; a collection brings the RSS to `after`. */
function fakeProcess() {
  const state = { cpu: 0, rss: 50 * MiB, after: 52 * MiB, collections: 0 };
  const collector = new IdleCollector({
    cpuMs: () => state.cpu,
    rssBytes: () => state.rss,
    collect: () => {
      state.collections++;
      state.rss = state.after;
      state.cpu += 40; // a collection's own time
    },
  });
  return { state, collector };
}

describe("IdleCollector", () => {
  it("collects once the process is quiet after its memory grew, and not again", () => {
    const { state, collector } = fakeProcess();
    assert.equal(collector.check(), false, "the first look only takes the level");
    state.rss = 80 * MiB;
    state.cpu += 500; // busy: the burst
    assert.equal(collector.check(), false, "busy");
    state.cpu += 5;
    assert.equal(collector.check(), true, "quiet and grown");
    assert.equal(state.rss, 52 * MiB);
    state.cpu += 5;
    assert.equal(collector.check(), false, "the collection's own CPU does not count, nothing grew");
    assert.equal(state.collections, 1);
  });

  it("waits for growth of the threshold above the level", () => {
    const { state, collector } = fakeProcess();
    collector.check();
    state.rss += 7 * MiB;
    assert.equal(collector.check(), false);
    state.rss += 2 * MiB;
    assert.equal(collector.check(), true);
  });

  it("takes memory that a collection could not return as the new level", () => {
    const { state, collector } = fakeProcess();
    collector.check();
    state.rss = 90 * MiB;
    state.after = 89 * MiB; // in use
    assert.equal(collector.check(), true);
    for (let i = 0; i < 5; i++) assert.equal(collector.check(), false);
    assert.equal(state.collections, 1);
  });

  it("follows the RSS down: growth counts from the lowest level seen", () => {
    const { state, collector } = fakeProcess();
    collector.check();
    state.rss = 40 * MiB;
    collector.check();
    state.rss = 49 * MiB;
    assert.equal(collector.check(), true, "9 MiB above 40");
  });
});

describe("IdleCollector on a runtime without a way to collect", () => {
  it("stops for good instead of throwing", () => {
    let tries = 0;
    let rss = 50 * MiB;
    const collector = new IdleCollector({
      cpuMs: () => 0,
      rssBytes: () => rss,
      collect: () => {
        tries++;
        throw new Error("no gc here");
      },
    });
    collector.check();
    rss = 90 * MiB;
    assert.equal(collector.check(), false);
    assert.equal(collector.check(), false);
    assert.equal(tries, 1);
  });
});

describe("fullCollection", {
  skip: currentRuntime() === "bun" ? "Bun returns memory by itself" : false,
}, () => {
  it("collects what nothing reaches, more than once", async () => {
    for (let round = 0; round < 2; round++) {
      const ref = new WeakRef({ payload: new Uint8Array(1024) });
      // A WeakRef's target lives at least to the end of the job that made or read it.
      await new Promise((resolve) => setTimeout(resolve, 0));
      fullCollection();
      assert.equal(ref.deref(), undefined, `round ${round}`);
    }
  });
});
