// What the dashboard's pages answer, without a daemon or a socket: hono's `app.request` runs the
// sub-app in memory. The files served must be the files on disk, byte for byte, whatever the
// runtime; the headers are the contract the browser test (dashboard_test.ts) relies on.
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { DASHBOARD_CSP, dashboardPages } from "./pages.ts";

/** A file beside this test, as text. */
function onDisk(name: string): string {
  return readFileSync(new URL(`./${name}`, import.meta.url), "utf8");
}

/** Each URL, the file it serves and its content type. */
const ASSETS = [
  { path: "/", file: "index.html", type: "text/html; charset=utf-8" },
  { path: "/dashboard.js", file: "dashboard.js", type: "text/javascript; charset=utf-8" },
  { path: "/dashboard.css", file: "dashboard.css", type: "text/css; charset=utf-8" },
] as const;

describe("dashboardPages", () => {
  const app = dashboardPages();

  for (const asset of ASSETS) {
    it(`GET ${asset.path} answers ${asset.file} as it is on disk, as ${asset.type}`, async () => {
      const response = await app.request(asset.path);
      assert.equal(response.status, 200);
      assert.equal(response.headers.get("content-type"), asset.type);
      assert.equal(response.headers.get("cache-control"), "no-cache");
      assert.equal(await response.text(), onDisk(asset.file));
    });
  }

  it("puts the CSP on the page, the document it governs", async () => {
    const response = await app.request("/");
    assert.equal(response.headers.get("content-security-policy"), DASHBOARD_CSP);
    // The files are not documents: a policy on them would be ignored, so they carry none.
    for (const path of ["/dashboard.js", "/dashboard.css"]) {
      const file = await app.request(path);
      assert.equal(file.headers.get("content-security-policy"), null, path);
    }
  });

  it("has a CSP that allows only this origin and no inline or evaluated code", () => {
    const directives = new Map(
      DASHBOARD_CSP.split("; ").map((d) => [d.split(" ")[0], d.split(" ").slice(1).join(" ")]),
    );
    assert.equal(directives.get("default-src"), "'none'");
    assert.equal(directives.get("script-src"), "'self'");
    assert.equal(directives.get("style-src"), "'self'");
    assert.equal(directives.get("connect-src"), "'self'");
    assert.equal(directives.get("frame-ancestors"), "'none'");
    assert.doesNotMatch(DASHBOARD_CSP, /unsafe-inline|unsafe-eval|\*/);
  });

  it("serves every local file the page links to", async () => {
    const html = onDisk("index.html");
    const links = [...html.matchAll(/(?:src|href)="(\/[^"]*)"/g)].map((m) => m[1]);
    assert.deepEqual(links.sort(), ["/dashboard.css", "/dashboard.js"]);
    for (const link of links) {
      assert.equal((await app.request(link)).status, 200, link);
    }
  });

  it("answers 404 for any other path, its own source files included", async () => {
    for (
      const path of [
        "/index.html",
        "/dashboard.ts",
        "/pages.ts",
        "/pages_test.ts",
        "/dashboard.js/",
        "/dashboard.css.map",
        "/dashboard.mjs",
        "/favicon.ico",
      ]
    ) {
      const response = await app.request(path);
      assert.equal(response.status, 404, path);
      assert.doesNotMatch(await response.text(), /use strict|<!doctype/i, path);
    }
  });

  it("keeps the script free of HTML injection sinks and the page free of inline code", () => {
    // The CSP forbids inline code, and every dynamic piece is built with textContent: a client
    // name or address from the network must never be parsed as markup.
    assert.doesNotMatch(
      onDisk("dashboard.js"),
      /\.(innerHTML|outerHTML|insertAdjacentHTML|write|writeln)\b/,
    );
    assert.doesNotMatch(onDisk("index.html"), /<script>|<style>|style=|\son[a-z]+=/i);
  });
});
