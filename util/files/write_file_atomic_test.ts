import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { mkdir, mkdtemp, readdir, readFile, rm, stat, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import process from "node:process";
import { writeFileAtomic } from "./write_file_atomic.ts";

const POSIX = process.platform !== "win32";

describe("writeFileAtomic", () => {
  let dir: string;
  before(async () => dir = await mkdtemp(join(tmpdir(), "tunnelmux-atomic-")));
  after(() => rm(dir, { recursive: true, force: true }));

  it("creates missing directories 0700 and the file 0600", async () => {
    const path = join(dir, "new", "deeper", "secret.json");
    await writeFileAtomic(path, '{"a":1}');
    assert.equal(await readFile(path, "utf8"), '{"a":1}');
    if (POSIX) {
      assert.equal((await stat(join(dir, "new"))).mode & 0o777, 0o700);
      assert.equal((await stat(join(dir, "new", "deeper"))).mode & 0o777, 0o700);
      assert.equal((await stat(path)).mode & 0o777, 0o600);
    }
  });

  it("replaces a file readable by others with one that is not, leaving no temporary file", async () => {
    const folder = join(dir, "replace");
    await mkdir(folder);
    const path = join(folder, "tokens.json");
    await writeFile(path, "old contents", { mode: 0o644 });
    await writeFileAtomic(path, "new");
    assert.equal(await readFile(path, "utf8"), "new");
    if (POSIX) assert.equal((await stat(path)).mode & 0o777, 0o600);
    assert.deepEqual(await readdir(folder), ["tokens.json"]);
  });

  it("keeps the previous contents and leaves no temporary file when writing fails", async () => {
    const folder = join(dir, "fails");
    await mkdir(folder);
    const path = join(folder, "tokens.json");
    await writeFileAtomic(path, "previous");
    // Not text: the write into the temporary file throws, after the file was created.
    await assert.rejects(writeFileAtomic(path, 42 as unknown as string));
    assert.equal(await readFile(path, "utf8"), "previous");
    assert.deepEqual(await readdir(folder), ["tokens.json"]);
  });

  it("leaves no temporary file when the final rename fails", async () => {
    const folder = join(dir, "rename");
    await mkdir(join(folder, "taken"), { recursive: true });
    await writeFile(join(folder, "taken", "inside"), "x");
    // A directory is in the way: the temporary file cannot be renamed over it.
    await assert.rejects(writeFileAtomic(join(folder, "taken"), "text"));
    assert.deepEqual(await readdir(folder), ["taken"]);
    assert.deepEqual(await readdir(join(folder, "taken")), ["inside"]);
  });

  it("leaves one whole version when several writes race", async () => {
    const folder = join(dir, "race");
    await mkdir(folder);
    const path = join(folder, "tokens.json");
    const versions = Array.from({ length: 8 }, (_, i) => String(i).repeat(64 * 1024));
    await Promise.all(versions.map((text) => writeFileAtomic(path, text)));
    assert.ok(versions.includes(await readFile(path, "utf8")));
    assert.deepEqual(await readdir(folder), ["tokens.json"]);
  });
});
