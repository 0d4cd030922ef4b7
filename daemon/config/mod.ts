/**
 * The daemon configuration: types, embedded defaults, validation and loading.
 *
 * Layers, later winning: embedded defaults < config file (JSON or JSONC) < `TUNNELMUX_*`
 * environment < command-line flags. Validation reports every problem with its JSON path at once.
 *
 * @module
 */

export type * from "./types.ts";
export { parseJsonc, stripJsonc } from "../../util/parse/jsonc.ts";
export type { JsoncResult } from "../../util/parse/jsonc.ts";
export { mergeLayers } from "./merge.ts";
export { validateConfig } from "./validate.ts";
export { embeddedDefaults } from "./defaults.ts";
export { formatConfigReport, loadConfig } from "./load.ts";
export type { ConfigFlags, LoadOptions, LoadResult } from "./load.ts";
