import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { closest, suggest } from "./suggest.ts";

describe("suggest", () => {
  it("names the closest known word within 3 edits", () => {
    assert.equal(closest("expsoe", ["expose", "offer", "http"]), "expose");
    assert.equal(closest("--listen-tpc", ["--listen-tcp", "--listen-ws"]), "--listen-tcp");
    assert.equal(closest("LISTNE", ["listen"]), "listen", "case does not count");
    assert.equal(suggest("sever", ["server", "name"]), ' (did you mean "server"?)');
  });

  it("says nothing when no word is close, or none is known", () => {
    assert.equal(closest("retries", ["server", "name"]), undefined);
    assert.equal(suggest("retries", ["server"]), "");
    assert.equal(suggest("x", []), "");
  });
});
