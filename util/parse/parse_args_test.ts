import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { parseArgs as nodeParseArgs } from "node:util";
import { parseArgs, type ParseArgsError } from "./parse_args.ts";
import { argsErrorMessage } from "./args_error.ts";

const OPTIONS = {
  server: { type: "string", multiple: true },
  token: { type: "string" },
  port: { type: "string", short: "p" },
  help: { type: "boolean", short: "h" },
  verbose: { type: "boolean", short: "v" },
  quiet: { type: "boolean", multiple: true, short: "q" },
} as const;

/** What a parse gives, comparable across the two parsers: values and positionals, or the error. */
function outcome(parse: () => { values: object; positionals: string[] }) {
  try {
    const { values, positionals } = parse();
    return { values: { ...values }, positionals };
  } catch (error) {
    const { code } = error as { code?: string };
    // The first quoted part is what util/parse/args_error.ts reads from a message.
    return { code, quoted: /'([^']+)'/.exec((error as Error).message)?.[1] };
  }
}

const CASES: string[][] = [
  [],
  ["--server", "tcp://a:1"],
  ["--server=tcp://a:1", "--server", "ws://b/tunnel"],
  ["--token", "x", "--token", "y"],
  ["--token="],
  ["--token=a=b"],
  ["-p", "80"],
  ["-p80"],
  ["-hv"],
  ["-vp", "9"],
  ["-qq", "-q"],
  ["--help"],
  ["-h", "pos"],
  ["pos1", "--verbose", "pos2"],
  ["--", "--help", "-x"],
  ["--token", "-"],
  ["--token"],
  ["-p"],
  ["--help=yes"],
  ["--expsoe", "1"],
  ["-x"],
  ["--constructor"],
  ["--__proto__"],
];

describe("parseArgs", () => {
  for (const allowPositionals of [true, false]) {
    it(`reads what node:util's parseArgs reads (allowPositionals ${allowPositionals})`, () => {
      for (const args of CASES) {
        const ours = outcome(() => parseArgs({ args, options: OPTIONS, allowPositionals }));
        const theirs = outcome(() =>
          nodeParseArgs({ args, options: OPTIONS, allowPositionals, strict: true })
        );
        assert.deepEqual(ours, theirs, JSON.stringify(args));
      }
    });
  }

  it("names a forgotten value where node:util calls it ambiguous", () => {
    const args = ["--token", "--server", "tcp://a:1"];
    assert.throws(
      () => parseArgs({ args, options: OPTIONS }),
      (error: ParseArgsError) => error.code === "ERR_PARSE_ARGS_INVALID_OPTION_VALUE",
    );
    try {
      parseArgs({ args, options: OPTIONS });
    } catch (error) {
      assert.equal(argsErrorMessage(error as Error, OPTIONS), "--token needs a value");
    }
  });

  it("gives args_error.ts what it explains", () => {
    const explain = (args: string[]) => {
      try {
        parseArgs({ args, options: OPTIONS });
        return "";
      } catch (error) {
        return argsErrorMessage(error as Error, OPTIONS);
      }
    };
    assert.equal(explain(["--servr", "x"]), "unknown option --servr (did you mean --server?)");
    assert.equal(explain(["--help=1"]), "--help takes no value");
    assert.equal(explain(["-p"]), "--port needs a value");
    assert.equal(explain(["stray"]), 'unexpected argument "stray"');
    // Bun's node:util names only the letter here; Node and Deno name "-x".
    assert.equal(explain(["-hx"]), "unknown option -x");
  });
});
