/**
 * Telling a plain JSON object from the other values a parsed document may hold.
 *
 * @example
 * ```ts
 * import { isObject } from "./is_object.ts";
 * console.assert(isObject({ a: 1 }) && !isObject([1]) && !isObject(null));
 * ```
 *
 * @module
 */

/** A plain object: not null, not an array. */
export const isObject = (v: unknown): v is Record<string, unknown> =>
  typeof v === "object" && v !== null && !Array.isArray(v);
