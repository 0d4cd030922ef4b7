/**
 * JSON with comments and trailing commas (JSONC), as config files are written by hand. Comment
 * markers inside strings are left alone, and parse errors name a line and column.
 *
 * @module
 */

import { findJsonSyntaxError } from "./json_syntax_error.ts";

/** Result of {@link parseJsonc}. */
export type JsoncResult = { ok: true; value: unknown } | { ok: false; error: string };

function lineCol(text: string, index: number): string {
  const before = text.slice(0, index);
  const line = before.split("\n").length;
  return `line ${line} column ${index - before.lastIndexOf("\n")}`;
}

/**
 * Removes `//` and `/* *\/` comments and trailing commas from JSONC, leaving strings untouched
 * (a `"//"` or `","` inside a string stays). Comments become spaces and newlines are kept, so
 * JSON parse positions still point at the right line. Throws on an unterminated block comment.
 */
export function stripJsonc(text: string): string {
  let out = "";
  let i = 0;
  let lastSignificant = ""; // the last non-space character kept outside comments
  let pendingComma = -1; // index in `out` of a comma that a `}` or `]` may turn into a space
  while (i < text.length) {
    const c = text[i];
    if (c === '"') {
      let j = i + 1;
      while (j < text.length && text[j] !== '"' && text[j] !== "\n") j += text[j] === "\\" ? 2 : 1;
      out += text.slice(i, j + 1);
      i = j + 1;
      lastSignificant = '"';
      pendingComma = -1;
    } else if (c === "/" && text[i + 1] === "/") {
      const end = text.indexOf("\n", i);
      const stop = end < 0 ? text.length : end;
      out += " ".repeat(stop - i);
      i = stop;
    } else if (c === "/" && text[i + 1] === "*") {
      const end = text.indexOf("*/", i + 2);
      if (end < 0) throw new SyntaxError(`unterminated /* comment at ${lineCol(text, i)}`);
      out += text.slice(i, end + 2).replace(/[^\n]/g, " ");
      i = end + 2;
    } else {
      if ((c === "}" || c === "]") && pendingComma >= 0) {
        out = out.slice(0, pendingComma) + " " + out.slice(pendingComma + 1);
      }
      if (!/\s/.test(c)) {
        // A comma right after `[`, `{` or another comma is not trailing: leave it for JSON.parse.
        pendingComma = c === "," && !"[{,".includes(lastSignificant) ? out.length : -1;
        lastSignificant = c;
      }
      out += c;
      i++;
    }
  }
  return out;
}

/**
 * Parses JSON with comments and trailing commas. Errors name the line and column of the first
 * offending character on every runtime (Bun's `JSON.parse` messages carry no position).
 */
export function parseJsonc(text: string): JsoncResult {
  const source = text.startsWith("\uFEFF") ? text.slice(1) : text;
  let stripped: string;
  try {
    stripped = stripJsonc(source);
  } catch (error) {
    return { ok: false, error: (error as Error).message };
  }
  try {
    return { ok: true, value: JSON.parse(stripped) };
  } catch (error) {
    // Comments became spaces of the same length, so offsets in `stripped` are offsets in `source`.
    const found = findJsonSyntaxError(stripped);
    if (found) return { ok: false, error: `${found.message} at ${lineCol(source, found.index)}` };
    return { ok: false, error: error instanceof Error ? error.message : String(error) };
  }
}
