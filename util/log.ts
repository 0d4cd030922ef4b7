/**
 * Structured logging: one JSON object per line for machines, or a readable line on a terminal.
 * Fields carry context (session, client, stream, tunnel); tokens are never passed in.
 *
 * @module
 */

/** Severity, lowest first. */
export type LogLevel = "debug" | "info" | "warn" | "error";

/** Context fields of a log line. */
export type LogFields = Record<string, string | number | boolean | undefined>;

const RANK: Record<LogLevel, number> = { debug: 10, info: 20, warn: 30, error: 40 };

/** Where lines go; tests capture them. */
export type LogSink = (line: string) => void;

/**
 * Writes log lines at or above a level, in JSON or pretty form.
 *
 * @example
 * ```ts
 * import { Logger } from "./log.ts";
 * const lines: string[] = [];
 * const log = new Logger({ level: "info", format: "json", sink: (l) => lines.push(l) });
 * log.child({ session: "s1" }).info("session opened", { client: "laptop" });
 * console.assert(JSON.parse(lines[0]).session === "s1");
 * ```
 */
export class Logger {
  readonly #level: number;
  readonly #format: "json" | "pretty";
  readonly #sink: LogSink;
  readonly #context: LogFields;

  /** Creates a logger; `context` fields go on every line. */
  constructor(
    options: { level: LogLevel; format: "json" | "pretty"; sink: LogSink },
    context: LogFields = {},
  ) {
    this.#level = RANK[options.level];
    this.#format = options.format;
    this.#sink = options.sink;
    this.#context = context;
  }

  /** A logger that adds `fields` to every line. */
  child(fields: LogFields): Logger {
    const options = { level: levelOf(this.#level), format: this.#format, sink: this.#sink };
    return new Logger(options, { ...this.#context, ...fields });
  }

  /** Diagnostic detail. */
  debug(message: string, fields?: LogFields): void {
    this.#write("debug", message, fields);
  }

  /** Normal operation. */
  info(message: string, fields?: LogFields): void {
    this.#write("info", message, fields);
  }

  /** Something was refused or went wrong for one client; the daemon is fine. */
  warn(message: string, fields?: LogFields): void {
    this.#write("warn", message, fields);
  }

  /** The daemon itself has a problem. */
  error(message: string, fields?: LogFields): void {
    this.#write("error", message, fields);
  }

  #write(level: LogLevel, message: string, fields: LogFields | undefined): void {
    if (RANK[level] < this.#level) return;
    const all: LogFields = { ...this.#context, ...fields };
    if (this.#format === "json") {
      this.#sink(JSON.stringify({ time: new Date().toISOString(), level, msg: message, ...all }));
      return;
    }
    const context = Object.entries(all)
      .filter(([, value]) => value !== undefined)
      .map(([key, value]) =>
        `${key}=${typeof value === "string" && /\s/.test(value) ? JSON.stringify(value) : value}`
      )
      .join(" ");
    const time = new Date().toISOString().slice(11, 23);
    this.#sink(
      `${time} ${level.toUpperCase().padEnd(5)} ${message}${context ? `  ${context}` : ""}`,
    );
  }
}

function levelOf(rank: number): LogLevel {
  return (Object.keys(RANK) as LogLevel[]).find((level) => RANK[level] === rank)!;
}
