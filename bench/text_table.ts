/**
 * Plain-text tables for the bench's stdout: the first column left-aligned, the rest right-aligned.
 *
 * @example
 * ```ts
 * import { textTable } from "./text_table.ts";
 * console.log(textTable(["impl", "MiB/s"], [["tunnelmux-deno", "631"]]));
 * ```
 *
 * @module
 */

/** Renders `rows` under `header`, with a dashed rule between them. */
export function textTable(header: string[], rows: string[][]): string {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i].length)));
  const line = (cells: string[]) =>
    cells.map((c, i) => (i === 0 ? c.padEnd(widths[i]) : c.padStart(widths[i]))).join("  ");
  return [line(header), widths.map((w) => "-".repeat(w)).join("  "), ...rows.map(line)].join("\n");
}
