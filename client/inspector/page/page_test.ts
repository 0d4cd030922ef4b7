// The inspector's page (index.html, inspector.js, inspector.css) in a real headless browser
// (Debian's chromium driven by playwright-core, under both Deno and Bun), against a real daemon,
// client and local app on 127.0.0.1 (testing/inspector_demo.ts): a visitor's request appears
// live, its detail shows its bodies, a replay and an edited replay reach the app and are listed
// beside the original, the filters narrow the list, a token-protected inspector asks for its
// token. No screenshots here: tools/inspector_screenshots.ts writes those for docs/.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import type { Browser, Page } from "playwright-core";
import { launchChromium } from "../../../testing/browser.ts";
import { type InspectorDemo, startInspectorDemo } from "../../../testing/inspector_demo.ts";
import { waitFor } from "../../../testing/wait.ts";

/** Upper bound of every browser wait: generous, since machines vary; never a threshold. */
const WAIT_MS = 20_000;

const TOKEN = "inspector-page-token-0123456789";

describe("inspector page", () => {
  let demo: InspectorDemo;
  let browser: Browser;
  const problems: string[] = [];

  before(async () => {
    demo = await startInspectorDemo();
    browser = await launchChromium(WAIT_MS);
  });
  after(async () => {
    await browser?.close();
    await demo?.close();
  });

  async function open(url: string): Promise<Page> {
    const page = await browser.newPage({ viewport: { width: 1280, height: 800 } });
    page.setDefaultTimeout(WAIT_MS);
    page.on("pageerror", (error) => problems.push(`page error: ${error.message}`));
    page.on("console", (message) => {
      if (message.type() === "error" && !message.text().startsWith("Failed to load resource")) {
        problems.push(`console: ${message.text()}`);
      }
    });
    await page.addInitScript({
      content: `globalThis.violations = [];
        document.addEventListener("securitypolicyviolation", (e) => {
          globalThis.violations.push(e.violatedDirective + " " + e.blockedURI);
        });`,
    });
    await page.goto(url);
    await page.waitForSelector("#status.live");
    return page;
  }

  it("shows a request live, its detail, a replay beside it, and filters", async () => {
    const page = await open(demo.inspector.url + "/");
    // Live: the request is sent after the page connected its feed.
    const sent = await demo.visit("POST", "/api/orders", '{"sku":"tea","qty":2}', {
      "content-type": "application/json",
      authorization: "Bearer visitor-secret",
    });
    assert.equal(sent.status, 201);
    const row = page.locator("#rows tr", { hasText: "/api/orders" });
    await row.locator("td", { hasText: "201" }).waitFor();
    await row.click();
    await page.locator("#d-title", { hasText: "POST /api/orders" }).waitFor();
    await page.locator("#d-req-body", { hasText: '"sku": "tea"' }).waitFor();
    await page.locator("#d-res-body", { hasText: '"status": "created"' }).waitFor();
    await page.locator("#d-req-headers td", { hasText: "[redacted]" }).waitFor();
    assert.equal(await page.locator("#d-req-headers", { hasText: "visitor-secret" }).count(), 0);
    await page.locator('#d-facts dd[data-fact="visitor"]', { hasText: /^127\.0\.0\.1:\d+$/ })
      .waitFor();

    // Copy as curl: the command is shown (the clipboard may be closed to a headless page).
    await page.click("#curl");
    await page.locator("#d-note", {
      hasText: `curl -X POST 'http://shop.tunnels.test/api/orders'`,
    }).waitFor();

    // Replay as it was: a new row marked as the replay of the first, shown in its place.
    const originalId = Number(await row.getAttribute("data-id"));
    await page.click("#replay");
    await page.locator("#d-note", { hasText: `replayed #${originalId} as #` }).waitFor();
    await page.locator("#rows tr .tag", { hasText: `replay of #${originalId}` }).waitFor();
    await page.locator("#d-replays", { hasText: `Replay of #${originalId}` }).waitFor();

    // Edited: another path and body.
    await page.locator(`#d-replays a[data-id="${originalId}"]`).click();
    await page.locator("#d-title", { hasText: `#${originalId} POST` }).waitFor();
    await page.click("#edit");
    await page.fill("#e-path", "/api/orders/edited");
    await page.fill("#e-body", '{"sku":"coffee"}');
    await page.click('#editor button[type="submit"]');
    await page.locator("#d-title", { hasText: "POST /api/orders/edited" }).waitFor();
    await waitFor(() => demo.seen.includes('POST /api/orders/edited {"sku":"coffee"}'), "the edit");
    assert.equal(demo.seen.filter((s) => s === 'POST /api/orders {"sku":"tea","qty":2}').length, 2);
    // The original lists its replays.
    await page.locator(`#rows tr[data-id="${originalId}"]`).click();
    await page.locator("#d-replays a", { hasText: "(201)" }).first().waitFor();
    assert.equal(await page.locator("#d-replays a").count(), 2);

    // Filters: status, method, path, free text.
    assert.equal((await demo.visit("GET", "/health")).status, 200);
    assert.equal((await demo.visit("GET", "/nowhere")).status, 404);
    await page.locator("#rows tr", { hasText: "/nowhere" }).waitFor();
    await page.selectOption("#f-status", "4xx");
    await waitFor(async () => (await page.locator("#rows tr").count()) === 1, "one 4xx row");
    await page.locator("#rows tr", { hasText: "/nowhere" }).waitFor();
    await page.selectOption("#f-status", "");
    await page.selectOption("#f-method", "GET");
    await page.fill("#f-path", "health");
    await waitFor(
      async () => (await page.locator("#rows tr").count()) === 1,
      "one GET /health row",
    );
    await page.locator("#rows tr", { hasText: "/health" }).waitFor();
    await page.selectOption("#f-method", "");
    await page.fill("#f-path", "");
    await page.fill("#f-q", "coffee");
    await waitFor(
      async () => (await page.locator("#rows tr").count()) === 1,
      "one row with coffee",
    );
    await page.locator("#rows tr", { hasText: "/api/orders/edited" }).waitFor();

    assert.deepEqual(await page.evaluate("globalThis.violations"), []);
    assert.deepEqual(problems, []);
    await page.close();
  });

  it("asks for the token of an inspector that has one", async () => {
    const guarded = await startInspectorDemo({ token: TOKEN });
    try {
      const page = await browser.newPage();
      page.setDefaultTimeout(WAIT_MS);
      await page.goto(guarded.inspector.url + "/");
      await page.waitForSelector("#login:not([hidden])");
      await page.fill("#token", TOKEN);
      await page.click('#login-form button[type="submit"]');
      await page.waitForSelector("#status.live");
      await guarded.visit("GET", "/health");
      await page.locator("#rows tr", { hasText: "/health" }).waitFor();
      await page.close();
    } finally {
      await guarded.close();
    }
  });
});
