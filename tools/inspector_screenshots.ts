/**
 * Writes the request inspector's screenshots for docs/inspector.md: a demo (a daemon, a client
 * with the inspector, a local shop app, all on 127.0.0.1: testing/inspector_demo.ts) gets a few
 * visitors, then the system chromium (headless, through playwright-core) takes the list with a
 * request's detail, a replay beside its original, and the replay editor. Run by hand when the
 * page changes, never by the test suite (which must leave the checkout as it was):
 *
 * ```sh
 * node_modules/.bin/deno run -A tools/inspector_screenshots.ts [DIR]   # default docs/inspector
 * ```
 *
 * @module
 */

import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { launchChromium } from "../testing/browser.ts";
import { startInspectorDemo } from "../testing/inspector_demo.ts";
import { hostArgs } from "../util/host/host.ts";

/** Where the screenshots go unless told otherwise. */
export const DEFAULT_DIR = fileURLToPath(new URL("../docs/inspector/", import.meta.url));

const WAIT_MS = 20_000;

/** Takes the screenshots into `dir`; resolves with the files written. */
export async function writeScreenshots(dir: string = DEFAULT_DIR): Promise<string[]> {
  mkdirSync(dir, { recursive: true });
  const demo = await startInspectorDemo();
  const browser = await launchChromium(WAIT_MS);
  const written: string[] = [];
  try {
    const page = await browser.newPage({ viewport: { width: 1360, height: 820 } });
    page.setDefaultTimeout(WAIT_MS);
    await page.goto(demo.inspector.url + "/");
    await page.waitForSelector("#status.live");
    const json = { "content-type": "application/json" };
    await demo.visit("GET", "/health");
    await demo.visit("POST", "/api/orders", '{"sku":"tea","qty":2}', {
      ...json,
      authorization: "Bearer a-visitor-token",
      cookie: "session=abc123",
    });
    await demo.visit("GET", "/api/orders/42", "", { "accept-encoding": "gzip" });
    await demo.visit("GET", "/favicon.ico");
    await demo.visit("DELETE", "/api/orders/7");
    const shot = async (name: string) => {
      const path = join(dir, `${name}.png`);
      await page.screenshot({ path });
      written.push(path);
    };
    await page.locator("#rows tr", { hasText: "/api/orders/42" }).click();
    await page.locator("#d-res-body", { hasText: '"sku": "tea"' }).waitFor();
    await shot("detail");
    await page.locator("#rows tr", { hasText: "POST" }).first().click();
    await page.locator("#d-title", { hasText: "POST /api/orders" }).waitFor();
    await page.click("#replay");
    await page.locator("#d-note", { hasText: "replayed" }).waitFor();
    await page.locator("#rows tr .tag", { hasText: "replay of" }).waitFor();
    await shot("replay");
    await page.locator("#d-replays a").first().click();
    await page.locator("#d-title", { hasText: "POST /api/orders" }).waitFor();
    await page.click("#edit");
    await page.fill("#e-body", '{"sku":"coffee","qty":1}');
    await shot("edit");
    await page.click("#e-cancel");
    await page.selectOption("#f-status", "4xx,5xx");
    await page.locator("#rows tr", { hasText: "/favicon.ico" }).waitFor();
    await shot("filter");
  } finally {
    await browser.close();
    await demo.close();
  }
  return written;
}

if (import.meta.main) {
  const files = await writeScreenshots(hostArgs()[0] ?? DEFAULT_DIR);
  for (const file of files) console.log(file);
}
