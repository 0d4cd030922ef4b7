import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { hashToken } from "../config/token_hash.ts";
import type { GroupConfig } from "../config/mod.ts";
import { joinGroup } from "./join_group.ts";

const KEY = "team-group-key-0123456789abcdef";
const GROUPS: Record<string, GroupConfig> = {
  team: { keyHash: hashToken(KEY), balance: "least_connections" },
  other: { keyHash: hashToken(KEY), balance: "round_robin" },
};
const ALICE = { name: "alice", groups: ["team", "gone"] };

describe("joinGroup", () => {
  it("without a group, the client owns what it asks for", () => {
    assert.deepEqual(joinGroup(ALICE, GROUPS, undefined, undefined), {
      owner: "client:alice",
      balance: undefined,
    });
  });

  it("with the group's key, the group owns it and its balance applies", () => {
    assert.deepEqual(joinGroup(ALICE, GROUPS, "team", KEY), {
      owner: "group:team",
      balance: "least_connections",
    });
  });

  it("refuses a group the client may not join, or that is not configured", () => {
    assert.equal(joinGroup(ALICE, GROUPS, "other", KEY), "this client may not join group other");
    assert.equal(joinGroup(ALICE, GROUPS, "gone", KEY), "this client may not join group gone");
  });

  it("refuses a wrong or missing key", () => {
    assert.equal(joinGroup(ALICE, GROUPS, "team", `${KEY}x`), "wrong key for group team");
    assert.equal(joinGroup(ALICE, GROUPS, "team", undefined), "wrong key for group team");
  });
});
