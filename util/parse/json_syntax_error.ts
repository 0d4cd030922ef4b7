/**
 * Finds where JSON text stops being JSON. `JSON.parse` says why on every runtime but not always
 * where: Bun's messages carry no position at all, and V8's omit it for an unexpected token. A
 * config error without a line sends the operator hunting, so this small scanner, run only after
 * `JSON.parse` has failed, names the first offending character the same way on every runtime.
 *
 * @module
 */

/** The first syntax error in a JSON text: its offset and what was expected there. */
export interface JsonSyntaxError {
  /** Offset (UTF-16 code units) of the first character that cannot continue the text. */
  index: number;
  /** What is wrong there, e.g. `unexpected '}': expected a value`. */
  message: string;
}

/** Thrown inside the scanner only; caught by {@linkcode findJsonSyntaxError}. */
class Stop {
  constructor(readonly index: number, readonly message: string) {}
}

const WHITESPACE = new Set([" ", "\t", "\n", "\r"]);
const NUMBER = /^-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?/;
const ESCAPES = new Set(['"', "\\", "/", "b", "f", "n", "r", "t"]);

/**
 * Returns the first syntax error in `text`, or `undefined` if it is valid JSON.
 *
 * @example
 * ```ts
 * import { findJsonSyntaxError } from "./json_syntax_error.ts";
 * const error = findJsonSyntaxError('{"a": }');
 * console.assert(error?.index === 6);
 * ```
 */
export function findJsonSyntaxError(text: string): JsonSyntaxError | undefined {
  let i = 0;
  const describe = (): string =>
    i >= text.length ? "unexpected end of input" : `unexpected ${JSON.stringify(text[i])}`;
  const fail = (expected: string): never => {
    throw new Stop(i, `${describe()}: expected ${expected}`);
  };
  const skipSpace = () => {
    while (i < text.length && WHITESPACE.has(text[i])) i++;
  };
  const string = () => {
    i++; // the opening quote
    while (i < text.length && text[i] !== '"') {
      const code = text.charCodeAt(i);
      if (code < 0x20) throw new Stop(i, "control character in a string: escape it");
      if (text[i] === "\\") {
        const next = text[i + 1];
        if (next === "u" && /^[0-9a-fA-F]{4}$/.test(text.slice(i + 2, i + 6))) i += 6;
        else if (next !== undefined && ESCAPES.has(next)) i += 2;
        else throw new Stop(i, "invalid escape in a string");
      } else i++;
    }
    if (i >= text.length) fail("'\"' to end the string");
    i++;
  };
  const value = (depth: number): void => {
    if (depth > 512) throw new Stop(i, "nested too deeply");
    skipSpace();
    const c = text[i];
    if (c === "{") return object(depth);
    if (c === "[") return array(depth);
    if (c === '"') return string();
    for (const word of ["true", "false", "null"]) {
      if (text.startsWith(word, i)) {
        i += word.length;
        return;
      }
    }
    const number = NUMBER.exec(text.slice(i, i + 400));
    if (number) {
      i += number[0].length;
      return;
    }
    if (c === "'") throw new Stop(i, "single quotes: JSON strings use double quotes");
    fail("a value");
  };
  const object = (depth: number) => {
    i++;
    skipSpace();
    if (text[i] === "}") return void i++;
    for (;;) {
      skipSpace();
      if (text[i] !== '"') fail("a property name in double quotes");
      string();
      skipSpace();
      if (text[i] !== ":") fail("':' after the property name");
      i++;
      value(depth + 1);
      skipSpace();
      if (text[i] === "}") return void i++;
      if (text[i] !== ",") fail("',' or '}'");
      i++;
    }
  };
  const array = (depth: number) => {
    i++;
    skipSpace();
    if (text[i] === "]") return void i++;
    for (;;) {
      value(depth + 1);
      skipSpace();
      if (text[i] === "]") return void i++;
      if (text[i] !== ",") fail("',' or ']'");
      i++;
    }
  };
  try {
    value(0);
    skipSpace();
    if (i < text.length) fail("the end of the text after the top-level value");
    return undefined;
  } catch (error) {
    if (error instanceof Stop) return { index: error.index, message: error.message };
    throw error;
  }
}
