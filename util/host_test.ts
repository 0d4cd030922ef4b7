import { describe, it } from "node:test";
import assert from "node:assert/strict";
import process from "node:process";
import { hostArgs, hostCwd, hostEnv, nodeBuiltin, stderrIsTerminal } from "./host.ts";

describe("host", () => {
  it("answers what node:process answers for the environment and the working directory", () => {
    assert.equal(hostEnv().PATH, process.env.PATH);
    assert.equal(hostCwd(), process.cwd());
    assert.ok(Array.isArray(hostArgs()));
    assert.equal(typeof stderrIsTerminal(), "boolean");
  });

  it("loads a Node built-in when asked", () => {
    assert.equal(
      nodeBuiltin("node:crypto").createHash("sha1").update("x").digest("hex").length,
      40,
    );
  });
});
