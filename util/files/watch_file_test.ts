import { after, describe, it } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { watchFile } from "./watch_file.ts";
import { waitFor } from "../../testing/wait.ts";

describe("watchFile", () => {
  const dir = mkdtempSync(join(tmpdir(), "tunnelmux-watch-"));
  after(() => rmSync(dir, { recursive: true, force: true }));

  it("hears a file written in place and a file replaced by a rename, again and again", async () => {
    const path = join(dir, "client.jsonc");
    writeFileSync(path, "{}");
    let changes = 0;
    const stop = watchFile(path, () => changes++);
    try {
      writeFileSync(path, '{"expose":["0=127.0.0.1:1"]}');
      await waitFor(() => changes === 1, { timeoutMs: 10_000, message: "the write in place" });
      // Saved as editors save: a new file renamed over the old one, twice (a watch on the
      // file itself loses it at the first rename).
      for (const [i, text] of ['{"name":"a"}', '{"name":"b"}'].entries()) {
        writeFileSync(join(dir, "client.jsonc.tmp"), text);
        renameSync(join(dir, "client.jsonc.tmp"), path);
        await waitFor(() => changes === 2 + i, { timeoutMs: 10_000, message: `rename ${i + 1}` });
      }
      // Another file in the directory is not this one; then this one again: exactly one more.
      writeFileSync(join(dir, "other.jsonc"), "{}");
      writeFileSync(path, '{"name":"c"}');
      await waitFor(() => changes >= 4, { timeoutMs: 10_000, message: "the last write" });
      assert.equal(changes, 4);
    } finally {
      stop();
    }
  });
});
