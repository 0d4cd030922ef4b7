// The first minutes of a user: a mistyped flag, a flag that does not exist, a URL pointed at the
// wrong thing, a tunnel another client holds. Each is named in one line, and the exit status says
// what happened.
import { after, describe, it } from "node:test";
import assert from "node:assert/strict";
import process from "node:process";
import { baseEnv, cleanup, runCommand, runtimeArgs } from "../testing/mod.ts";

after(cleanup);

/** Runs `file args` under this runtime to its end, the token (if any) in the environment. */
function run(file: string, args: string[], token?: string) {
  const env = baseEnv();
  if (token !== undefined) env.TUNNELMUX_TOKEN = token;
  return runCommand(process.execPath, runtimeArgs(file, args), { env });
}

describe("flags", () => {
  it("a mistyped flag is answered with the flag meant, in one line, exit 2", async () => {
    const client = await run("client/main.ts", [
      "--server",
      "tcp://127.0.0.1:1",
      "--expsoe",
      "1=127.0.0.1:2",
    ]);
    assert.equal(client.code, 2, client.stderr);
    assert.equal(
      client.stderr.trim(),
      "client: unknown option --expsoe (did you mean --expose?) (see tunnelmux client --help)",
    );
    const daemon = await run("daemon/main.ts", ["--listen-tpc", "127.0.0.1:0"]);
    assert.equal(daemon.code, 2, daemon.stderr);
    assert.equal(
      daemon.stderr.trim(),
      "daemon: unknown option --listen-tpc (did you mean --listen-tcp?) (see tunnelmux daemon --help)",
      "one line, not the whole help",
    );
    const command = await run("daemon/main.ts", ["chekc"]);
    assert.equal(command.code, 2, command.stderr);
    assert.match(
      command.stderr.trim(),
      /^daemon: unknown command "chekc" \(did you mean "check"\?\)[^\n]*$/,
    );
  });

  it("--token points to TUNNELMUX_TOKEN and --token-file", async () => {
    const result = await run("client/main.ts", ["--server", "tcp://127.0.0.1:1", "--token", "abc"]);
    assert.equal(result.code, 2, result.stderr);
    assert.match(
      result.stderr,
      /^client: unknown option --token: .*TUNNELMUX_TOKEN.*--token-file FILE/,
    );
  });

  it("the usage lines name the command as it is typed", async () => {
    const daemon = await run("daemon/main.ts", ["--help"]);
    assert.match(daemon.stdout, /^ {2}tunnelmux daemon \[options\] /m);
    const client = await run("client/main.ts", ["--help"]);
    assert.match(client.stdout, /^ {2}tunnelmux client --server URL \[options\]$/m);
  });
});
