/**
 * The system's headless Chromium for the browser tests (the admin dashboard, the inspector's page,
 * an OIDC login), driven by playwright-core, which never downloads a browser: scripts/test.sh
 * installs Debian's package.
 *
 * @module
 */

import { type Browser, chromium } from "playwright-core";

/** Where Debian puts the browser. */
export const CHROMIUM = "/usr/bin/chromium";

/** Flags for a quiet headless run in a container (no sandbox, no background traffic). */
export const CHROMIUM_ARGS: readonly string[] = [
  "--headless",
  "--no-sandbox",
  "--disable-gpu",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
  "--no-first-run",
];

/** Starts the system Chromium, with `extraArgs` after the usual flags, waiting at most `timeoutMs`. */
export function launchChromium(timeoutMs: number, extraArgs: string[] = []): Promise<Browser> {
  return chromium.launch({
    executablePath: CHROMIUM,
    args: [...CHROMIUM_ARGS, ...extraArgs],
    timeout: timeoutMs,
  });
}
