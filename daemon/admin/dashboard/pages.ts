/**
 * The dashboard: `GET /` and its two static files, served without the admin token (a browser
 * cannot send one for a page load; the page asks for the token and sends it on every API call).
 *
 * The admin app mounts these pages after the `Host` allowlist and before the bearer check, so a
 * rebinding page still cannot load them under its own name, and nothing else becomes public.
 * The page gets a strict Content-Security-Policy: scripts, styles and fetches from this origin
 * only, no inline code, no framing; a page holding the admin token must not run anything else.
 *
 * The page, script and style sheet are the files beside this module, imported as text, so they
 * are part of the module graph and never read at run time. That one mechanism serves the same
 * bytes everywhere: Deno loads text imports without a read permission (the image's daemon may
 * read only its data, config and secrets directories), Bun loads them from source or from the
 * npm package, and `bun build --compile` embeds them in the single binary, where a file found
 * through `import.meta.url` would be missing.
 *
 * @module
 */

import { Hono } from "hono";
import DASHBOARD_HTML from "./index.html" with { type: "text" };
import DASHBOARD_JS from "./dashboard.js" with { type: "text" };
import DASHBOARD_CSS from "./dashboard.css" with { type: "text" };

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

/** `GET /`, `GET /dashboard.js` and `GET /dashboard.css`: the files beside this module. */
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
