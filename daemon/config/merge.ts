/**
 * Small helpers shared by configuration validation and loading.
 *
 * @module
 */

import { isObject } from "../../util/parse/is_object.ts";

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

/** A " (did you mean …?)" hint naming the closest known word, or "" (shared with the client). */
export { suggest } from "../../util/parse/suggest.ts";
