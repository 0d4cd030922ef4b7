/**
 * A daemon in the test's own process, from a config document: validated (every error fails the
 * test at once), logging nothing, started. For end-to-end tests that read the daemon's state
 * (counters, certificates, events) beside what their clients and visitors see.
 *
 * @module
 */

import assert from "node:assert/strict";
import { validateConfig } from "../daemon/config/mod.ts";
import { Daemon } from "../daemon/daemon.ts";
import { Logger } from "../util/log.ts";

/** Starts a daemon for `config` (a raw document, as a config file would hold). */
export async function startDaemonInProcess(config: Record<string, unknown>): Promise<Daemon> {
  const result = validateConfig(config);
  assert.deepEqual(result.errors, []);
  const daemon = new Daemon(result.config!, {
    log: new Logger({ level: "error", format: "json", sink: () => {} }),
  });
  await daemon.start();
  return daemon;
}

/** The port of a daemon listener's `host:port` address. */
export function portOf(address: string | undefined): number {
  return Number(address!.split(":").pop());
}
