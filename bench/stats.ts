/**
 * Medians, ranges and per-round paired ratios over benchmark samples.
 *
 * @module
 */

/** Median, min and max of the finite values (NaN fields when there are none). */
export interface Spread {
  median: number;
  min: number;
  max: number;
  /** How many finite values went in. */
  n: number;
}

/** Summarizes `values`, ignoring NaN (failed rounds). */
export function spread(values: readonly number[]): Spread {
  const sorted = values.filter(Number.isFinite).sort((a, b) => a - b);
  const n = sorted.length;
  if (n === 0) return { median: NaN, min: NaN, max: NaN, n };
  const mid = n >> 1;
  const median = n % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
  return { median, min: sorted[0], max: sorted[n - 1], n };
}

/**
 * Ratios `a[i] / b[i]` of the same round (pairing cancels drift that hits both alike), then
 * summarized; rounds where either side failed are skipped.
 */
export function pairedRatio(a: readonly number[], b: readonly number[]): Spread {
  const ratios: number[] = [];
  for (let i = 0; i < Math.min(a.length, b.length); i++) {
    if (Number.isFinite(a[i]) && Number.isFinite(b[i]) && b[i] !== 0) ratios.push(a[i] / b[i]);
  }
  return spread(ratios);
}
