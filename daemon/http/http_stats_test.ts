import { describe, it } from "node:test";
import assert from "node:assert/strict";
import type { HttpExchange } from "./http_front.ts";
import { HttpStats, MAX_HOSTS } from "./http_stats.ts";

function exchange(host: string, status = 200, more: Partial<HttpExchange> = {}): HttpExchange {
  return { host, status, bytesIn: 100, bytesOut: 1000, ms: 250, ...more };
}

/** The counters of `host` as plain values. */
function countersOf(stats: HttpStats, host: string) {
  const entry = [...stats.entries()].find(([name]) => name === host)?.[1];
  return entry && {
    byStatus: Object.fromEntries(entry.byStatus),
    bytesIn: entry.bytesIn,
    bytesOut: entry.bytesOut,
    seconds: entry.seconds,
  };
}

describe("HttpStats", () => {
  it("counts each host's requests by status, its bytes each way and its seconds", () => {
    const stats = new HttpStats();
    stats.record(exchange("app.example.com", 200, { bytesIn: 10, bytesOut: 20, ms: 1500 }), true);
    stats.record(exchange("app.example.com", 200, { bytesIn: 1, bytesOut: 2, ms: 500 }), true);
    stats.record(exchange("app.example.com", 502, { bytesIn: 0, bytesOut: 0, ms: 0 }), true);
    stats.record(exchange("api.example.com"), true);
    assert.deepEqual(countersOf(stats, "app.example.com"), {
      byStatus: { 200: 2, 502: 1 },
      bytesIn: 11,
      bytesOut: 22,
      seconds: 2,
    });
    assert.deepEqual([...stats.entries()].map(([host]) => host), [
      "app.example.com",
      "api.example.com",
    ]);
  });

  it("counts hosts no tunnel holds together, whatever they were", () => {
    const stats = new HttpStats();
    stats.record(exchange("made-up-1.example", 404), false);
    stats.record(exchange("made-up-2.example", 404), false);
    stats.record(exchange("", 400), false);
    assert.deepEqual([...stats.entries()].map(([host]) => host), ["(unknown)"]);
    assert.deepEqual(countersOf(stats, "(unknown)")?.byStatus, { 400: 1, 404: 2 });
  });

  it("counts hosts past MAX_HOSTS together, and the hosts it has on their own still", () => {
    const stats = new HttpStats();
    for (let i = 0; i < MAX_HOSTS; i++) stats.record(exchange(`h${i}.example.com`), true);
    stats.record(exchange("one-too-many.example.com", 201), true);
    stats.record(exchange("another.example.com", 202), true);
    stats.record(exchange("h7.example.com", 203), true);
    const hosts = [...stats.entries()].map(([host]) => host);
    assert.equal(hosts.length, MAX_HOSTS + 1);
    assert.ok(!hosts.includes("one-too-many.example.com"));
    assert.deepEqual(countersOf(stats, "(other)")?.byStatus, { 201: 1, 202: 1 });
    assert.deepEqual(countersOf(stats, "h7.example.com")?.byStatus, { 200: 1, 203: 1 });
  });
});
