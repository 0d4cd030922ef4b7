/**
 * Writing a file so that a reader sees the old contents or the new, never a part: the token store
 * and the ACME certificates both keep credentials this way.
 *
 * @example
 * ```ts
 * import { writeFileAtomic } from "./write_file_atomic.ts";
 * const dir = Deno.makeTempDirSync();
 * await writeFileAtomic(`${dir}/secret.txt`, "hello");
 * console.assert(Deno.readTextFileSync(`${dir}/secret.txt`) === "hello");
 * ```
 *
 * @module
 */

import { randomHex } from "../crypto/random.ts";
import { nodeBuiltin } from "../host/host.ts";

/**
 * Writes `text` to `path` atomically with mode 0600 (it holds credential hashes): a temporary
 * file next to it, synced, then renamed over it. The data directory is created (0700) if needed.
 */
export async function writeFileAtomic(path: string, text: string): Promise<void> {
  // Loaded here, when a file is written (minting a token, storing a certificate), not at start.
  const { mkdir, open, rename, rm } = nodeBuiltin("node:fs").promises;
  const { dirname } = nodeBuiltin("node:path");
  await mkdir(dirname(path), { recursive: true, mode: 0o700 });
  // A unique temporary name: "wx" then never follows a planted symlink or reuses a stale file.
  const temporary = `${path}.${randomHex(6)}.tmp`;
  const handle = await open(temporary, "wx", 0o600);
  try {
    try {
      await handle.writeFile(text, "utf8");
      await handle.sync();
    } finally {
      await handle.close();
    }
    await rename(temporary, path);
  } catch (error) {
    await rm(temporary, { force: true });
    throw error;
  }
}
