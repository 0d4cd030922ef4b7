/** Password hashes for basic auth: made, verified in constant time, their cost bounded. */

import { describe, it } from "node:test";
import assert from "node:assert/strict";
import {
  hashPassword,
  hashPasswordSync,
  parsePasswordHash,
  verifyPassword,
} from "./password_hash.ts";

describe("password hashes", () => {
  it("verifies the password it was made from, and nothing else", async () => {
    const hash = await hashPassword("correct horse");
    assert.match(hash, /^scrypt:32768:8:1:[A-Za-z0-9_-]{22}:[A-Za-z0-9_-]{43}$/);
    assert.ok(await verifyPassword("correct horse", hash));
    assert.ok(!(await verifyPassword("correct horsf", hash)));
    assert.ok(!(await verifyPassword("", hash)));
    assert.notEqual(await hashPassword("correct horse"), hash, "a salt of its own each time");
    const sync = hashPasswordSync("correct horse");
    assert.ok(await verifyPassword("correct horse", sync), "the blocking form makes the same kind");
  });

  it("refuses a changed hash, and a hash that is not one", async () => {
    const hash = await hashPassword("pw");
    const last = hash.at(-2) === "A" ? "B" : "A";
    const changed = `${hash.slice(0, -2)}${last}${hash.at(-1)}`;
    assert.ok(!(await verifyPassword("pw", changed)));
    for (const bad of ["", "pw", "sha256:abc", "scrypt:garbage", hash.replace(":8:", ":x:")]) {
      assert.equal(typeof parsePasswordHash(bad), "string", bad);
      assert.ok(!(await verifyPassword("pw", bad)), bad);
    }
  });

  it("bounds the cost a hash may ask of the daemon", () => {
    const salt = "A".repeat(22);
    const key = "B".repeat(43);
    const cost = (n: number, r: number, p: number) =>
      parsePasswordHash(`scrypt:${n}:${r}:${p}:${salt}:${key}`);
    assert.equal(typeof cost(16384, 8, 1), "object");
    assert.equal(typeof cost(65536, 8, 1), "object", "64 MiB: at the bound");
    assert.match(cost(131072, 8, 1) as string, /memory bound/);
    assert.match(cost(16384, 64, 1) as string, /memory bound/);
    assert.match(cost(8192, 8, 1) as string, /at least 16384/);
    assert.match(cost(20000, 8, 1) as string, /power of two/);
    assert.match(cost(16384, 8, 5) as string, /p 1 to 4/);
  });
});
