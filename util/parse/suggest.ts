/**
 * "Did you mean …?" hints for a mistyped word (a flag, a config key, a variable): the closest
 * known word by edit distance, when it is close enough to be the likely intent.
 *
 * @module
 */

/** Levenshtein distance between `a` and `b`. */
function distance(a: string, b: string): number {
  const row = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    let prev = row[0]++;
    for (let j = 1; j <= b.length; j++) {
      const next = Math.min(row[j] + 1, row[j - 1] + 1, prev + (a[i - 1] === b[j - 1] ? 0 : 1));
      prev = row[j];
      row[j] = next;
    }
  }
  return row[b.length];
}

/**
 * The known word closest to `word` (case-insensitive) when at most 3 edits away, else undefined.
 *
 * @example
 * ```ts
 * import { closest } from "./suggest.ts";
 * console.assert(closest("expsoe", ["expose", "http"]) === "expose");
 * ```
 */
export function closest(word: string, known: readonly string[]): string | undefined {
  const best = known.map((k) => [k, distance(word.toLowerCase(), k.toLowerCase())] as const)
    .sort((x, y) => x[1] - y[1])[0];
  return best && best[1] <= 3 ? best[0] : undefined;
}

/** A " (did you mean …?)" hint naming the closest known word, or "". */
export function suggest(word: string, known: readonly string[]): string {
  const best = closest(word, known);
  return best !== undefined ? ` (did you mean "${best}"?)` : "";
}
