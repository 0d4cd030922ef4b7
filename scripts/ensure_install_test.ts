/**
 * The pre-script of `npm start` and `npm test`: `npm ci` only when node_modules does not match
 * package-lock.json. Run for real with npm, in a throwaway project that has this repository's
 * pre-scripts and no dependencies (so `npm ci` there is quick and offline).
 */

import { after, describe, it } from "node:test";
import assert from "node:assert/strict";
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { baseEnv, ROOT, runCommand } from "../testing/mod.ts";
import { installMismatch as mismatch } from "./ensure_install.mjs";

/** Why the install in `dir` differs from its lockfile ("" when it matches). */
const installMismatch = (dir: string): string => mismatch(dir) ?? "";

const dirs: string[] = [];
after(() => dirs.forEach((dir) => rmSync(dir, { recursive: true, force: true })));

const ours = JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8"));

/** A project with our pre-scripts, a lockfile with `packages`, installed as `installed` says. */
function project(
  packages: Record<string, unknown>,
  installed: Record<string, unknown> | undefined,
): string {
  const dir = mkdtempSync(join(tmpdir(), "tunnelmux-install-"));
  dirs.push(dir);
  mkdirSync(join(dir, "scripts"));
  copyFileSync(
    join(ROOT, "scripts", "ensure_install.mjs"),
    join(dir, "scripts/ensure_install.mjs"),
  );
  const json = (path: string, value: unknown) =>
    writeFileSync(join(dir, path), JSON.stringify(value, null, 2) + "\n");
  json("package.json", {
    name: "probe",
    version: "1.0.0",
    private: true,
    scripts: { prestart: ours.scripts.prestart, start: "echo started" },
  });
  json("package-lock.json", {
    name: "probe",
    version: "1.0.0",
    lockfileVersion: 3,
    requires: true,
    packages: { "": { name: "probe", version: "1.0.0" }, ...packages },
  });
  if (installed) {
    mkdirSync(join(dir, "node_modules"));
    json("node_modules/.package-lock.json", {
      name: "probe",
      version: "1.0.0",
      lockfileVersion: 3,
      requires: true,
      packages: installed,
    });
    // npm ci removes node_modules first: this file survives only if it was not run.
    writeFileSync(join(dir, "node_modules", "marker"), "");
  }
  return dir;
}

const A = { version: "1.0.0", resolved: "https://r/a-1.0.0.tgz", integrity: "sha512-a" };
const OTHER_OS = { ...A, optional: true, os: ["aix"] };

describe("ensure_install", () => {
  it("npm start skips npm ci when the install matches the lockfile", async () => {
    const dir = project({}, {});
    const run = await runCommand("npm", ["start", "--silent"], { cwd: dir, env: baseEnv() });
    assert.equal(run.code, 0, run.stderr);
    assert.match(run.stdout, /started/);
    assert.ok(existsSync(join(dir, "node_modules", "marker")), "npm ci ran: node_modules went");
  });

  it("npm start runs npm ci when nothing is installed", async () => {
    const dir = project({}, undefined);
    const run = await runCommand("npm", ["start", "--silent"], { cwd: dir, env: baseEnv() });
    assert.equal(run.code, 0, run.stderr);
    assert.match(run.stderr, /npm ci: nothing is installed/);
  });

  it("a package at another version, missing or extra is a mismatch", () => {
    assert.equal(
      installMismatch(project({ "node_modules/a": A }, { "node_modules/a": A })),
      "",
    );
    assert.match(
      installMismatch(
        project({ "node_modules/a": A }, { "node_modules/a": { ...A, version: "2" } }),
      ),
      /node_modules\/a: version differs/,
    );
    assert.match(installMismatch(project({ "node_modules/a": A }, {})), /a is not installed/);
    assert.match(
      installMismatch(project({}, { "node_modules/a": A })),
      /a is installed but not in the lockfile/,
    );
  });

  it("an optional package skipped on this platform is no mismatch", () => {
    assert.equal(installMismatch(project({ "node_modules/b": OTHER_OS }, {})), "");
  });

  it("this checkout's install matches its lockfile", () => {
    assert.equal(installMismatch(ROOT), "");
  });
});
