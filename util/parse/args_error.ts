/**
 * One plain line for a command-line mistake that `node:util`'s `parseArgs` threw: the flag named
 * without its quotes, a close known flag suggested, and a hint where one flag is a known mistake.
 *
 * @module
 */

import { closest } from "./suggest.ts";

/**
 * Explains `error` from `parseArgs` given the command's `options` (as passed to it); `hints`
 * maps a flag (`--token`) to what to say instead of a suggestion.
 *
 * @example
 * ```ts
 * import { argsErrorMessage } from "./args_error.ts";
 * const error = Object.assign(new Error("Unknown option '--expsoe'"), {
 *   code: "ERR_PARSE_ARGS_UNKNOWN_OPTION",
 * });
 * const message = argsErrorMessage(error, { expose: { type: "string" } });
 * console.assert(message === "unknown option --expsoe (did you mean --expose?)");
 * ```
 */
export function argsErrorMessage(
  error: Error,
  options: Readonly<Record<string, unknown>>,
  hints: Record<string, string> = {},
): string {
  const code = (error as { code?: unknown }).code;
  const quoted = /'([^']+)'/.exec(error.message)?.[1];
  if (code === "ERR_PARSE_ARGS_UNKNOWN_OPTION" && quoted) {
    if (hints[quoted] !== undefined) return `unknown option ${quoted}: ${hints[quoted]}`;
    const known = Object.keys(options).map((name) => `--${name}`);
    const near = quoted.startsWith("--") ? closest(quoted, known) : undefined;
    return `unknown option ${quoted}${near ? ` (did you mean ${near}?)` : ""}`;
  }
  if (code === "ERR_PARSE_ARGS_INVALID_OPTION_VALUE" && quoted) {
    // "-p, --port <value>" names the flag twice; the long name is the one --help lists.
    const names = quoted.split(" ").map((part) => part.replace(/,$/, ""));
    const flag = names.find((part) => part.startsWith("--")) ?? names[0];
    return /argument missing/.test(error.message)
      ? `${flag} needs a value`
      : `${flag} takes no value`;
  }
  if (code === "ERR_PARSE_ARGS_UNEXPECTED_POSITIONAL" && quoted) {
    return `unexpected argument "${quoted}"`;
  }
  return error.message;
}
