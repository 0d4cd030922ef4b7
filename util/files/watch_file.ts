/**
 * Calls back when a file's contents change: the config reload of `tunnelmux client
 * --watch-config`, for where there is no SIGHUP to ask for one (Windows) or no shell to send it.
 *
 * @example
 * ```ts ignore
 * import { watchFile } from "./watch_file.ts";
 * const stop = watchFile("client.jsonc", () => console.log("changed"));
 * stop();
 * ```
 *
 * @module
 */

import { nodeBuiltin } from "../host/host.ts";

/** Events closer together than this are one change (an editor's save is several). */
const SETTLE_MS = 100;

/**
 * Calls `onChange` each time the file at `path` holds other contents than when last seen; returns
 * the function that stops watching. It watches the file's directory, not the file: an editor's
 * save or a config manager replaces the file by a rename, and a watch on the old file would never
 * hear of the new one. Events that leave the contents as they were (a touch, the events of the
 * write that was already applied) call nothing. The watch does not keep the process alive.
 */
export function watchFile(path: string, onChange: () => void): () => void {
  const fs = nodeBuiltin("node:fs");
  const slash = Math.max(path.lastIndexOf("/"), path.lastIndexOf("\\"));
  const dir = slash >= 0 ? path.slice(0, slash) || "/" : ".";
  const name = path.slice(slash + 1);
  const read = (): string | undefined => {
    try {
      return fs.readFileSync(path, "utf8");
    } catch {
      return undefined; // between a removal and its replacement: the next event comes
    }
  };
  let seen = read();
  let timer: ReturnType<typeof setTimeout> | undefined;
  const settle = () => {
    timer = undefined;
    const now = read();
    if (now === undefined || now === seen) return;
    seen = now;
    onChange();
  };
  const watcher = fs.watch(dir, { persistent: false }, (_event, file) => {
    if (file !== null && file !== undefined && String(file) !== name) return;
    if (timer !== undefined) clearTimeout(timer);
    timer = setTimeout(settle, SETTLE_MS);
  });
  watcher.on("error", () => {}); // the directory went away: nothing left to watch
  return () => {
    if (timer !== undefined) clearTimeout(timer);
    watcher.close();
  };
}
