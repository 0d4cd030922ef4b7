/**
 * The SVG renderer on a hand-made report: well-formed, one chart per scenario, one row per
 * implementation, failures shown, text escaped, bars proportional to their medians.
 */

import { describe, it } from "node:test";
import assert from "node:assert/strict";
import type { BenchReport, ResultRow } from "./report.ts";
import { renderSvg } from "./svg.ts";

const ODD = `a<b>&"c'`;

function row(
  scenario: string,
  impl: string,
  unit: string,
  median: number,
  extra: Partial<ResultRow> = {},
): ResultRow {
  const ok = Number.isFinite(median);
  return {
    scenario,
    impl,
    unit,
    median,
    min: ok ? median * 0.9 : NaN,
    max: ok ? median * 1.1 : NaN,
    n: ok ? 3 : 0,
    failures: ok ? 0 : 3,
    // Worker stderr can carry terminal colors: control characters XML does not allow.
    ...(ok ? {} : { error: "timeout after 300000 ms \x1b[31mred\x1b[0m\x07" }),
    ...extra,
  };
}

// Not a literal inside REPORT, so the fixture type-checks whether or not BenchReport's scenarios
// carry the optional-looking fields (`higher`, `suite`) yet.
const SCENARIOS = [
  { id: "S1", title: "streams one at a time", unit: "streams/s", workload: {}, higher: true },
  { id: "S5", title: "round trips", unit: "µs", workload: {}, higher: false },
  { id: "T1", title: "through a <tunnel>", unit: "MB/s", workload: {}, higher: true },
].map((s) => ({ ...s, suite: s.id.startsWith("T") ? "tunnel" as const : "protocol" as const }));

const REPORT: BenchReport = {
  env: {
    date: "2026-11-22T08:00:00.000Z",
    cpus: 2,
    cpuModel: "test",
    os: "linux",
    deno: "deno 2.9.6",
    bun: "1.4.4",
    go: "go1.25",
  },
  options: { rounds: 3 },
  scenarios: SCENARIOS,
  impls: ["tunnelmux-deno", "libp2p-yamux-deno", "yamux-js-deno", ODD],
  results: [
    row("S1", "tunnelmux-deno", "streams/s", 3000),
    row("S1", "libp2p-yamux-deno", "streams/s", 1000),
    row("S1", "yamux-js-deno", "streams/s", NaN),
    row("S1", ODD, "streams/s", 1500),
    row("S5", "tunnelmux-deno", "µs", 40, { p99: 90 }),
    row("S5", "libp2p-yamux-deno", "µs", 120, { p99: 300 }),
    row("S5", "yamux-js-deno", "µs", 80, { failures: 1, error: "lost a frame" }),
    row("S5", ODD, "µs", 20),
    row("T1", "tunnelmux-deno", "MB/s", 500),
    row("T1", "libp2p-yamux-deno", "MB/s", 250),
  ],
  ratios: [],
  targets: [],
  samples: [],
};

/** Tags in document order, checked to nest properly; throws on the first mismatch. */
function checkTags(document: string): { name: string; attrs: string; body: string }[] {
  const svg = document.replace(/^<\?xml[^>]*\?>/, "");
  const stack: string[] = [];
  const elements: { name: string; attrs: string; body: string }[] = [];
  const roots: string[] = [];
  const tag = /<(\/?)([A-Za-z][\w:-]*)((?:[^>"']|"[^"]*"|'[^']*')*?)(\/?)>/g;
  const opened: { name: string; attrs: string; end: number }[] = [];
  for (const m of svg.matchAll(tag)) {
    const [whole, closing, name, attrs, selfClosing] = m;
    if (closing) {
      const top = stack.pop();
      assert.equal(top, name, `</${name}> closes <${top}>`);
      const open = opened.pop()!;
      elements.push({ name, attrs: open.attrs, body: svg.slice(open.end, m.index) });
    } else {
      if (stack.length === 0) roots.push(name);
      if (selfClosing) elements.push({ name, attrs, body: "" });
      else {
        stack.push(name);
        opened.push({ name, attrs, end: m.index! + whole.length });
      }
    }
  }
  assert.deepEqual(stack, [], "unclosed tags");
  assert.deepEqual(roots, ["svg"], "one <svg> root");
  return elements;
}

function attr(attrs: string, name: string): string | undefined {
  return new RegExp(`\\s${name}="([^"]*)"`).exec(attrs)?.[1];
}

/** The chart groups: their scenario and the markup inside. */
function charts(svg: string) {
  return checkTags(svg).filter((e) => e.name === "g" && attr(e.attrs, "class") === "chart");
}

function rowsIn(body: string) {
  return [...body.matchAll(/<g class="row" data-impl="([^"]*)">(.*?)<\/g>/g)].map((m) => ({
    impl: m[1],
    body: m[2],
  }));
}

/** The text of every element in `body` that holds text only (the labels a row prints). */
function texts(body: string): string[] {
  return [...body.matchAll(/>([^<>]+)</g)].map((m) => m[1]);
}

function barWidth(rowBody: string): number | undefined {
  const m = /<rect class="bar[^"]*"[^>]*\swidth="([\d.]+)"/.exec(rowBody);
  return m ? Number(m[1]) : undefined;
}

describe("renderSvg", () => {
  const svg = renderSvg(REPORT);

  it("is one well-formed <svg> document with no external references", () => {
    assert.match(svg, /^<\?xml[^>]*\?>\n<svg xmlns="http:\/\/www.w3.org\/2000\/svg"/);
    checkTags(svg);
    assert.doesNotMatch(svg, /<script|<style|@import|href=|url\(/);
  });

  it("draws one chart per scenario, in report order", () => {
    assert.deepEqual(
      charts(svg).map((c) => attr(c.attrs, "data-scenario")),
      REPORT.scenarios.map((s) => s.id),
    );
  });

  it("draws one row per implementation, a bar for each that has a number", () => {
    for (const chart of charts(svg)) {
      const id = attr(chart.attrs, "data-scenario")!;
      const expected = REPORT.results.filter((r) => r.scenario === id);
      const rows = rowsIn(chart.body);
      assert.equal(rows.length, expected.length, id);
      for (const r of rows) {
        const result = expected.find((e) =>
          e.impl.replace(/[&<>"']/g, "") ===
            r.impl.replace(/&#\d+;/g, "")
        )!;
        assert.ok(result, `${id}: unexpected row ${r.impl}`);
        if (Number.isFinite(result.median)) assert.ok(barWidth(r.body)! > 0, `${id} ${r.impl}`);
        else {
          assert.equal(barWidth(r.body), undefined, `${id} ${r.impl}: a failed impl has no bar`);
          assert.match(r.body, /class="failed"[^>]*>failed: timeout/);
        }
      }
    }
  });

  it("makes bar widths proportional to the medians, within a chart", () => {
    for (const chart of charts(svg)) {
      const id = attr(chart.attrs, "data-scenario")!;
      const rows = rowsIn(chart.body).filter((r) => barWidth(r.body) !== undefined);
      const medians = rows.map((r) =>
        REPORT.results.find((e) =>
          e.scenario === id && e.impl.replace(/[&<>"']/g, "") === r.impl.replace(/&#\d+;/g, "")
        )!.median
      );
      assert.ok(rows.length >= 2, id);
      for (let i = 1; i < rows.length; i++) {
        const ratio = barWidth(rows[i].body)! / barWidth(rows[0].body)!;
        assert.ok(Math.abs(ratio - medians[i] / medians[0]) < 0.01, `${id}: ${ratio}`);
      }
    }
  });

  it("escapes text: names and titles appear only escaped", () => {
    assert.ok(!svg.includes(ODD));
    assert.ok(!svg.includes("<tunnel>"));
    assert.ok(svg.includes("a&#60;b&#62;&#38;&#34;c&#39;"));
    assert.ok(svg.includes("through a &#60;tunnel&#62;"));
  });

  it("replaces characters XML forbids", () => {
    // deno-lint-ignore no-control-regex
    assert.doesNotMatch(svg, /[\x00-\x08\x0B\x0C\x0E-\x1F]/);
    assert.match(svg, /timeout after 300000 ms red\uFFFD/);
  });

  it("says which way is better: the scenario's flag, else the unit", () => {
    const [s1, s5, t1] = charts(svg);
    assert.match(s1.body, /streams\/s, higher is better/);
    assert.match(s5.body, /µs, lower is better/);
    assert.match(t1.body, /MB\/s, higher is better/);
    // A lower-is-better unit the renderer does not know, flagged by the scenario.
    const cost = { id: "C1", title: "cost", unit: "CPU s/GiB", workload: {}, higher: false };
    const flagged = renderSvg({ ...REPORT, scenarios: [{ ...SCENARIOS[0], ...cost }] });
    assert.match(flagged, /CPU s\/GiB, lower is better/);
    // A report without the flag (older JSON): the unit decides.
    const { higher: _, ...unflagged } = SCENARIOS[1];
    const old = renderSvg({ ...REPORT, scenarios: [unflagged as typeof SCENARIOS[1]] });
    assert.match(old, /µs, lower is better/);
  });

  it("lists implementations that were not run, with the reason", () => {
    const skipped = [{ impl: "frp", reason: "frps not on PATH" }];
    const out = renderSvg({ ...REPORT, ...{ skipped } });
    assert.match(out, /not run: frp \(frps not on PATH\)/);
    assert.doesNotMatch(svg, /not run/);
  });

  it("highlights tunnelmux and prints values, p99 and partial failures", () => {
    const [, s5] = charts(svg);
    const rows = rowsIn(s5.body);
    const tunnelmux = rows.find((r) => r.impl === "tunnelmux-deno")!;
    assert.match(tunnelmux.body, /class="bar tunnelmux"/);
    assert.ok(texts(tunnelmux.body).includes("40 µs (p99 90)"), tunnelmux.body);
    const other = rows.find((r) => r.impl === "libp2p-yamux-deno")!;
    assert.doesNotMatch(other.body, /tunnelmux/);
    const flaky = rows.find((r) => r.impl === "yamux-js-deno")!;
    assert.ok(texts(flaky.body).includes("80 µs (1 failed)"), flaky.body);
  });

  it("reads a report that went through JSON (NaN as null)", () => {
    const parsed = JSON.parse(
      JSON.stringify(REPORT, (_k, v) => Number.isNaN(v) ? null : v),
    ) as BenchReport;
    assert.equal(renderSvg(parsed), svg);
  });
});
