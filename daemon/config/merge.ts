/**
 * Small helpers shared by configuration validation and loading.
 *
 * @module
 */

import { isObject } from "../../util/is_object.ts";

/** Sets an own property, even for `__proto__`, so a hostile key is reported, never applied. */
export function setOwn(target: Record<string, unknown>, key: string, value: unknown): void {
  Object.defineProperty(target, key, {
    value,
    enumerable: true,
    writable: true,
    configurable: true,
  });
}

/** Deep-merges `over` onto `base`: objects merge key by key; arrays and scalars replace. */
export function mergeLayers(base: unknown, over: unknown): unknown {
  if (!isObject(base) || !isObject(over)) return over;
  const out: Record<string, unknown> = {};
  for (const key of Object.keys(base)) setOwn(out, key, base[key]);
  for (const key of Object.keys(over)) setOwn(out, key, mergeLayers(out[key], over[key]));
  return out;
}

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

/** A " (did you mean …?)" hint naming the closest known word, or "". */
export function suggest(word: string, known: readonly string[]): string {
  const best = known.map((k) => [k, distance(word.toLowerCase(), k.toLowerCase())] as const)
    .sort((x, y) => x[1] - y[1])[0];
  return best && best[1] <= 3 ? ` (did you mean "${best[0]}"?)` : "";
}
