import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { parseArgs } from "node:util";
import { argsErrorMessage } from "./args_error.ts";

const OPTIONS = {
  expose: { type: "string" },
  "listen-tcp": { type: "string" },
  shared: { type: "boolean" },
} as const;

/** The message for `args`, parsed by the real parseArgs. */
function messageFor(args: string[], hints?: Record<string, string>): string {
  try {
    parseArgs({ args, options: OPTIONS });
  } catch (error) {
    return argsErrorMessage(error as Error, OPTIONS, hints);
  }
  throw new Error(`${args.join(" ")} parsed`);
}

describe("argsErrorMessage", () => {
  it("suggests the close flag for a typo, and nothing for a stranger", () => {
    assert.equal(
      messageFor(["--expsoe", "1=h:2"]),
      "unknown option --expsoe (did you mean --expose?)",
    );
    assert.equal(
      messageFor(["--listen-tpc=x"]),
      "unknown option --listen-tpc (did you mean --listen-tcp?)",
    );
    assert.equal(messageFor(["--retries", "3"]), "unknown option --retries");
    assert.equal(messageFor(["-x"]), "unknown option -x");
  });

  it("says a hint instead for a flag that is a known mistake", () => {
    const hints = { "--token": "use TUNNELMUX_TOKEN" };
    assert.equal(messageFor(["--token=abc"], hints), "unknown option --token: use TUNNELMUX_TOKEN");
  });

  it("names a missing or an unwanted value, and a stray argument", () => {
    assert.equal(messageFor(["--expose"]), "--expose needs a value");
    assert.equal(messageFor(["--shared=yes"]), "--shared takes no value");
    assert.equal(messageFor(["run"]), 'unexpected argument "run"');
  });
});
