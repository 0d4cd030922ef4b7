/**
 * The dashboard: `GET /` and its two static files, served without the admin token (a browser
 * cannot send one for a page load; the page asks for the token and sends it on every API call).
 *
 * The admin app mounts these routes after the `Host` allowlist and before the bearer check, so a
 * rebinding page still cannot load them under its own name, and nothing else becomes public.
 * The page gets a strict Content-Security-Policy: scripts, styles and fetches from this origin
 * only, no inline code, no framing; a page holding the admin token must not run anything else.
 *
 * @module
 */

import { Hono } from "hono";
import { DASHBOARD_CSS, DASHBOARD_HTML, DASHBOARD_JS } from "./page.ts";

/** The page's Content-Security-Policy. `img-src data:` is for the empty favicon only. */
export const DASHBOARD_CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "connect-src 'self'",
  "img-src 'self' data:",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join("; ");

/** `GET /`, `GET /dashboard.js` and `GET /dashboard.css`. */
export function dashboardPages(): Hono {
  const app = new Hono();
  // no-cache, not no-store: revalidation is cheap and these never contain secrets.
  app.get("/", (c) =>
    c.body(DASHBOARD_HTML, 200, {
      "content-type": "text/html; charset=utf-8",
      "content-security-policy": DASHBOARD_CSP,
      "cache-control": "no-cache",
    }));
  app.get("/dashboard.js", (c) =>
    c.body(DASHBOARD_JS, 200, {
      "content-type": "text/javascript; charset=utf-8",
      "cache-control": "no-cache",
    }));
  app.get("/dashboard.css", (c) =>
    c.body(DASHBOARD_CSS, 200, {
      "content-type": "text/css; charset=utf-8",
      "cache-control": "no-cache",
    }));
  return app;
}
