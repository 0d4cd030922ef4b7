// The cluster bench's pure helpers: /varz read into counters (and refused when a field is
// missing), rates between two samples, /proc parsing, and the two-term least-squares fit.
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { cpuSecondsOfStat, fit2, parseVarz, ratesOf, rssMiBOfStatus } from "./model.ts";

const varz = (n: number) => ({
  in_msgs: 100 * n,
  out_msgs: 300 * n,
  in_bytes: 1000 * n,
  out_bytes: 5000 * n,
  jetstream: { stats: { api: { total: 20 * n, errors: 0 } } },
});

describe("cluster bench model", () => {
  it("reads /varz's counters, JetStream's API total included", () => {
    assert.deepEqual(parseVarz(varz(1)), {
      inMsgs: 100,
      outMsgs: 300,
      inBytes: 1000,
      outBytes: 5000,
      apiTotal: 20,
    });
  });

  it("names the missing field of a server without JetStream, and refuses what is not JSON", () => {
    const { jetstream: _, ...plain } = varz(1);
    assert.throws(() => parseVarz(plain), /jetstream\.stats\.api\.total/);
    assert.throws(() => parseVarz({ ...varz(1), in_msgs: "7" }), /in_msgs/);
    assert.throws(() => parseVarz(null), /not JSON/);
  });

  it("turns two samples into per-second rates, never negative (a restarted server)", () => {
    const rates = ratesOf(parseVarz(varz(1)), parseVarz(varz(3)), 10);
    assert.deepEqual(rates, { inMsgs: 20, outMsgs: 60, inBytes: 200, outBytes: 1000, apiTotal: 4 });
    assert.equal(ratesOf(parseVarz(varz(3)), parseVarz(varz(1)), 10).apiTotal, 0);
    assert.throws(() => ratesOf(parseVarz(varz(1)), parseVarz(varz(1)), 0), /positive/);
  });

  it("reads CPU seconds from /proc/PID/stat, a command name with spaces and parentheses included", () => {
    const stat = "4242 (deno (x) y) S 1 4242 4242 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 9 0";
    assert.equal(cpuSecondsOfStat(stat), 3);
    assert.throws(() => cpuSecondsOfStat("garbage"), /not a \/proc stat line/);
  });

  it("reads RSS from /proc/PID/status", () => {
    assert.equal(rssMiBOfStatus("Name:\tdeno\nVmRSS:\t   81920 kB\nThreads: 9\n"), 80);
    assert.equal(rssMiBOfStatus("Name:\tdeno\n"), undefined);
  });

  it("fits y = a·N + b·N² to points made from known coefficients, and refuses one shape", () => {
    const points = [2, 5, 10, 15].map((n) => ({ n, t: 1000, y: 0.6 * n + 0.02 * n * n }));
    const { a, b } = fit2(points, (p) => p.n, (p) => p.n * p.n);
    assert.ok(Math.abs(a - 0.6) < 1e-9 && Math.abs(b - 0.02) < 1e-9, `${a} ${b}`);
    const same = [{ n: 5, t: 1000, y: 3 }, { n: 5, t: 1000, y: 3.1 }];
    assert.throws(() => fit2(same, (p) => p.n, (p) => p.n * p.n), /do not separate/);
  });
});
