/**
 * tunnelmux's version: what the `tunnelmux` command prints, the admin API reports and a cluster
 * node announces. A module of its own, importing nothing, so that printing it loads nothing else.
 *
 * @example
 * ```ts
 * import { VERSION } from "./version.ts";
 * console.assert(/^\d+\.\d+\.\d+/.test(VERSION));
 * ```
 *
 * @module
 */

/** The version of this tunnelmux, as package.json gives it. */
export const VERSION = "0.1.0";
