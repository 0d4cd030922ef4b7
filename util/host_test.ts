import { describe, it } from "node:test";
import assert from "node:assert/strict";
import process from "node:process";
import { realpathSync } from "node:fs";
import { pathToFileURL } from "node:url";
import { hostArgs, hostCwd, hostEnv, isMainModule, nodeBuiltin, stderrIsTerminal } from "./host.ts";

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

  it("takes import.meta.main where there is one, else compares the started script's file", () => {
    assert.equal(isMainModule({ main: true, url: "file:///elsewhere.js" } as ImportMeta), true);
    assert.equal(isMainModule({ main: false, url: import.meta.url } as ImportMeta), false);
    // Without `main` (Node 20): the module is the program when it is process.argv[1]'s file.
    const started = pathToFileURL(realpathSync(process.argv[1])).href;
    assert.equal(isMainModule({ url: started } as ImportMeta), true);
    assert.equal(isMainModule({ url: `${started}.other.js` } as ImportMeta), false);
  });
});
