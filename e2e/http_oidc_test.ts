// An OIDC login in front of an HTTP tunnel, end to end: a real identity provider (oidc-provider,
// as a child `node` process on 127.0.0.1, testing/oidc_provider.mjs), a daemon in this process
// with an HTTP port, an SDK client exposing an app with policy.http.oidc, and headless Chromium
// (playwright-core, the system's /usr/bin/chromium) going through the provider's login form to the
// app, then logging out; a user the allow list leaves out is refused.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { createServer, request, type Server } from "node:http";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Browser } from "playwright-core";
import { launchChromium } from "../testing/browser.ts";
import { type Client, connect } from "../client/mod.ts";
import type { Daemon } from "../daemon/daemon.ts";
import { portOf, startDaemonInProcess } from "./_in_process_daemon.ts";
import { startCommand, type Started } from "../testing/mod.ts";
import { DEFAULT_TIMEOUT_MS, withTimeout } from "../testing/wait.ts";

const TOKEN = "oidc-test-client-0123456789abcdef";
const dataDir = mkdtempSync(join(tmpdir(), "tunnelmux-oidc-"));
const DOMAIN = "tunnels.test";
/** Upper bound of every browser wait; never a threshold. */
const WAIT_MS = 20_000;

describe("an OIDC login in front of an HTTP tunnel", () => {
  let daemon: Daemon;
  let httpPort: number;
  let client: Client;
  let provider: Started;
  let issuer: string;
  let app: Server;
  let browser: Browser;

  before(async () => {
    daemon = await startDaemonInProcess({
      listen: { tcp: "127.0.0.1:0", websocket: null, admin: null, http: "127.0.0.1:0" },
      http: { domain: DOMAIN },
      clients: [{ name: "web", token: TOKEN, expose: { hosts: ["*"] } }],
      // The session key is made there at the first login.
      dataDir,
    });
    httpPort = portOf(daemon.addresses.http);
    provider = startCommand("node", [
      "testing/oidc_provider.mjs",
      JSON.stringify({
        clientId: "tunnelmux-test",
        clientSecret: "test-only-secret",
        redirectUris: [`http://app.${DOMAIN}:${httpPort}/.tunnelmux/oidc/callback`],
      }),
    ]);
    issuer = JSON.parse((await provider.waitForStdout(/^\{.*\}$/m, WAIT_MS))[0]).issuer;
    // The daemon fetches a client's issuer only when the operator lists it.
    daemon.reload({ ...daemon.config, identityProviders: [issuer] });
    app = createServer((req, res) => {
      res.setHeader("content-type", "application/json");
      res.end(JSON.stringify({ url: req.url, headers: req.headers }));
    });
    await new Promise<void>((resolve) => app.listen(0, "127.0.0.1", resolve));
    client = await connect(`tcp://${daemon.addresses.tcp}`, { token: TOKEN, reconnect: false });
    await client.expose({
      local: `127.0.0.1:${(app.address() as { port: number }).port}`,
      http: "app",
      policy: {
        http: {
          oidc: {
            issuer,
            clientId: "tunnelmux-test",
            clientSecret: "test-only-secret",
            scopes: ["openid", "email", "groups"],
            allowDomains: ["example.com"],
          },
        },
      },
    });
    browser = await launchChromium(WAIT_MS, [
      // The tunnel's name reaches the daemon's HTTP port on this machine.
      `--host-resolver-rules=MAP *.${DOMAIN} 127.0.0.1`,
    ]);
  });

  after(async () => {
    await browser?.close();
    await client?.close();
    daemon?.stop();
    app?.close();
    await provider?.stop();
    rmSync(dataDir, { recursive: true, force: true });
  });

  const appUrl = (path: string) => `http://app.${DOMAIN}:${httpPort}${path}`;

  it("sends a browser through the provider's login to the app, then logs it out", async () => {
    const context = await browser.newContext();
    try {
      const page = await context.newPage();
      page.setDefaultTimeout(WAIT_MS);
      await page.goto(appUrl("/hello?x=1"));
      assert.ok(page.url().startsWith(issuer), `at the provider: ${page.url()}`);
      await page.fill('input[name="login"]', "alice");
      await page.fill('input[name="password"]', "anything");
      await page.click('button[type="submit"]');
      // The provider asks for consent once; then the daemon's callback sends the browser back.
      await page.waitForURL((url) => url.href.startsWith(issuer) || url.port === String(httpPort));
      if (page.url().startsWith(issuer)) await page.click('button[type="submit"]');
      await page.waitForURL(appUrl("/hello?x=1"));
      const seen = JSON.parse(await page.locator("body").innerText());
      assert.equal(seen.url, "/hello?x=1", "back where it was going");
      assert.equal(seen.headers["x-tunnelmux-user"], "alice");
      assert.equal(seen.headers["x-tunnelmux-email"], "alice@example.com");
      assert.doesNotMatch(String(seen.headers.cookie ?? ""), /__tunnelmux/, "cookies stay ours");
      const session = (await context.cookies()).find((c) => c.name === "__tunnelmux_session");
      assert.ok(session?.httpOnly, "an HttpOnly session cookie");
      assert.equal(session.domain, `app.${DOMAIN}`);

      // Logged in: another page of the app, straight through.
      await page.goto(appUrl("/second"));
      assert.equal(JSON.parse(await page.locator("body").innerText()).url, "/second");

      assert.ok(existsSync(join(dataDir, "http-session.key")), "the key made in the data dir");

      await page.goto(appUrl("/.tunnelmux/oidc/logout"));
      assert.equal((await page.locator("body").innerText()).trim(), "logged out");
      assert.equal(
        (await context.cookies()).find((c) => c.name === "__tunnelmux_session"),
        undefined,
        "the session cookie is gone",
      );
    } finally {
      await context.close();
    }
  });

  it("refuses a user the allow list leaves out, telling nothing of the list", async () => {
    const context = await browser.newContext();
    try {
      const page = await context.newPage();
      page.setDefaultTimeout(WAIT_MS);
      await page.goto(appUrl("/"));
      await page.fill('input[name="login"]', "mallory");
      await page.fill('input[name="password"]', "anything");
      await page.click('button[type="submit"]');
      await page.waitForURL((url) => url.href.startsWith(issuer) || url.port === String(httpPort));
      if (page.url().startsWith(issuer)) await page.click('button[type="submit"]');
      await page.waitForURL((url) => url.pathname === "/.tunnelmux/oidc/callback");
      assert.equal((await page.locator("body").innerText()).trim(), "forbidden");
      assert.equal(
        (await context.cookies()).find((c) => c.name === "__tunnelmux_session"),
        undefined,
      );
    } finally {
      await context.close();
    }
  });

  it("without a session: a GET is sent to log in, anything else is refused; forged cookies too", async () => {
    const ask = (method: string, cookie?: string) =>
      withTimeout(
        new Promise<{ status: number; location?: string }>((resolve, reject) => {
          const req = request({
            host: "127.0.0.1",
            port: httpPort,
            method,
            path: "/api",
            headers: { host: `app.${DOMAIN}:${httpPort}`, ...(cookie ? { cookie } : {}) },
          }, (res) => {
            res.resume().on("end", () =>
              resolve({ status: res.statusCode!, location: res.headers.location }));
          });
          req.on("error", reject).end();
        }),
        DEFAULT_TIMEOUT_MS,
        `${method} /api`,
      );
    const get = await ask("GET");
    assert.equal(get.status, 302);
    assert.ok(get.location?.startsWith(`${issuer}/`), String(get.location));
    assert.match(get.location!, /code_challenge_method=S256/);
    assert.equal((await ask("POST")).status, 401);
    assert.equal((await ask("GET", "__tunnelmux_session=eyJhbGciOiJkaXIifQ..x.y.z")).status, 302);
  });
});
