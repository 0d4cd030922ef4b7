/**
 * `--svg`: the {@linkcode BenchReport} as one self-contained SVG document, a chart per scenario
 * stacked top to bottom. Each chart has a horizontal bar per implementation (the median, with a
 * min–max whisker and the value printed), failed implementations written as "failed" rather than
 * left out, tunnelmux highlighted. Generic over scenarios and units: nothing here knows S1–S5.
 *
 * No fonts, scripts or styles from outside the file, so it renders the same wherever it is opened
 * (a CI artifact, a README, a browser from disk).
 *
 * @module
 */

import type { BenchReport, ResultRow } from "./report.ts";

const WIDTH = 800;
const MARGIN = 16;
/** Left column with the implementation names. */
const LABEL_WIDTH = 190;
/** The longest bar; the rest of the row holds the printed value. */
const BAR_AREA = 400;
const ROW_HEIGHT = 24;
const BAR_HEIGHT = 14;
const TITLE_HEIGHT = 40;
const CHART_GAP = 20;
const HEADER_HEIGHT = 52;

const COLOR_TUNNELMUX = "#d9480f";
const COLOR_OTHER = "#868e96";
const COLOR_FAILED = "#c92a2a";

/** Units where a smaller number is better; other units are rates. */
const LATENCY_UNITS = new Set(["ns", "µs", "us", "ms", "s"]);

/**
 * Escapes text for SVG character data and attribute values. Characters XML 1.0 forbids (control
 * characters, lone surrogates) would make the whole document unreadable: terminal color codes (a
 * worker's error message may carry them) are dropped, anything else becomes U+FFFD.
 */
export function escapeXml(text: string): string {
  return text
    // deno-lint-ignore no-control-regex
    .replace(/\x1b\[[0-9;]*[A-Za-z]/g, "")
    // deno-lint-ignore no-control-regex
    .replace(/[\x00-\x08\x0B\x0C\x0E-\x1F\uFFFE\uFFFF]|\p{Surrogate}/gu, "\uFFFD")
    .replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

/** A finite number, or undefined (JSON turns NaN into null, so both may come in). */
function finite(value: unknown): number | undefined {
  return typeof value === "number" && Number.isFinite(value) ? value : undefined;
}

/** A value as printed on a bar: whole above 100, three significant digits below. */
export function formatValue(x: number): string {
  if (Math.abs(x) >= 100) return Math.round(x).toString();
  return Number(x.toPrecision(3)).toString();
}

/** Whether lower is better: an explicit `higher` on the scenario wins, else the unit decides. */
function lowerIsBetter(scenario: BenchReport["scenarios"][number]): boolean {
  const higher = (scenario as { higher?: unknown }).higher;
  if (typeof higher === "boolean") return !higher;
  return LATENCY_UNITS.has(scenario.unit);
}

/** The scenario's rows, in the report's implementation order (unknown ones last, as they came). */
function rowsOf(report: BenchReport, scenario: string): ResultRow[] {
  const rows = report.results.filter((r) => r.scenario === scenario);
  const rank = (impl: string) => {
    const i = report.impls.indexOf(impl);
    return i < 0 ? report.impls.length : i;
  };
  return rows.map((row, i) => ({ row, i }))
    .sort((a, b) => rank(a.row.impl) - rank(b.row.impl) || a.i - b.i)
    .map(({ row }) => row);
}

function text(x: number, y: number, content: string, attrs = ""): string {
  return `<text x="${x}" y="${y}"${attrs ? " " + attrs : ""}>${escapeXml(content)}</text>`;
}

/** One row: name, then bar + whisker + value, or the word "failed". */
function renderRow(row: ResultRow, y: number, scale: number): string {
  const median = finite(row.median);
  const tunnelmux = row.impl.startsWith("tunnelmux");
  const parts = [
    `<g class="row" data-impl="${escapeXml(row.impl)}">`,
    text(
      LABEL_WIDTH - 8,
      y + BAR_HEIGHT - 3,
      row.impl,
      'text-anchor="end"' +
        (tunnelmux ? ' font-weight="bold"' : ""),
    ),
  ];
  if (median === undefined) {
    const why = row.error ? `: ${row.error.slice(0, 60)}` : "";
    parts.push(
      text(
        LABEL_WIDTH,
        y + BAR_HEIGHT - 3,
        `failed${why}`,
        `class="failed" fill="${COLOR_FAILED}"`,
      ),
      "</g>",
    );
    return parts.join("");
  }
  const width = median * scale;
  const min = finite(row.min) ?? median;
  const max = finite(row.max) ?? median;
  const mid = y + BAR_HEIGHT / 2;
  const range = `median ${formatValue(median)} ${row.unit}, min ${formatValue(min)}, max ${
    formatValue(max)
  }, ${row.n} round(s)`;
  parts.push(
    `<rect class="bar${tunnelmux ? " tunnelmux" : ""}" x="${LABEL_WIDTH}" y="${y}" ` +
      `width="${round(width)}" height="${BAR_HEIGHT}" fill="${
        tunnelmux ? COLOR_TUNNELMUX : COLOR_OTHER
      }"><title>${escapeXml(`${row.impl}: ${range}`)}</title></rect>`,
  );
  if (max > min) {
    const x1 = round(LABEL_WIDTH + min * scale);
    const x2 = round(LABEL_WIDTH + max * scale);
    parts.push(
      `<path class="whisker" d="M${x1} ${mid}H${x2}M${x1} ${mid - 4}V${mid + 4}M${x2} ${mid - 4}V${
        mid + 4
      }" stroke="#212529" stroke-width="1" fill="none"/>`,
    );
  }
  const notes = [
    formatValue(median),
    row.unit,
    ...(finite(row.p99) !== undefined ? [`(p99 ${formatValue(row.p99!)})`] : []),
    ...(row.failures > 0 ? [`(${row.failures} failed)`] : []),
  ];
  const valueX = LABEL_WIDTH + Math.max(width, max * scale) + 6;
  parts.push(text(round(valueX), y + BAR_HEIGHT - 3, notes.join(" "), 'class="value"'), "</g>");
  return parts.join("");
}

function round(x: number): number {
  return Math.round(x * 100) / 100;
}

/**
 * Renders `report` as an SVG document: a header line (date, machine, versions), then one
 * `<g class="chart">` per scenario in `report.scenarios`, with one `<g class="row">` per
 * implementation that has a result in it. Pure: no I/O, same input, same output.
 */
export function renderSvg(report: BenchReport): string {
  const charts: string[] = [];
  let y = HEADER_HEIGHT;
  for (const scenario of report.scenarios) {
    const rows = rowsOf(report, scenario.id);
    // One scale per chart, so the longest whisker (or bar) fills the bar area.
    const top = Math.max(
      0,
      ...rows.flatMap((r) => [finite(r.max), finite(r.median)].filter((v) => v !== undefined)),
    );
    const scale = top > 0 ? BAR_AREA / top : 0;
    const better = lowerIsBetter(scenario) ? "lower is better" : "higher is better";
    const height = TITLE_HEIGHT + rows.length * ROW_HEIGHT;
    const body = rows.map((row, i) => renderRow(row, TITLE_HEIGHT + i * ROW_HEIGHT, scale));
    charts.push(
      `<g class="chart" data-scenario="${
        escapeXml(scenario.id)
      }" transform="translate(${MARGIN},${y})">` +
        text(0, 16, `${scenario.id}: ${scenario.title}`, 'class="title" font-weight="bold"') +
        text(0, 32, `${scenario.unit}, ${better}; median, whisker min–max`, 'class="subtitle"') +
        body.join("") + "</g>",
    );
    y += height + CHART_GAP;
  }
  const env = report.env;
  const header = ["tunnelmux bench", env?.date].filter(Boolean).join(", ");
  const machine = [
    env?.cpus !== undefined ? `${env.cpus} CPUs` : undefined,
    env?.cpuModel,
    env?.deno,
    env?.bun !== undefined ? `bun ${env.bun}` : undefined,
    env?.go,
  ].filter(Boolean).join("; ");
  // Implementations the run left out (e.g. a foreign tunnel's binary missing), when the report
  // lists them: a chart without them should not read as if they had not been considered.
  const skipped = (report as { skipped?: { impl: string; reason: string }[] }).skipped ?? [];
  if (skipped.length) {
    const note = `not run: ${skipped.map((s) => `${s.impl} (${s.reason})`).join(", ")}`;
    charts.push(text(MARGIN, y + 4, note, 'class="skipped" font-size="10"'));
    y += 16;
  }
  const height = y + MARGIN - CHART_GAP;
  return [
    `<?xml version="1.0" encoding="UTF-8"?>`,
    `<svg xmlns="http://www.w3.org/2000/svg" width="${WIDTH}" height="${height}" ` +
    `viewBox="0 0 ${WIDTH} ${height}" font-family="sans-serif" font-size="12" fill="#212529">`,
    `<title>${escapeXml(header)}</title>`,
    `<rect width="${WIDTH}" height="${height}" fill="#ffffff"/>`,
    text(MARGIN, 20, header, 'class="header" font-size="14" font-weight="bold"'),
    text(MARGIN, 36, machine, 'class="machine" font-size="10"'),
    ...charts,
    "</svg>",
    "",
  ].join("\n");
}
