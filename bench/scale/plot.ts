/**
 * The scale bench's curves as one self-contained SVG document: a line chart per measure, stacked,
 * with N on a logarithmic x axis (1 … 100,000) and one line per implementation, tunnelmux's in
 * color. Like `../svg.ts`, no outside fonts, scripts or styles.
 *
 * @module
 */

import { escapeXml, formatValue } from "../svg.ts";

/** One line of a chart. */
export interface Series {
  /** The implementation's name. */
  name: string;
  /** Points in increasing x. */
  points: { x: number; y: number }[];
}

/** One chart. */
export interface Chart {
  /** What is plotted, with its unit. */
  title: string;
  /** One line per implementation. */
  series: Series[];
}

const WIDTH = 800;
const MARGIN = 16;
const PLOT_LEFT = 70;
const PLOT_WIDTH = 520;
const PLOT_HEIGHT = 180;
const CHART_HEIGHT = PLOT_HEIGHT + 70;
const HEADER_HEIGHT = 40;
const LEGEND_X = PLOT_LEFT + PLOT_WIDTH + 20;

/** Line colors: tunnelmux's in warm colors, the others in grey and blue. */
function color(name: string, index: number): string {
  if (name.startsWith("tunnelmux-deno")) return "#d9480f";
  if (name.startsWith("tunnelmux-bun")) return "#f59f00";
  return ["#495057", "#1c7ed6", "#868e96"][index % 3];
}

/** Powers of ten from the smallest x to the largest. */
function decades(min: number, max: number): number[] {
  const out = [];
  for (let p = Math.floor(Math.log10(min)); p <= Math.ceil(Math.log10(max)); p++) out.push(10 ** p);
  return out;
}

function renderChart(chart: Chart, top: number): string {
  const points = chart.series.flatMap((s) => s.points);
  const parts = [
    `<text x="${MARGIN}" y="${top + 16}" font-size="14" font-weight="bold">${
      escapeXml(chart.title)
    }</text>`,
  ];
  if (points.length === 0) {
    parts.push(`<text x="${PLOT_LEFT}" y="${top + 50}" font-size="12">no data</text>`);
    return parts.join("\n");
  }
  const ticks = decades(Math.min(...points.map((p) => p.x)), Math.max(...points.map((p) => p.x)));
  const [lo, hi] = [Math.log10(ticks[0]), Math.log10(ticks.at(-1)!)];
  const yMax = Math.max(...points.map((p) => p.y), 0) * 1.1 || 1;
  const plotTop = top + 30;
  const x = (v: number) =>
    PLOT_LEFT + (hi === lo ? 0 : (Math.log10(v) - lo) / (hi - lo)) * PLOT_WIDTH;
  const y = (v: number) => plotTop + PLOT_HEIGHT - (v / yMax) * PLOT_HEIGHT;
  parts.push(
    `<rect x="${PLOT_LEFT}" y="${plotTop}" width="${PLOT_WIDTH}" height="${PLOT_HEIGHT}" fill="none" stroke="#ced4da"/>`,
  );
  for (const tick of ticks) {
    parts.push(
      `<line x1="${x(tick)}" y1="${plotTop}" x2="${x(tick)}" y2="${
        plotTop + PLOT_HEIGHT
      }" stroke="#f1f3f5"/>`,
      `<text x="${x(tick)}" y="${plotTop + PLOT_HEIGHT + 14}" font-size="11" text-anchor="middle">${
        tick.toLocaleString("en-US")
      }</text>`,
    );
  }
  for (const fraction of [0, 0.5, 1]) {
    const value = (yMax / 1.1) * fraction;
    parts.push(
      `<text x="${PLOT_LEFT - 6}" y="${y(value) + 4}" font-size="11" text-anchor="end">${
        formatValue(value)
      }</text>`,
    );
  }
  chart.series.forEach((series, index) => {
    const stroke = color(series.name, index);
    const path = series.points.map((p) => `${x(p.x).toFixed(1)},${y(p.y).toFixed(1)}`).join(" ");
    parts.push(
      `<polyline points="${path}" fill="none" stroke="${stroke}" stroke-width="2"/>`,
      ...series.points.map((p) =>
        `<circle cx="${x(p.x).toFixed(1)}" cy="${
          y(p.y).toFixed(1)
        }" r="3" fill="${stroke}"><title>${
          escapeXml(`${series.name}, N=${p.x}: ${formatValue(p.y)}`)
        }</title></circle>`
      ),
      `<text x="${LEGEND_X}" y="${plotTop + 14 + index * 18}" font-size="12" fill="${stroke}">${
        escapeXml(series.name)
      }</text>`,
    );
  });
  return parts.join("\n");
}

/** The charts as one SVG document under `title`. */
export function renderCurves(title: string, charts: readonly Chart[]): string {
  const height = HEADER_HEIGHT + charts.length * CHART_HEIGHT + MARGIN;
  const body = charts.map((chart, i) => renderChart(chart, HEADER_HEIGHT + i * CHART_HEIGHT));
  return [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${WIDTH}" height="${height}" viewBox="0 0 ${WIDTH} ${height}" font-family="sans-serif">`,
    `<rect width="100%" height="100%" fill="white"/>`,
    `<text x="${MARGIN}" y="26" font-size="18" font-weight="bold">${escapeXml(title)}</text>`,
    ...body,
    `</svg>`,
    "",
  ].join("\n");
}
