// The dashboard (index.html, dashboard.js, dashboard.css) in a real headless browser (Debian's
// chromium driven by playwright-core, which runs under both Deno and Bun): log in with the admin
// token, see the sessions and the tunnel, kick a session and watch it go, all under the page's
// strict CSP. Also checks, through the whole admin app, that the page and its files are public
// but still behind the Host allowlist (pages_test.ts checks the pages alone).
import { hasOpenssl } from "../../../transport/_test_certificate.ts";
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { mkdirSync, readFileSync, rmSync } from "node:fs";
import { fileURLToPath } from "node:url";
import type { Browser, Page } from "playwright-core";
import { launchChromium } from "../../../testing/browser.ts";
import { ADMIN_TOKEN, errorCode, type Fixture, rawHttp, startFixture } from "../_admin_fixture.ts";
import type { Client } from "../../../client/client.ts";
import { waitFor } from "../../../testing/wait.ts";

/** Where the screenshots are kept (test artifacts; `.cache/` is git-ignored). */
const ARTIFACTS = fileURLToPath(new URL("../../../.cache/artifacts/", import.meta.url));

/** Upper bound of every browser wait: generous, since CI machines vary; never a threshold. */
const WAIT_MS = 20_000;

/** The PNG file signature. */
const PNG_SIGNATURE = [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a];

/** Saves a full-page screenshot of the current view as `dashboard-NAME.png`, and checks it. */
async function shoot(page: Page, name: string): Promise<void> {
  mkdirSync(ARTIFACTS, { recursive: true });
  const path = `${ARTIFACTS}dashboard-${name}.png`;
  rmSync(path, { force: true });
  await page.screenshot({ path, fullPage: true });
  const png = readFileSync(path);
  assert.ok(png.length > PNG_SIGNATURE.length);
  assert.deepEqual([...png.subarray(0, 8)], PNG_SIGNATURE);
}

describe("dashboard", () => {
  let f: Fixture;
  let first: Client;
  let second: Client;
  let tunnelId: string;

  before(async () => {
    f = await startFixture();
    first = await f.client();
    second = await f.client();
    tunnelId = (await first.expose({ local: `127.0.0.1:${f.echo.port}`, label: "web" })).id;
  });
  after(() => f.stop());

  it("serves the page and its files without a token, with a strict CSP on the page", async () => {
    const page = await fetch(f.admin.url + "/");
    assert.equal(page.status, 200);
    assert.match(page.headers.get("content-type") ?? "", /^text\/html/);
    const csp = page.headers.get("content-security-policy") ?? "";
    assert.match(csp, /default-src 'none'/);
    assert.match(csp, /script-src 'self'(;|$)/);
    assert.doesNotMatch(csp, /unsafe-inline|unsafe-eval/);
    assert.equal(page.headers.get("x-content-type-options"), "nosniff");
    const html = await page.text();
    assert.match(html, /<script src="\/dashboard\.js" defer><\/script>/);
    assert.doesNotMatch(html, /<script>|<style>|style=/, "no inline code under the CSP");
    for (
      const [path, type] of [["/dashboard.js", /^text\/javascript/], [
        "/dashboard.css",
        /^text\/css/,
      ]] as const
    ) {
      const response = await fetch(f.admin.url + path);
      assert.equal(response.status, 200, path);
      assert.match(response.headers.get("content-type") ?? "", type);
      assert.ok((await response.text()).length > 100);
    }
    // Public does not mean open to any Host: a rebinding page still gets 421.
    const raw = await rawHttp(
      f.admin.port,
      "GET / HTTP/1.1\r\nHost: evil.example\r\nConnection: close\r\n\r\n",
    );
    assert.match(raw, /^HTTP\/1\.1 421/);
    // And the API behind it still wants the token.
    const info = await fetch(f.admin.url + "/v1/info");
    assert.equal(info.status, 401);
    assert.equal(await errorCode(info), "unauthorized");
  });

  it("lists sessions and tunnels, resets and kicks, in a real browser", async () => {
    const kicked = f.sessionId(second);
    const kept = f.sessionId(first);
    let browser: Browser | undefined;
    try {
      browser = await launchChromium(WAIT_MS);
      const page = await browser.newPage({ viewport: { width: 1280, height: 800 } });
      page.setDefaultTimeout(WAIT_MS);
      const problems: string[] = [];
      page.on("pageerror", (error) => problems.push(`page error: ${error.message}`));
      page.on("console", (message) => {
        // The browser logs every non-2xx answer; the 409 below is one on purpose.
        if (message.type() === "error" && !message.text().startsWith("Failed to load resource")) {
          problems.push(`console: ${message.text()}`);
        }
      });

      // CSP violations are reported to the page, not thrown: count them from inside, from
      // before the page's own script runs.
      // (Strings, not functions: these run in the page, and the test is not type-checked with
      // the DOM library.)
      await page.addInitScript({
        content: `globalThis.violations = [];
          document.addEventListener("securitypolicyviolation", (e) => {
            globalThis.violations.push(e.violatedDirective + " " + e.blockedURI);
          });`,
      });
      // A link with the token in its fragment logs in at once, and leaves no token in the URL.
      // The daemon's recent history, 30 samples of it, fills the charts from the first poll on.
      const t0 = Date.now();
      for (let i = 1; i <= 30; i++) f.admin.recent.sample(t0 + i * 2000);
      const linked = await browser.newPage();
      linked.setDefaultTimeout(WAIT_MS);
      await linked.goto(`${f.admin.url}/#token=${encodeURIComponent(ADMIN_TOKEN)}`);
      await linked.waitForSelector(`#tunnels tr[data-tunnel="${tunnelId}"]`);
      const points = await linked.getAttribute("#chart-sessions polyline", "points") ?? "";
      assert.ok(points.split(" ").length > 30, `the sessions chart starts with history: ${points}`);
      assert.equal(linked.url(), f.admin.url + "/");
      assert.equal(
        await linked.evaluate(() => sessionStorage.getItem("tunnelmux.adminToken")),
        ADMIN_TOKEN,
      );
      await linked.close();

      await page.goto(f.admin.url + "/");
      assert.equal(await page.isVisible("#login"), true);
      assert.equal(await page.isVisible("#main"), false);

      await page.fill("#token", ADMIN_TOKEN);
      await page.click("#login-form button[type=submit]");
      await page.waitForSelector(`#sessions tr[data-session="${kept}"]`);
      await page.waitForSelector(`#sessions tr[data-session="${kicked}"]`);
      const tunnelRow = await page.waitForSelector(`#tunnels tr[data-tunnel="${tunnelId}"]`);
      const tunnel = f.daemon.registry.tunnel(tunnelId)!;
      assert.match(await tunnelRow.textContent() ?? "", new RegExp(`:${tunnel.port}`));
      assert.match(await tunnelRow.textContent() ?? "", /web/);
      assert.match(await tunnelRow.textContent() ?? "", /tcp/);
      // A UDP tunnel says so.
      const udp = await first.expose({ protocol: "udp", local: "127.0.0.1:9" });
      const udpRow = await page.waitForSelector(`#tunnels tr[data-tunnel="${udp.id}"]`);
      assert.match(
        await udpRow.textContent() ?? "",
        new RegExp(`udp127\\.0\\.0\\.1:${udp.remotePort}`),
      );
      await udp.close();
      if (hasOpenssl) {
        // An HTTP tunnel shows its name and when the certificate that serves it expires.
        const site = await first.expose({ local: `127.0.0.1:${f.echo.port}`, http: "site" });
        const siteRow = await page.waitForSelector(`#tunnels tr[data-tunnel="${site.id}"]`);
        // Both ways in: the HTTP port's URL and the HTTPS port's.
        const siteText = await siteRow.textContent() ?? "";
        assert.match(
          siteText,
          /http:\/\/site\.tunnels\.test:\d+\/ https:\/\/site\.tunnels\.test:\d+\//,
        );
        assert.match(siteText, /site\.tunnels\.test:\d+\/ \(certificate until /);
        await site.close();
      }
      const sessionText = await page.textContent(`#sessions tr[data-session="${kept}"]`) ?? "";
      assert.match(sessionText, /alice/);
      assert.match(sessionText, /tcp/);
      assert.match(sessionText, /127\.0\.0\.1:\d+/);
      assert.equal(
        await page.evaluate(() => sessionStorage.getItem("tunnelmux.adminToken")),
        ADMIN_TOKEN,
      );
      await page.waitForSelector("#status.live"); // the event feed is connected

      // Reset: the only stream of an idle session is its control stream, which the API refuses
      // (409); the page shows the API's message.
      await page.click(`#sessions tr[data-session="${kept}"] button[data-action="streams"]`);
      await page.click(`tr[data-streams-of="${kept}"] button[data-action="reset"]`);
      await page.click(`tr[data-streams-of="${kept}"] button[data-action="reset"].confirm`);
      // A locator, not waitForFunction: the page's CSP (rightly) forbids evaluating strings.
      await page.locator("#notice", { hasText: "control stream" }).waitFor();

      // The header shows the daemon's facts; the charts have axes with units.
      await page.locator('#facts dd[data-fact="version"]', { hasText: "0.1.0" }).waitFor();
      const listeners = await page.textContent('#facts dd[data-fact="listeners"]') ?? "";
      assert.match(listeners, /tcp 127/);
      assert.match(listeners, /http 127\.0\.0\.1:\d+, https 127\.0\.0\.1:\d+/);
      assert.equal(await page.locator("svg.chart").count(), 3);
      const axes = await page.textContent("#chart-throughput") ?? "";
      assert.match(axes, /B\/s/);
      assert.match(axes, /now/);
      assert.match(axes, /-2 min/);

      // Events from before the page was opened are replayed from the daemon's ring.
      await page.locator("#events li", { hasText: "tunnel_up" }).first().waitFor();

      // Sortable columns: by id, then the other way.
      const order = async () =>
        await page.$$eval(
          "#sessions tbody tr[data-session]",
          (rows) =>
            rows.map((r) => (r as unknown as { dataset: { session: string } }).dataset.session),
        );
      await page.click('#sessions th[data-sort="id"]');
      const descending = await order();
      assert.equal(
        await page.getAttribute('#sessions th[data-sort="id"]', "aria-sort"),
        "descending",
      );
      await page.click('#sessions th[data-sort="id"]');
      assert.deepEqual(await order(), [...descending].reverse());
      assert.equal(
        await page.getAttribute('#sessions th[data-sort="id"]', "aria-sort"),
        "ascending",
      );
      await shoot(page, "overview");

      // Destructive actions ask first: Kick, then Cancel, keeps the session.
      const kick = `#sessions tr[data-session="${kicked}"] button[data-action="kick"]`;
      await page.click(kick);
      await page.locator(`${kick}.confirm`, { hasText: `Kick ${kicked}?` }).waitFor();
      await shoot(page, "confirm");
      await page.click(`#sessions tr[data-session="${kicked}"] button[data-action="cancel"]`);
      await page.locator(`${kick}.danger`).waitFor();
      assert.ok(f.daemon.registry.session(kicked) !== undefined, "cancelled: still there");
      // Kick, then confirm.
      await page.click(kick);
      await page.click(`${kick}.confirm`);
      await page.waitForSelector(`#sessions tr[data-session="${kicked}"]`, { state: "detached" });
      await waitFor(() => !(f.daemon.registry.session(kicked) !== undefined), {
        message: "the kicked session to go",
        intervalMs: 10,
        tries: 2000,
      });
      assert.equal(f.daemon.registry.session(kept) !== undefined, true);
      assert.equal(await page.isVisible(`#sessions tr[data-session="${kept}"]`), true);

      // Tokens: mint one (shown once), see it listed, revoke it with a confirmation.
      await page.fill("#mint-name", "dashboard-minted");
      await page.fill("#mint-hours", "2");
      await page.click("#mint-form button[type=submit]");
      await page.waitForSelector("#minted:not([hidden])");
      const secret = await page.textContent("#minted-token") ?? "";
      assert.match(secret, /^tmx_/);
      const record = f.daemon.registry.tokens.list().find((t) => t.name === "dashboard-minted");
      assert.ok(record, "the daemon holds the minted token");
      const row = `#tokens tr[data-token="${record.id}"]`;
      await page.locator(row, { hasText: "active" }).waitFor();
      await shoot(page, "tokens");
      await page.click("#minted-done");
      assert.equal(await page.isVisible("#minted"), false);
      assert.equal(await page.textContent("#minted-token"), "", "the secret left the page");
      await page.click(`${row} button[data-action="revoke"]`);
      await page.click(`${row} button[data-action="revoke"].confirm`);
      await page.locator("#notice", { hasText: `Revoked token ${record.id}` }).waitFor();
      await waitFor(() => !f.daemon.registry.tokens.list().some((t) => t.id === record.id), {
        message: "the token revoked",
        intervalMs: 10,
        tries: 2000,
      });
      await page.waitForSelector(row, { state: "detached" });

      // A narrow screen: nothing wider than the window (tables scroll inside their box).
      await page.setViewportSize({ width: 390, height: 844 });
      const overflow = await page.evaluate(() =>
        (globalThis as unknown as { document: { documentElement: { scrollWidth: number } } })
          .document.documentElement.scrollWidth
      );
      assert.ok(overflow <= 390, `the page is ${overflow} px wide at 390`);
      await shoot(page, "narrow");

      const violations = await page.evaluate("globalThis.violations");
      assert.deepEqual(violations, [], "no CSP violations");
      assert.deepEqual(problems, [], "no script errors");
    } finally {
      await browser?.close();
    }
  });
});
