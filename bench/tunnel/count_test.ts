/**
 * The count tool's pure parts: `strace -c` output into counts (on text captured from strace 6.1
 * attached with `-c -f` to a Deno relay of the floor, nine threads), and the tables, with each
 * runtime's floor beside tunnelmux. The tool itself needs strace and ptrace rights; it is run by
 * hand (docs/performance.md).
 */

import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { type CountOptions, formatCounts, parseStraceSummary, type PhaseCount } from "./count.ts";

const CAPTURED = `% time     seconds  usecs/call     calls    errors syscall
------ ----------- ----------- --------- --------- -------------------
 91.53    0.504153         138      3646        29 futex
  3.64    0.020049          11      1732           epoll_wait
  1.39    0.007646           4      1735           write
  1.17    0.006436           3      1766           read
  0.97    0.005345           3      1766           close
  0.68    0.003740           2      1766           fcntl
  0.56    0.003103         620         5           restart_syscall
  0.05    0.000271          45         6           brk
  0.01    0.000036           6         6           getpid
  0.00    0.000021          21         1           sched_getscheduler
  0.00    0.000015          15         1           sched_getparam
------ ----------- ----------- --------- --------- -------------------
100.00    0.550815          44     12430        29 total
`;

const OPTIONS: CountOptions = {
  warmup: 10,
  conns: 100,
  concurrency: 1,
  trips: 200,
  settleMs: 0,
  timeoutMs: 1000,
};

describe("parseStraceSummary", () => {
  it("reads calls and errors per system call, leaving out the total", () => {
    const counts = parseStraceSummary(CAPTURED);
    assert.deepEqual(counts.get("futex"), { calls: 3646, errors: 29 });
    assert.deepEqual(counts.get("epoll_wait"), { calls: 1732, errors: 0 });
    assert.deepEqual(counts.get("sched_getparam"), { calls: 1, errors: 0 });
    assert.equal(counts.has("total"), false);
    assert.equal(counts.size, 11);
    const calls = [...counts.values()].reduce((sum, c) => sum + c.calls, 0);
    assert.equal(calls, 12430, "the rows add up to strace's own total");
  });

  it("sums the sections strace prints per personality and skips other lines", () => {
    const text = `strace: Process 42 attached with 3 threads
% time     seconds  usecs/call     calls    errors syscall
------ ----------- ----------- --------- --------- ----------------
100.00    0.000010           1        10         2 read
------ ----------- ----------- --------- --------- ----------------
100.00    0.000010           1        10         2 total
System call usage summary for 32 bit mode:
% time     seconds  usecs/call     calls    errors syscall
------ ----------- ----------- --------- --------- ----------------
100.00    0.000001           0         3           read
------ ----------- ----------- --------- --------- ----------------
100.00    0.000001           0         3           total
`;
    assert.deepEqual([...parseStraceSummary(text)], [["read", { calls: 13, errors: 2 }]]);
  });

  it("gives no counts for a process that made no calls (strace writes nothing)", () => {
    assert.equal(parseStraceSummary("").size, 0);
  });
});

describe("formatCounts", () => {
  const phase = (
    impl: string,
    phase: "conns" | "trips",
    side: "server" | "client",
    counts: Record<string, number>,
  ): PhaseCount => ({
    impl,
    phase,
    side,
    units: phase === "conns" ? OPTIONS.conns : OPTIONS.trips,
    counts: Object.fromEntries(
      Object.entries(counts).map((
        [name, calls],
      ) => [name, { calls, errors: name === "connect" ? calls : 0 }]),
    ),
  });
  const results = [
    phase("tunnelmux-deno-tcp", "conns", "server", { recvfrom: 500, accept4: 200, brk: 0 }),
    phase("jsrelay-deno", "conns", "server", { recvfrom: 400, accept4: 200, connect: 100 }),
    phase("tunnelmux-deno-tcp", "trips", "client", { recvfrom: 400, sendto: 400 }),
    phase("jsrelay-deno", "trips", "client", { recvfrom: 400, sendto: 402 }),
  ];
  const text = formatCounts(results, ["tunnelmux-deno-tcp", "jsrelay-deno"], OPTIONS);

  it("prints per unit, the total first, the floor beside tunnelmux", () => {
    assert.match(text, /per connection \(100 new connections.*server side/);
    assert.match(text, /syscall\s+tunnelmux-deno-tcp\s+jsrelay-deno/);
    assert.match(text, /total\s+7\.00\s+7\.00/);
    assert.match(text, /recvfrom\s+5\.00\s+4\.00/);
    assert.match(text, /connect\s+0\.00\s+1\.00/);
    assert.match(text, /\(failed calls\)\s+0\.00\s+1\.00/);
    assert.match(text, /per round trip \(200 64 B round trips.*client side/);
    assert.match(text, /sendto\s+2\.00\s+2\.01/);
    assert.ok(text.indexOf("total") < text.indexOf("recvfrom"), "total first");
  });

  it("leaves out calls that never reach 0.01 per unit and tables with no figures", () => {
    assert.doesNotMatch(text, /\bbrk\b/);
    assert.doesNotMatch(text, /per connection[^\n]*client side/);
  });
});
