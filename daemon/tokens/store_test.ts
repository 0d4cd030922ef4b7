// The token store and its file, without a daemon: atomic 0600 writes, damaged files refused,
// names reserved at once, a failed write minting nothing, and one timer for the nearest expiry.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { mkdir, mkdtemp, readdir, readFile, rm, stat, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import process from "node:process";
import { validateConfig } from "../config/mod.ts";
import { Logger } from "../../util/log.ts";
import { decodeTokenFile, encodeTokenFile } from "./file.ts";
import { writeFileAtomic } from "../../util/files/write_file_atomic.ts";
import { TokenNameConflict, TokenStore } from "./store.ts";

const config = validateConfig({
  listen: { admin: null },
  clients: [{ name: "alice", token: "store-test-token-0123456789abcdef" }],
}).config!;
const log = new Logger({ level: "error", format: "json", sink: () => {} });

describe("TokenStore", () => {
  let dir: string;
  before(async () => dir = await mkdtemp(join(tmpdir(), "tunnelmux-store-")));
  after(() => rm(dir, { recursive: true, force: true }));

  const store = (name: string, onChange = () => {}) =>
    new TokenStore({ dataDir: join(dir, name), log, onChange });

  it("writes atomically with mode 0600, leaving no temporary file", async () => {
    const path = join(dir, "atomic", "tokens.json");
    await writeFileAtomic(path, "one");
    await writeFileAtomic(path, "two");
    assert.equal(await readFile(path, "utf8"), "two");
    assert.deepEqual(await readdir(join(dir, "atomic")), ["tokens.json"]);
    if (process.platform !== "win32") assert.equal((await stat(path)).mode & 0o777, 0o600);
  });

  it("round-trips records through the file format", () => {
    const record = {
      id: "tok_0123456789abcdef",
      name: "bot",
      hash: "sha256:" + "a".repeat(64),
      scopes: { forward: ["127.0.0.1:80"] },
      createdAt: 1_700_000_000_000,
      expiresAt: null,
    };
    assert.deepEqual(decodeTokenFile(encodeTokenFile([record]), "f"), [record]);
    assert.throws(() => decodeTokenFile("{", "f"), /not valid JSON/);
    assert.throws(
      () =>
        decodeTokenFile(JSON.stringify({ version: 1, tokens: [{ ...record, hash: "x" }] }), "f"),
      /tokens\[0\]: bad hash/,
    );
  });

  it("refuses to load a damaged file, and loads a missing one as empty", async () => {
    await mkdir(join(dir, "damaged"));
    await writeFile(join(dir, "damaged", "tokens.json"), "not json");
    await assert.rejects(store("damaged").load(), /not valid JSON/);
    const empty = store("missing");
    await empty.load();
    assert.deepEqual(empty.list(), []);
  });

  it("reserves a name at once, so concurrent mints of one name cannot both succeed", async () => {
    const s = store("concurrent");
    const results = await Promise.allSettled([
      s.mint("bot", {}, null, config),
      s.mint("bot", {}, null, config),
    ]);
    assert.deepEqual(results.map((r) => r.status).sort(), ["fulfilled", "rejected"]);
    const failure = results.find((r) => r.status === "rejected") as PromiseRejectedResult;
    assert.ok(failure.reason instanceof TokenNameConflict);
    await assert.rejects(s.mint("alice", {}, null, config), TokenNameConflict);
    s.close();
  });

  it("mints nothing when the file cannot be written", async () => {
    // A file where the data directory should be: mkdir fails.
    await writeFile(join(dir, "blocked"), "");
    const s = store("blocked");
    await assert.rejects(s.mint("bot", {}, null, config));
    assert.deepEqual(s.list(), []);
    assert.deepEqual(s.clients(config), []);
  });

  it("drops expired tokens on their timer and reports the change", async () => {
    let changes = 0;
    const s = store("expiry", () => changes++);
    const soon = await s.mint("soon", {}, Date.now() + 50, config);
    await s.mint("later", {}, Date.now() + 3_600_000, config);
    assert.equal(s.clients(config).length, 2);
    const seen = changes;
    for (let i = 0; i < 500 && s.get(soon.record.id); i++) {
      await new Promise((r) => setTimeout(r, 10));
    }
    assert.equal(s.get(soon.record.id), undefined, "the expired token is gone");
    assert.ok(changes > seen, "the daemon was told");
    assert.deepEqual(s.clients(config).map((c) => c.name), ["later"]);
    s.close();
    await s.settled(); // the expiry's rewrite of the file, before the directory is removed
    const file = JSON.parse(await readFile(s.path, "utf8")) as { tokens: { name: string }[] };
    assert.deepEqual(file.tokens.map((t) => t.name), ["later"]);
  });

  it("gives a minted client the daemon-wide visitor rules", async () => {
    const s = store("visitors");
    await s.mint("bot", {}, null, config);
    const ruled = validateConfig({
      listen: { admin: null },
      visitors: { deny: ["198.51.100.0/24"] },
      clients: [{ name: "alice", token: "store-test-token-0123456789abcdef" }],
    }).config!;
    assert.deepEqual(s.clients(ruled)[0].visitors, { deny: ["198.51.100.0/24"] });
    assert.deepEqual(s.clients(config)[0].visitors, {});
    s.close();
    await s.settled();
  });
});
