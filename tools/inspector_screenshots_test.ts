// The screenshot tool, run into a temporary directory (never into docs/: the suite leaves the
// checkout as it was): each file it says it wrote is a PNG.
import { after, describe, it } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { writeScreenshots } from "./inspector_screenshots.ts";

const PNG_SIGNATURE = [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a];

describe("tools/inspector_screenshots.ts", () => {
  const dir = mkdtempSync(join(tmpdir(), "tunnelmux-inspector-shots-"));
  after(() => rmSync(dir, { recursive: true, force: true }));

  it("writes the page's screenshots as PNG files into the directory it is given", async () => {
    const files = await writeScreenshots(dir);
    assert.deepEqual(files.map((f) => f.slice(dir.length + 1)), [
      "detail.png",
      "replay.png",
      "edit.png",
      "filter.png",
    ]);
    for (const file of files) {
      assert.deepEqual([...readFileSync(file).subarray(0, 8)], PNG_SIGNATURE, file);
    }
  });
});
