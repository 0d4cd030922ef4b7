/**
 * Command-line flags as `node:util`'s `parseArgs` reads them (strict mode), for the part of its
 * surface the daemon, the client and the `tunnelmux` command use: string and boolean flags,
 * `--flag value`, `--flag=value`, short letters (`-h`, grouped `-hv`), repeated flags, `--` and
 * positionals. It throws the same error codes with the same leading messages, so
 * `util/parse/args_error.ts` explains either. Why not `node:util` itself: on Deno, importing any
 * `node:` module loads the Node compatibility layer, about 40 ms of each start of the daemon and of
 * the client before the first tunnel opens.
 *
 * @example
 * ```ts
 * import { parseArgs } from "./parse_args.ts";
 * const { values, positionals } = parseArgs({
 *   args: ["--expose", "8080=127.0.0.1:3000", "-v", "extra"],
 *   allowPositionals: true,
 *   options: { expose: { type: "string", multiple: true }, verbose: { type: "boolean", short: "v" } },
 * });
 * console.assert(values.expose?.[0] === "8080=127.0.0.1:3000" && values.verbose === true);
 * console.assert(positionals[0] === "extra");
 * ```
 *
 * @module
 */

/** One flag's declaration, as `node:util`'s `parseArgs` takes it. */
export interface ArgOption {
  /** A string flag takes a value; a boolean flag takes none. */
  readonly type: "string" | "boolean";
  /** A one-letter alias (`-h`). */
  readonly short?: string;
  /** Collect every occurrence into an array instead of keeping the last. */
  readonly multiple?: boolean;
}

/** The flags a command knows, by long name. */
export type ArgOptions = Readonly<Record<string, ArgOption>>;

/** The value type of one declared flag. */
type ValueOf<O extends ArgOption> = O["type"] extends "string"
  ? (O["multiple"] extends true ? string[] : string)
  : (O["multiple"] extends true ? boolean[] : boolean);

/** The parsed flags: each declared flag's value, absent when not given. */
export type ArgValues<T extends ArgOptions> = { -readonly [K in keyof T]?: ValueOf<T[K]> };

/** What {@linkcode parseArgs} is given. */
export interface ParseArgsConfig<T extends ArgOptions> {
  /** The arguments after the script. */
  readonly args: readonly string[];
  /** The declared flags. */
  readonly options: T;
  /** Whether arguments that are not flags are accepted (default false: they are an error). */
  readonly allowPositionals?: boolean;
}

/** A command-line mistake, with `node:util`'s error code (`ERR_PARSE_ARGS_…`). */
export class ParseArgsError extends TypeError {
  /** `ERR_PARSE_ARGS_UNKNOWN_OPTION`, `…_INVALID_OPTION_VALUE` or `…_UNEXPECTED_POSITIONAL`. */
  readonly code: string;

  /** An error with `code` and `message`. */
  constructor(code: string, message: string) {
    super(message);
    this.name = "TypeError";
    this.code = code;
  }
}

/** How a flag is named in messages, as `node:util` names it: `--name`, or `-n, --name`. */
function shown(name: string, short: string | undefined): string {
  return short === undefined ? `--${name}` : `-${short}, --${name}`;
}

/**
 * Reads `config.args` against `config.options` in `node:util`'s strict mode; throws a
 * {@linkcode ParseArgsError} for an unknown flag, a missing or unexpected value, or a positional
 * where none is allowed.
 */
export function parseArgs<T extends ArgOptions>(
  config: ParseArgsConfig<T>,
): { values: ArgValues<T>; positionals: string[] } {
  const { args, options } = config;
  const values: Record<string, unknown> = {};
  const positionals: string[] = [];
  const byShort = new Map<string, string>();
  for (const [name, option] of Object.entries(options)) {
    if (option.short !== undefined) byShort.set(option.short, name);
  }
  const store = (name: string, value: string | boolean) => {
    if (options[name].multiple) {
      const list = (values[name] as unknown[] | undefined) ?? [];
      list.push(value);
      values[name] = list;
    } else {
      values[name] = value;
    }
  };
  const positional = (arg: string) => {
    if (!config.allowPositionals) {
      throw new ParseArgsError(
        "ERR_PARSE_ARGS_UNEXPECTED_POSITIONAL",
        `Unexpected argument '${arg}'. This command does not take positional arguments`,
      );
    }
    positionals.push(arg);
  };
  // A string flag takes the next argument unless it looks like a flag: `--server --expose`
  // is a forgotten value, not a server called "--expose".
  const takeValue = (name: string, i: number): string => {
    const next = args[i];
    if (next === undefined || (next.length > 1 && next[0] === "-")) {
      throw new ParseArgsError(
        "ERR_PARSE_ARGS_INVALID_OPTION_VALUE",
        `Option '${shown(name, options[name].short)} <value>' ` +
          "argument missing",
      );
    }
    return next;
  };
  for (let i = 0; i < args.length; i++) {
    const arg = args[i];
    if (arg === "--") {
      for (const rest of args.slice(i + 1)) positional(rest);
      break;
    }
    if (arg.startsWith("--")) {
      const eq = arg.indexOf("=");
      const name = eq === -1 ? arg.slice(2) : arg.slice(2, eq);
      const option = Object.hasOwn(options, name) ? options[name] : undefined;
      if (option === undefined) {
        throw new ParseArgsError(
          "ERR_PARSE_ARGS_UNKNOWN_OPTION",
          `Unknown option '--${name}'. To specify a positional argument starting with a '-', ` +
            `place it at the end of the command after '--', as in '-- "--${name}"`,
        );
      }
      if (option.type === "boolean") {
        if (eq !== -1) {
          throw new ParseArgsError(
            "ERR_PARSE_ARGS_INVALID_OPTION_VALUE",
            `Option '${shown(name, option.short)}' does not take an argument`,
          );
        }
        store(name, true);
      } else if (eq !== -1) {
        store(name, arg.slice(eq + 1));
      } else {
        store(name, takeValue(name, ++i));
      }
      continue;
    }
    if (arg.startsWith("-") && arg.length > 1) {
      for (let at = 1; at < arg.length; at++) {
        const letter = arg[at];
        const name = byShort.get(letter);
        if (name === undefined) {
          throw new ParseArgsError(
            "ERR_PARSE_ARGS_UNKNOWN_OPTION",
            `Unknown option '-${letter}'. To specify a positional argument starting with a '-', ` +
              `place it at the end of the command after '--', as in '-- "-${letter}"`,
          );
        }
        if (options[name].type === "boolean") {
          store(name, true);
        } else if (at + 1 < arg.length) {
          // `-pVALUE`: the rest of the group is the value.
          store(name, arg.slice(at + 1));
          break;
        } else {
          store(name, takeValue(name, ++i));
        }
      }
      continue;
    }
    positional(arg);
  }
  return { values: values as ArgValues<T>, positionals };
}
